import { Cell } from '@jupyterlab/cells';
import { Widget } from '@lumino/widgets';

import { showUnderInput } from './cellBadge';
import { RequestRefusedError } from './connection';
import { Lifecycle } from './lifecycle';
import { NotebookIndex } from './notebooks';
import { IRunView, RunTracker } from './runs';

/**
 * What an outside agent (an MCP client such as Claude Code) is doing in a
 * notebook, shown on the cell it runs, as a `%%ci` cell's status shows a
 * run: the run's status line as the server composed it ("claude-code via
 * jupyter-ci: running a cell") and Stop, while the agent's call runs the
 * cell (ARCHITECTURE.md, "The MCP layer"). In every tab with the notebook
 * open; Stop in the tab that owns the run (its calls go there), which
 * interrupts the cell as a run's Stop does. A cell that ends within
 * `SHOW_AFTER` ms gets none (no bar flashing by for each quick cell).
 */
export class AgentActivity extends Lifecycle {
  constructor(index: NotebookIndex, runs: RunTracker) {
    super();
    this._index = index;
    this._runs = runs;
    this.listen(runs.changed, this._onRun);
  }

  protected onDispose(): void {
    for (const timer of this._pending.values()) {
      window.clearTimeout(timer);
    }
    this._pending.clear();
    for (const runId of [...this._shown.keys()]) {
      this._hide(runId);
    }
  }

  private readonly _onRun = (_sender: RunTracker, view: IRunView): void => {
    if (view.origin !== 'mcp') {
      return;
    }
    if (!Private.running(view)) {
      window.clearTimeout(this._pending.get(view.runId));
      this._pending.delete(view.runId);
      this._hide(view.runId);
      return;
    }
    if (this._shown.has(view.runId)) {
      this._show(view);
    } else if (!this._pending.has(view.runId)) {
      // Shown once the cell has run a moment (the run's view is read again then).
      const runId = view.runId;
      const timer = window.setTimeout(() => {
        this._pending.delete(runId);
        const now = this._runs.get(runId);
        if (now && Private.running(now)) {
          this._show(now);
        }
      }, Private.SHOW_AFTER);
      this._pending.set(runId, timer);
    }
  };

  private _show(view: IRunView): void {
    const cellId = view.attempt?.cellId ?? '';
    const showing = this._shown.get(view.runId);
    if (showing && showing.cellId !== cellId) {
      this._hide(view.runId);
    }
    let shown = this._shown.get(view.runId);
    if (!shown) {
      const bars = this._index
        .cellWidgets(view.notebookPath ?? '', cellId)
        .map(cell => this._attach(cell, view.runId));
      shown = { cellId, bars };
      this._shown.set(view.runId, shown);
    }
    const mine =
      view.owner !== null && view.owner === this._runs.connection.clientId;
    for (const bar of shown.bars) {
      bar.render(view.text, mine);
    }
  }

  private _attach(cell: Cell, runId: string): ActivityBar {
    const bar = new ActivityBar(() => this._stop(runId));
    showUnderInput(cell, bar);
    return bar;
  }

  private _hide(runId: string): void {
    const shown = this._shown.get(runId);
    if (!shown) {
      return;
    }
    this._shown.delete(runId);
    for (const bar of shown.bars) {
      bar.dispose();
    }
  }

  private async _stop(runId: string): Promise<string | null> {
    try {
      await this._runs.connection.request({
        request: 'stop_run',
        run_id: runId
      });
      return null;
    } catch (error) {
      return error instanceof RequestRefusedError || error instanceof Error
        ? error.message
        : String(error);
    }
  }

  private readonly _index: NotebookIndex;
  private readonly _runs: RunTracker;
  private readonly _shown = new Map<
    string,
    { cellId: string; bars: ActivityBar[] }
  >();
  private readonly _pending = new Map<string, number>();
}

namespace Private {
  /**
   * How long (ms) an agent's cell runs before its status and Stop show.
   */
  export const SHOW_AFTER = 500;

  /**
   * Whether the agent's run is running its cell now.
   */
  export function running(view: IRunView): boolean {
    return (
      !!view.attempt?.cellId &&
      !!view.notebookPath &&
      !view.finished &&
      view.state === 'executing'
    );
  }
}

/**
 * The status line and Stop on one view of the agent's cell.
 */
class ActivityBar extends Widget {
  constructor(stop: () => Promise<string | null>) {
    super();
    this._stopRun = stop;
    this.addClass('jp-jupyter-ci-Status');
    this.addClass('jp-jupyter-ci-AgentActivity');
    this.node.dataset.testid = 'jupyter-ci-agent-activity';
    this._line = document.createElement('div');
    this._line.className = 'jp-jupyter-ci-Status-line';
    this._line.setAttribute('role', 'status');
    this._stop = document.createElement('button');
    this._stop.type = 'button';
    this._stop.className =
      'jp-Button jp-mod-styled jp-mod-warn jp-jupyter-ci-button jp-jupyter-ci-Status-stop';
    this._stop.textContent = 'Stop';
    this._stop.setAttribute('aria-label', "Stop the agent's run of this cell");
    this._stop.title = "Stop: interrupt the agent's cell";
    this._stop.dataset.testid = 'jupyter-ci-agent-stop';
    this._stop.addEventListener('click', () => void this._onStop());
    this._error = document.createElement('div');
    this._error.className = 'jp-jupyter-ci-Status-error';
    this._error.hidden = true;
    const row = document.createElement('div');
    row.className = 'jp-jupyter-ci-Status-row';
    row.append(this._line, this._stop);
    this.node.append(row, this._error);
  }

  render(text: string, canStop: boolean): void {
    this._line.textContent = text;
    this._stop.hidden = !canStop;
  }

  private async _onStop(): Promise<void> {
    if (this._stop.disabled) {
      return;
    }
    this._stop.disabled = true;
    this._stop.textContent = 'Stopping…';
    const problem = await this._stopRun();
    if (problem !== null && !this.isDisposed) {
      this._stop.disabled = false;
      this._stop.textContent = 'Stop';
      this._error.hidden = false;
      this._error.textContent = `Could not stop: ${problem}`;
    }
  }

  private readonly _stopRun: () => Promise<string | null>;
  private readonly _line: HTMLDivElement;
  private readonly _stop: HTMLButtonElement;
  private readonly _error: HTMLDivElement;
}
