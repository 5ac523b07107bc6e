import { Cell, ICellModel } from '@jupyterlab/cells';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { DisposableDelegate, IDisposable } from '@lumino/disposable';
import { ISignal, Signal } from '@lumino/signaling';

import { Conditions } from './conditions';
import { Lifecycle } from './lifecycle';

/**
 * A cell found by notebook path and cell id.
 */
export interface IFoundCell {
  /**
   * A panel (view) showing the notebook; its `content.model` holds the cell.
   */
  panel: NotebookPanel;
  /**
   * The cell's position in the notebook.
   */
  index: number;
  /**
   * The cell's model (shared by every view of the notebook).
   */
  model: ICellModel;
  /**
   * The cell's widget in `panel` (null only while the view is being built).
   */
  widget: Cell | null;
}

/**
 * Finds the tab's notebooks by path and their cells by id.
 *
 * Never "the current notebook" nor "the active cell": a run's calls name
 * both, so switching tabs or opening another notebook mid-run changes
 * nothing. Also tells when the set of open notebooks changes (for the
 * server's subscriptions) and remembers which paths were open once (a call
 * for a notebook closed since fails as `notebook_closed`).
 */
export class NotebookIndex extends Lifecycle {
  constructor(tracker: INotebookTracker) {
    super();
    this._tracker = tracker;
    this.own(watchPanels(tracker, panel => this._watch(panel)));
  }

  /**
   * The tracker of the app's notebook panels.
   */
  get tracker(): INotebookTracker {
    return this._tracker;
  }

  /**
   * Emitted when a notebook opens, closes or is renamed.
   */
  get pathsChanged(): ISignal<this, void> {
    return this._pathsChanged;
  }

  /**
   * The paths of the notebooks open in this tab, each once.
   */
  openPaths(): string[] {
    const paths = new Set<string>();
    this._tracker.forEach(panel => {
      if (!panel.isDisposed) {
        paths.add(panel.context.path);
      }
    });
    return [...paths];
  }

  /**
   * Whether a notebook at `path` was open in this tab at some point.
   */
  wasOpen(path: string): boolean {
    return this._everOpen.has(path);
  }

  /**
   * Every live view of the notebook at `path` whose model is loaded, the
   * current widget first.
   */
  panels(path: string): NotebookPanel[] {
    const found = this._tracker.filter(
      panel =>
        !panel.isDisposed &&
        panel.context.path === path &&
        panel.context.isReady &&
        panel.content.model !== null
    );
    const current = this._tracker.currentWidget;
    return found.sort((a, b) => Number(b === current) - Number(a === current));
  }

  /**
   * A view of the notebook at `path`, or null when it is not open.
   */
  panel(path: string): NotebookPanel | null {
    return this.panels(path)[0] ?? null;
  }

  /**
   * Whether the notebook at `path` may open soon: it was never open in this
   * page (a reloaded page opens its notebooks again as it starts), or a view
   * of it is loading.
   */
  isOpening(path: string): boolean {
    return (
      !this.wasOpen(path) ||
      this._tracker.find(
        panel =>
          !panel.isDisposed &&
          panel.context.path === path &&
          !panel.context.isReady
      ) !== undefined
    );
  }

  /**
   * A view of the notebook at `path` once it is open and its kernel session
   * ready (a reloaded page opens its notebooks again as it starts); null if
   * it is not open within `timeout` ms.
   */
  async whenOpen(path: string, timeout: number): Promise<NotebookPanel | null> {
    let panel = this.panel(path);
    if (!panel) {
      const conditions = new Conditions();
      const check = (): void => conditions.check();
      this._pathsChanged.connect(check);
      try {
        await conditions.until(() => this.panel(path) !== null, timeout);
      } finally {
        this._pathsChanged.disconnect(check);
      }
      panel = this.panel(path);
    }
    if (panel) {
      await panel.sessionContext.ready;
    }
    return panel && !panel.isDisposed ? panel : null;
  }

  /**
   * The cell `cellId` of the notebook at `path`, or null.
   */
  findCell(path: string, cellId: string): IFoundCell | null {
    for (const panel of this.panels(path)) {
      const found = NotebookIndex.cellIn(panel, cellId);
      if (found) {
        return found;
      }
    }
    return null;
  }

  /**
   * The cell `cellId` in any open notebook (events name cells, not paths).
   */
  findCellAnywhere(cellId: string): IFoundCell | null {
    for (const path of this.openPaths()) {
      const found = this.findCell(path, cellId);
      if (found) {
        return found;
      }
    }
    return null;
  }

  /**
   * The widgets of cell `cellId` in every view of the notebook at `path`.
   */
  cellWidgets(path: string, cellId: string): Cell[] {
    const widgets: Cell[] = [];
    for (const panel of this.panels(path)) {
      const widget = panel.content.widgets.find(
        cell => !cell.isDisposed && cell.model.id === cellId
      );
      if (widget) {
        widgets.push(widget);
      }
    }
    return widgets;
  }

  private _watch(panel: NotebookPanel): void {
    const changed = (): void => {
      this._everOpen.add(panel.context.path);
      this._pathsChanged.emit();
    };
    this._everOpen.add(panel.context.path);
    panel.context.pathChanged.connect(changed);
    void panel.context.ready.then(changed);
    panel.disposed.connect(() => {
      panel.context.pathChanged.disconnect(changed);
      if (!this.isDisposed) {
        this._pathsChanged.emit();
      }
    });
    this._pathsChanged.emit();
  }

  private readonly _tracker: INotebookTracker;
  private readonly _everOpen = new Set<string>();
  private readonly _pathsChanged = new Signal<this, void>(this);
}

/**
 * Calls `watch` with every notebook panel of the tracker: those open now and
 * those opened later, until the result is disposed.
 */
export function watchPanels(
  tracker: INotebookTracker,
  watch: (panel: NotebookPanel) => void
): IDisposable {
  const onAdded = (_sender: INotebookTracker, panel: NotebookPanel): void =>
    watch(panel);
  tracker.widgetAdded.connect(onAdded);
  tracker.forEach(watch);
  return new DisposableDelegate(() => tracker.widgetAdded.disconnect(onAdded));
}

/**
 * The namespace for `NotebookIndex` statics.
 */
export namespace NotebookIndex {
  /**
   * How long what a reloaded page does for a notebook (a run's call, the
   * cells a request held back) waits for the page to open it again (ms): a
   * reloaded page opens its notebooks again as it starts.
   */
  export const OPEN_WAIT = 30_000;

  /**
   * The cell `cellId` in one notebook view, or null.
   */
  export function cellIn(
    panel: NotebookPanel,
    cellId: string
  ): IFoundCell | null {
    const model = panel.content.model;
    if (!model) {
      return null;
    }
    const cells = model.cells;
    for (let index = 0; index < cells.length; index++) {
      const cell = cells.get(index);
      if (cell.id === cellId) {
        const widget =
          panel.content.widgets.find(w => !w.isDisposed && w.model === cell) ??
          null;
        return { panel, index, model: cell, widget };
      }
    }
    return null;
  }
}
