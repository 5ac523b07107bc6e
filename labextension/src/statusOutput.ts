import type { ICodeCellModel } from '@jupyterlab/cells';
import { IDisposable } from '@lumino/disposable';

import { STATUS_MIME } from './protocol';
import { NotebookIndex } from './notebooks';
import { IRunView, RunTracker } from './runs';
import {
  IStatusData,
  makeStatus,
  statusFromRun,
  statusOutput
} from './statusData';

/**
 * Keeps the status output of `%%ci` cells current in the tab that owns their
 * runs: the cell's outputs are replaced by one status output, rewritten when
 * the run's state, attempt or outcome changes (never per token), so a saved
 * notebook reads well anywhere.
 */
export class StatusOutputs implements IDisposable {
  constructor(index: NotebookIndex, runs: RunTracker) {
    this._index = index;
    this._runs = runs;
    runs.changed.connect(this._onRun);
  }

  get isDisposed(): boolean {
    return this._isDisposed;
  }

  /**
   * The status last written for a cell (null if none this page).
   */
  get(cellId: string): IStatusData | null {
    return this._written.get(cellId) ?? null;
  }

  /**
   * Replace the cell's outputs with the status; false if the cell is gone.
   */
  write(cellId: string, data: IStatusData): boolean {
    this._written.set(cellId, data);
    const found = this._index.findCellAnywhere(cellId);
    if (!found || found.model.type !== 'code') {
      return false;
    }
    const outputs = (found.model as ICodeCellModel).outputs;
    const output = statusOutput(data);
    const current = outputs.length === 1 ? outputs.get(0) : null;
    if (current && STATUS_MIME in current.data) {
      if (JSON.stringify(current.toJSON()) !== JSON.stringify(output)) {
        outputs.set(0, output);
      }
    } else {
      outputs.clear();
      outputs.add(output);
    }
    return true;
  }

  /**
   * Keep the cell's status following the run until it ends.
   */
  follow(cellId: string, runId: string, base: IStatusData): void {
    this.release(cellId);
    this._followed.set(runId, { cellId, base });
    const view = this._runs.get(runId);
    if (view) {
      this._onRun(this._runs, view);
    } else {
      this.write(cellId, base);
    }
  }

  /**
   * Stop following runs for the cell: a newer request of the cell takes its
   * status over.
   */
  release(cellId: string): void {
    for (const [runId, followed] of this._followed) {
      if (followed.cellId === cellId) {
        this._followed.delete(runId);
      }
    }
  }

  /**
   * Change the status of a followed run's cell (e.g. its continuation).
   */
  amend(cellId: string, change: Partial<IStatusData>): void {
    const current = this._written.get(cellId);
    if (!current) {
      return;
    }
    for (const followed of this._followed.values()) {
      if (followed.cellId === cellId) {
        followed.base = { ...followed.base, ...change };
      }
    }
    this.write(cellId, makeStatus({ ...current, ...change }));
  }

  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    this._runs.changed.disconnect(this._onRun);
  }

  private readonly _onRun = (_sender: RunTracker, view: IRunView): void => {
    const followed = this._followed.get(view.runId);
    if (!followed) {
      return;
    }
    const data = statusFromRun(followed.base, view);
    const previous = this._written.get(followed.cellId);
    if (previous && JSON.stringify(previous) === JSON.stringify(data)) {
      return; // a token: nothing to save
    }
    this.write(followed.cellId, data);
    if (view.finished) {
      this._followed.delete(view.runId);
    }
  };

  private readonly _index: NotebookIndex;
  private readonly _runs: RunTracker;
  private readonly _written = new Map<string, IStatusData>();
  private readonly _followed = new Map<
    string,
    { cellId: string; base: IStatusData }
  >();
  private _isDisposed = false;
}
