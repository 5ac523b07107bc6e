import { NotebookPanel } from '@jupyterlab/notebook';

import { Lifecycle } from './lifecycle';
import { NotebookIndex, watchPanels } from './notebooks';
import { IRunView, RunTracker } from './runs';

/**
 * Where the cells of a new request go, so that a notebook reads in the order
 * of its conversation (README, "The chat panel"): after the cells of the
 * notebook's previous jupyter-ci run, unless the user has selected another
 * cell since that run began, then after that one.
 *
 * "Selected another cell" is told from the active cell: the one active when
 * the previous run began (or, for a run of an earlier page, when the notebook
 * opened) is not a choice, nor is a cell of that run itself; any other is.
 * A run's cells are known from its events (`cell_inserted`, `cell_deleted`),
 * and for runs of an earlier page from the conversation's stored events.
 */
export class CellPlacement extends Lifecycle {
  constructor(index: NotebookIndex, runs: RunTracker) {
    super();
    this._index = index;
    this._runs = runs;
    this.listen(runs.changed, this._onRun);
    this.own(watchPanels(index.tracker, panel => this._watch(panel)));
  }

  /**
   * The cell after which the next request's cells go in `panel` (null: the
   * notebook is empty, or has no active cell).
   *
   * `earlier` lists the cells of the notebook's runs before this page (the
   * stored conversation's), newest run first.
   */
  anchor(
    panel: NotebookPanel,
    earlier: readonly (readonly string[])[] = []
  ): string | null {
    const path = panel.context.path;
    const active = panel.content.activeCell?.model.id ?? null;
    const live = [...(this._order.get(path) ?? [])]
      .reverse()
      .map(runId => this._runs.get(runId)?.cells ?? []);
    for (const cells of [...live, ...earlier]) {
      const last = Private.lastPresent(panel, cells);
      if (last === null) {
        continue; // a run without cells (an answer), or whose cells are gone
      }
      const chosen =
        active !== null &&
        active !== this._baseline.get(path) &&
        !cells.includes(active);
      return chosen ? active : last;
    }
    return active;
  }

  /**
   * The cell active now in the notebook at `path` is not the user's choice
   * of a place (review's Shift+Enter moved the selection on).
   */
  keep(path: string): void {
    const panel = this._index.panel(path);
    if (panel) {
      this._baseline.set(path, panel.content.activeCell?.model.id ?? null);
    }
  }

  /**
   * The cell active once a notebook has opened is where Lab put it, not the
   * user's choice.
   */
  private _watch(panel: NotebookPanel): void {
    void panel.context.ready.then(() => {
      const path = panel.context.path;
      if (!panel.isDisposed && !this._baseline.has(path)) {
        this._baseline.set(path, panel.content.activeCell?.model.id ?? null);
      }
    });
  }

  /**
   * A run heard of for the first time begins: the active cell now is the
   * one the next request's placement compares with.
   */
  private readonly _onRun = (_sender: RunTracker, view: IRunView): void => {
    const path = view.notebookPath;
    if (!path || this._seen.has(view.runId)) {
      return;
    }
    this._seen.add(view.runId);
    const order = this._order.get(path) ?? [];
    order.push(view.runId);
    this._order.set(path, order.slice(-Private.MAX_RUNS));
    const panel = this._index.panel(path);
    if (panel) {
      this._baseline.set(path, panel.content.activeCell?.model.id ?? null);
    }
  };

  private readonly _index: NotebookIndex;
  private readonly _runs: RunTracker;
  private readonly _seen = new Set<string>();
  /**
   * The runs of each notebook this page heard of, oldest first.
   */
  private readonly _order = new Map<string, string[]>();
  /**
   * The active cell of each notebook when its latest run began (or when it
   * opened).
   */
  private readonly _baseline = new Map<string, string | null>();
}

namespace Private {
  /**
   * Runs remembered per notebook.
   */
  export const MAX_RUNS = 50;

  /**
   * The id of the lowest of `cells` in the notebook, or null when none is
   * there.
   */
  export function lastPresent(
    panel: NotebookPanel,
    cells: readonly string[]
  ): string | null {
    if (!cells.length) {
      return null;
    }
    const wanted = new Set(cells);
    const list = panel.content.model?.cells;
    if (!list) {
      return null;
    }
    for (let index = list.length - 1; index >= 0; index--) {
      const id = list.get(index).id;
      if (wanted.has(id)) {
        return id;
      }
    }
    return null;
  }
}
