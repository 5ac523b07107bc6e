import * as React from 'react';

import type { IChatStatus } from './api';

/**
 * Shown when the server has no model: what to set, and where.
 */
export function SetupCard(props: { status: IChatStatus }): React.ReactElement {
  const { status } = props;
  const ollama = status.ollama_models;
  return (
    <section
      className="jp-jupyter-ci-setup"
      data-testid="jupyter-ci-setup"
      aria-label="Set up a model for jupyter-ci"
    >
      <h3 className="jp-jupyter-ci-setup-title">No model is configured</h3>
      <p>
        jupyter-ci needs a model, configured where the Jupyter server starts
        (keys never go through the browser). Either:
      </p>
      <ul>
        <li>
          in <code>jupyter_server_config.py</code>:{' '}
          <code>c.JupyterCI.model = &quot;openai/gpt-4o-mini&quot;</code>, or
        </li>
        <li>
          the environment variable{' '}
          <code>JUPYTER_CI_MODEL=openai/gpt-4o-mini</code>,
        </li>
      </ul>
      <p>
        and the key in the environment: <code>JUPYTER_CI_API_KEY</code> (or the
        provider&apos;s own variable, such as <code>OPENAI_API_KEY</code>
        ). For an OpenAI-compatible server (vLLM, llama.cpp, a LiteLLM proxy)
        also set <code>c.JupyterCI.api_base</code>. Then restart JupyterLab.
      </p>
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
