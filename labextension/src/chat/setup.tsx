import * as React from 'react';

import type { IChatStatus } from './api';

/**
 * Shown when the server has no usable model: what to set, and where. The
 * command lines are the server's (`status.setup`), which its tests follow
 * word for word.
 */
export function SetupCard(props: { status: IChatStatus }): React.ReactElement {
  const { status } = props;
  const ollama = status.ollama_models;
  const setup = status.setup;
  return (
    <section
      className="jp-jupyter-ci-setup"
      data-testid="jupyter-ci-setup"
      aria-label="Set up a model for jupyter-ci"
    >
      <h3 className="jp-jupyter-ci-setup-title">
        {status.config_problem
          ? 'The configured model cannot be used'
          : 'No model is configured'}
      </h3>
      {status.config_problem ? (
        <p data-testid="jupyter-ci-config-problem">{status.config_problem}</p>
      ) : null}
      <p>
        The Jupyter server calls the model, with the configuration and
        environment it starts with (keys never go through the browser, and a key
        set in a kernel does not reach the server). Start JupyterLab with a
        model and its key:
      </p>
      {setup ? (
        <pre className="jp-jupyter-ci-setup-command">
          <code data-testid="jupyter-ci-setup-command">{setup.command}</code>
        </pre>
      ) : null}
      <p>
        or set <code>c.JupyterCI.model</code> in{' '}
        <code>jupyter_server_config.py</code>, with the key in{' '}
        <code>JUPYTER_CI_API_KEY</code> or the provider&apos;s own variable. For
        an OpenAI-compatible server (vLLM, llama.cpp, a LiteLLM proxy), with its
        key (if it needs one) in <code>JUPYTER_CI_API_KEY</code>:
      </p>
      {setup ? (
        <pre className="jp-jupyter-ci-setup-command">
          <code data-testid="jupyter-ci-setup-local">
            {setup.local_command}
          </code>
        </pre>
      ) : null}
      {ollama && ollama.length > 0 ? (
        <div data-testid="jupyter-ci-ollama">
          <p>A local Ollama answers on its default port. To use it, set:</p>
          <ul>
            {ollama.map(name => (
              <li key={name}>
                <code>c.JupyterCI.model = &quot;{name}&quot;</code>
              </li>
            ))}
          </ul>
        </div>
      ) : (
        <p>
          No local Ollama answers on its default port (<code>ollama serve</code>{' '}
          would offer its models here).
        </p>
      )}
    </section>
  );
}
