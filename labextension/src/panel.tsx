import { ReactWidget, refreshIcon } from '@jupyterlab/ui-components';
import { Message } from '@lumino/messaging';
import * as React from 'react';

import { jupyterCIIcon } from './icons';
import { ServerStatusModel, StatusState } from './status';

/**
 * The id of the jupyter-ci side panel (used by `shell.activateById`).
 */
export const PANEL_ID = 'jupyter-ci-panel';

/**
 * Shown when the server has no model configured.
 */
export const NO_MODEL_HINT =
  'Set c.JupyterCI.model (e.g. openai/gpt-4o-mini) or JUPYTER_CI_MODEL.';

/**
 * The jupyter-ci side panel.
 */
export class JupyterCIPanel extends ReactWidget {
  constructor(options: JupyterCIPanel.IOptions) {
    super();
    this._model = options.model;
    this.id = PANEL_ID;
    this.title.icon = jupyterCIIcon;
    this.title.caption = 'jupyter-ci';
    this.addClass('jp-jupyter-ci-panel');
    // Focusable by script so activation can move focus into the panel.
    this.node.tabIndex = -1;
  }

  /**
   * The status model the panel renders.
   */
  get model(): ServerStatusModel {
    return this._model;
  }

  protected onActivateRequest(msg: Message): void {
    super.onActivateRequest(msg);
    const target =
      this.node.querySelector<HTMLButtonElement>('button') ?? this.node;
    target.focus();
  }

  protected render(): React.ReactElement {
    return <PanelContent model={this._model} />;
  }

  private readonly _model: ServerStatusModel;
}

/**
 * The namespace for `JupyterCIPanel` statics.
 */
export namespace JupyterCIPanel {
  export interface IOptions {
    model: ServerStatusModel;
  }
}

/**
 * Follow a status model's state from a React component.
 */
function useStatusState(model: ServerStatusModel): StatusState {
  const subscribe = React.useCallback(
    (onStoreChange: () => void) => {
      const onChange = (): void => {
        onStoreChange();
      };
      model.stateChanged.connect(onChange);
      return () => {
        model.stateChanged.disconnect(onChange);
      };
    },
    [model]
  );
  // `model.state` keeps its identity until the state changes.
  return React.useSyncExternalStore(subscribe, () => model.state);
}

function PanelContent(props: { model: ServerStatusModel }): React.ReactElement {
  const { model } = props;
  const state = useStatusState(model);
  const refresh = React.useCallback(() => {
    void model.refresh();
  }, [model]);

  return (
    <>
      <div className="jp-jupyter-ci-header">
        <h2 className="jp-jupyter-ci-title">jupyter-ci</h2>
        <button
          type="button"
          className="jp-jupyter-ci-icon-button"
          aria-label="Refresh jupyter-ci server status"
          title="Refresh jupyter-ci server status"
          data-testid="jupyter-ci-refresh"
          onClick={refresh}
        >
          <refreshIcon.react tag="span" className="jp-jupyter-ci-icon" />
        </button>
      </div>
      <div className="jp-jupyter-ci-body">
        <StatusView state={state} onRetry={refresh} />
      </div>
    </>
  );
}

function StatusView(props: {
  state: StatusState;
  onRetry: () => void;
}): React.ReactElement {
  const { state, onRetry } = props;
  switch (state.kind) {
    case 'loading':
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
    case 'ready': {
      const { version, model } = state.status;
      const summary = model
        ? `jupyter-ci ${version} — model: ${model}`
        : `jupyter-ci ${version} — no model configured`;
      return (
        <div
          className="jp-jupyter-ci-status"
          data-testid="jupyter-ci-status"
          role="status"
        >
          <div className="jp-jupyter-ci-status-line">{summary}</div>
          {model ? null : (
            // The space keeps the two sentences apart in the text content.
            <>
              {' '}
              <div className="jp-jupyter-ci-hint" data-testid="jupyter-ci-hint">
                {NO_MODEL_HINT}
              </div>
            </>
          )}
        </div>
      );
    }
    case 'error':
      return (
        <div className="jp-jupyter-ci-error-box">
          <div
            className="jp-jupyter-ci-error"
            data-testid="jupyter-ci-error"
            role="alert"
          >
            {state.message}
          </div>
          <button
            type="button"
            className="jp-jupyter-ci-button"
            aria-label="Retry checking the jupyter-ci server"
            data-testid="jupyter-ci-retry"
            onClick={onRetry}
          >
            Retry
          </button>
        </div>
      );
  }
}
