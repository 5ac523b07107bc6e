import {
  Button,
  HTMLSelect,
  ToolbarButtonComponent,
  refreshIcon
} from '@jupyterlab/ui-components';
import * as React from 'react';

import type { Mode } from '../protocol';
import { ChatController, IChatState } from './controller';
import { ModelPicker } from './setup';

/**
 * The panel's header: the notebook it is bound to, the model, the mode, the
 * share-outputs switch, export and clear.
 */
export function Header(props: {
  controller: ChatController;
  state: IChatState;
}): React.ReactElement {
  const { controller, state } = props;
  const prefs = state.prefs;
  return (
    <div className="jp-jupyter-ci-header">
      <div className="jp-jupyter-ci-header-row">
        <h2 className="jp-jupyter-ci-title">jupyter-ci</h2>
        <span className="jp-jupyter-ci-path" data-testid="jupyter-ci-path">
          {state.path ?? ''}
        </span>
        <ToolbarButtonComponent
          icon={refreshIcon}
          tooltip="Refresh jupyter-ci server status"
          dataset={{ testid: 'jupyter-ci-refresh' }}
          onClick={() => void controller.refreshStatus()}
        />
      </div>
      <div className="jp-jupyter-ci-header-row jp-jupyter-ci-options">
        {state.status ? (
          <ModelPicker
            status={state.status}
            value={prefs.model}
            onChange={model => controller.setModel(model)}
          />
        ) : null}
        <label className="jp-jupyter-ci-field">
          <span>Mode</span>
          <HTMLSelect
            className="jp-jupyter-ci-select"
            data-testid="jupyter-ci-mode"
            aria-label="Mode: auto runs cells, review asks first, insert never runs"
            value={prefs.mode ?? ''}
            onChange={event =>
              controller.setMode((event.target.value || null) as Mode | null)
            }
            options={[
              { value: '', label: 'server default' },
              'auto',
              'review',
              'insert'
            ]}
          />
        </label>
        <label className="jp-jupyter-ci-field jp-jupyter-ci-switch">
          <input
            type="checkbox"
            className="jp-mod-styled"
            data-testid="jupyter-ci-share-outputs"
            aria-label="Share output values and data samples with the model"
            checked={prefs.shareOutputs ?? true}
            onChange={event => controller.setShareOutputs(event.target.checked)}
          />
          <span>Share outputs</span>
        </label>
      </div>
      <div className="jp-jupyter-ci-header-row">
        <Button
          type="button"
          className="jp-jupyter-ci-button"
          minimal
          small
          data-testid="jupyter-ci-export"
          aria-label="Export the conversation as Markdown"
          disabled={state.path === null}
          onClick={() => void controller.exportMarkdown()}
        >
          Export
        </Button>
        <Button
          type="button"
          className="jp-jupyter-ci-button"
          minimal
          small
          data-testid="jupyter-ci-clear"
          aria-label="Clear the conversation"
          disabled={state.path === null}
          onClick={() => void controller.clear()}
        >
          Clear
        </Button>
      </div>
    </div>
  );
}

/**
 * The server's status in one line (version and model), or why it cannot be
 * reached.
 */
export function StatusLine(props: {
  controller: ChatController;
  state: IChatState;
}): React.ReactElement {
  const { controller, state } = props;
  if (state.statusError) {
    return (
      <div className="jp-jupyter-ci-error-box">
        <div
          className="jp-jupyter-ci-error"
          data-testid="jupyter-ci-error"
          role="alert"
        >
          {state.statusError}
        </div>
        <Button
          type="button"
          className="jp-jupyter-ci-button"
          minimal
          aria-label="Retry checking the jupyter-ci server"
          data-testid="jupyter-ci-retry"
          onClick={() => void controller.refreshStatus()}
        >
          Retry
        </Button>
      </div>
    );
  }
  if (!state.status) {
    return (
      <div
        className="jp-jupyter-ci-status jp-mod-loading"
        data-testid="jupyter-ci-status"
        role="status"
        aria-busy="true"
      >
        Checking jupyter-ci server…
      </div>
    );
  }
  const { version, model } = state.status;
  const chosen = state.prefs.model ?? model;
  return (
    <div
      className="jp-jupyter-ci-status"
      data-testid="jupyter-ci-status"
      role="status"
    >
      {chosen
        ? `jupyter-ci ${version} — model: ${chosen}`
        : `jupyter-ci ${version} — no model configured`}
      {state.status.storage_problem ? (
        <div className="jp-jupyter-ci-hint">{state.status.storage_problem}</div>
      ) : null}
    </div>
  );
}
