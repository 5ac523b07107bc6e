import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { STATUS_MIME } from './protocol';
import { RequestRefusedError } from './connection';
import { FocusOrigin } from './focusReturn';
import { FileOpener, filesList } from './files';
import { IRunView, RunTracker } from './runs';
import {
  IStatusData,
  isTerminal,
  noteShown,
  readStatus,
  statusFromRun
} from './statusData';

/**
 * Renders the status output of a `%%ci` cell: the status line, kept live from
 * the run's events while it runs (in any tab with the notebook open), what
 * went wrong, and a Stop button while the run is active.
 *
 * Rendering never starts anything: a renderer runs again whenever a notebook
 * is reopened.
 */
export class StatusRenderer extends Widget implements IRenderMime.IRenderer {
  constructor(runs: RunTracker, open: FileOpener) {
    super();
    this._runs = runs;
    this._open = open;
    this.addClass('jp-jupyter-ci-Status');
    this.node.dataset.testid = 'jupyter-ci-status-output';
    this._line = document.createElement('div');
    this._line.className = 'jp-jupyter-ci-Status-line';
    this._line.setAttribute('role', 'status');
    this._detail = document.createElement('div');
    this._detail.className = 'jp-jupyter-ci-Status-detail';
    this._stop = document.createElement('button');
    this._stop.type = 'button';
    // JupyterLab's Button (ui-components) with its dialogs' warn colours.
    this._stop.className =
      'jp-Button jp-mod-styled jp-mod-warn jp-jupyter-ci-button jp-jupyter-ci-Status-stop';
    this._stop.textContent = 'Stop';
    this._stop.setAttribute('aria-label', 'Stop this jupyter-ci run');
    this._stop.title = 'Stop: abort the model and interrupt the kernel';
    this._stop.dataset.testid = 'jupyter-ci-stop';
    this._stop.addEventListener('click', () => this._onStop());
    // Stop is disabled, then hidden, once pressed: the focus goes back to
    // where it was (by default the notebook), not to the page's body.
    this._focus = new FocusOrigin();
    this.node.addEventListener('focusin', event =>
      this._focus.entered(event, this.node)
    );
    const row = document.createElement('div');
    row.className = 'jp-jupyter-ci-Status-row';
    row.append(this._line, this._stop);
    this.node.append(row, this._detail);
    // Connected with the widget as receiver: its dispose disconnects them.
    runs.changed.connect(this._onRun, this);
    runs.connection.runsChanged.connect(this._schedule, this);
  }

  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    this._data = readStatus(model.data[STATUS_MIME]);
    this._render();
    return Promise.resolve();
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    window.cancelAnimationFrame(this._frame);
    super.dispose();
  }

  private readonly _onRun = (_sender: RunTracker, view: IRunView): void => {
    if (this._data?.run_id === view.runId) {
      this._schedule();
    }
  };

  private readonly _schedule = (): void => {
    if (this._frame || this.isDisposed) {
      return;
    }
    this._frame = window.requestAnimationFrame(() => {
      this._frame = 0;
      this._render();
    });
  };

  private _render(): void {
    const base = this._data;
    if (!base) {
      this._line.textContent = 'jupyter-ci: (unreadable status)';
      this._stop.hidden = true;
      return;
    }
    const view = base.run_id ? this._runs.get(base.run_id) : null;
    const data =
      view && !isTerminal(base.state) ? statusFromRun(base, view) : base;
    const active = data.run_id !== null && this._runs.isActive(data.run_id);
    const running = !isTerminal(data.state);
    this.node.dataset.state = data.state;
    this._line.textContent = data.text;
    this._stop.hidden = !(running && active);
    if (!running) {
      this._stop.disabled = false;
      this._stop.textContent = 'Stop';
    }
    this._detail.replaceChildren(
      ...Private.details(data, view, running, active, this._runs)
    );
    if (data.files && data.files.length > 0) {
      this._detail.append(
        filesList(data.files, data.files_folder ?? null, this._open)
      );
    }
  }

  private _onStop(): void {
    const runId = this._data?.run_id;
    if (!runId || this._stop.disabled) {
      return;
    }
    this._stop.disabled = true;
    this._stop.textContent = 'Stopping…';
    this._focus.restore(
      this.node,
      this.node.closest<HTMLElement>('.jp-Notebook')
    );
    this._runs.connection
      .request({ request: 'stop_run', run_id: runId })
      .catch((error: unknown) => {
        this._stop.disabled = false;
        this._stop.textContent = 'Stop';
        const message =
          error instanceof RequestRefusedError || error instanceof Error
            ? error.message
            : String(error);
        this._detail.append(
          Private.line(`Could not stop: ${message}`, 'error')
        );
      });
  }

  private readonly _runs: RunTracker;
  private readonly _open: FileOpener;
  private readonly _line: HTMLDivElement;
  private readonly _detail: HTMLDivElement;
  private readonly _stop: HTMLButtonElement;
  private readonly _focus: FocusOrigin;
  private _data: IStatusData | null = null;
  private _frame = 0;
}

/**
 * The factory of status renderers.
 */
export function statusRendererFactory(
  runs: RunTracker,
  open: FileOpener
): IRenderMime.IRendererFactory {
  return {
    safe: true,
    mimeTypes: [STATUS_MIME],
    defaultRank: 20,
    createRenderer: () => new StatusRenderer(runs, open)
  };
}

namespace Private {
  export function line(text: string, kind: string): HTMLDivElement {
    const node = document.createElement('div');
    node.className = `jp-jupyter-ci-Status-${kind}`;
    node.textContent = text;
    return node;
  }

  /**
   * The lines under the status line.
   */
  export function details(
    data: IStatusData,
    view: IRunView | null,
    running: boolean,
    active: boolean,
    runs: RunTracker
  ): HTMLElement[] {
    const lines: HTMLElement[] = [];
    if (running && view && view.state === 'generating' && view.tokens > 0) {
      lines.push(
        line(`the model is writing… (${view.tokens} pieces so far)`, 'progress')
      );
    }
    if (running && view?.owner && view.owner !== runs.connection.clientId) {
      lines.push(line('a run is in progress in another tab', 'note'));
    }
    if (
      running &&
      !active &&
      data.state !== 'starting' &&
      runs.connection.status === 'connected'
    ) {
      lines.push(
        line(
          'not running any more: the page that ran it was closed or reloaded',
          'note'
        )
      );
    }
    // Already said by the status line.
    const inLine =
      ['done', 'refused', 'unavailable'].includes(data.state) ||
      (data.state === 'stopped' && data.reason === 'user');
    if (data.error && !inLine) {
      lines.push(line(data.error.message, 'error'));
    }
    if (data.error?.hint) {
      lines.push(line(data.error.hint, 'hint'));
    }
    if (noteShown(data)) {
      lines.push(line(data.note, 'note'));
    }
    if (data.continuation) {
      lines.push(line(data.continuation, 'note'));
    }
    return lines;
  }
}
