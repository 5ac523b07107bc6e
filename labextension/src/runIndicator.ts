import { NotebookPanel } from '@jupyterlab/notebook';
import { Widget } from '@lumino/widgets';

import { RunTracker } from './runs';

/**
 * A notebook toolbar item that says when a run is in progress on this
 * notebook in another tab. Without real-time collaboration each tab has its
 * own copy of a notebook: a run belongs to the tab that started it, and its
 * cells appear there, not here.
 */
export class RunIndicator extends Widget {
  constructor(panel: NotebookPanel, runs: RunTracker) {
    super();
    this._panel = panel;
    this._runs = runs;
    this.addClass('jp-jupyter-ci-RunIndicator');
    this.node.dataset.testid = 'jupyter-ci-elsewhere';
    this.node.setAttribute('role', 'status');
    // Connected with the widget as receiver: its dispose disconnects them.
    runs.connection.runsChanged.connect(this._update, this);
    panel.context.pathChanged.connect(this._update, this);
    this._update();
  }

  private readonly _update = (): void => {
    const elsewhere = this._runs.runsElsewhere(this._panel.context.path);
    this.node.textContent = elsewhere.length
      ? 'jupyter-ci: a run is in progress in another tab'
      : '';
    this.node.title = elsewhere.length
      ? `Requests: ${elsewhere.map(run => run.prompt).join('; ')}`
      : '';
    this.setHidden(elsewhere.length === 0);
  };

  private readonly _panel: NotebookPanel;
  private readonly _runs: RunTracker;
}

/**
 * Put a run indicator in the toolbar of a notebook panel.
 */
export function addRunIndicator(panel: NotebookPanel, runs: RunTracker): void {
  const indicator = new RunIndicator(panel, runs);
  if (!panel.toolbar.addItem('jupyter-ci-elsewhere', indicator)) {
    indicator.dispose();
    return;
  }
  panel.disposed.connect(() => indicator.dispose());
}
