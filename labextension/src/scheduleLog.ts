import type { Cell } from '@jupyterlab/cells';
import { Notebook, NotebookActions } from '@jupyterlab/notebook';
import { Conditions } from './conditions';
import { Lifecycle } from './lifecycle';

/**
 * The cells a notebook scheduled and how their executions ended, as
 * JupyterLab's notebook actions announce them (`executionScheduled`, then
 * `executed`), whoever executes them.
 *
 * With jupyter-server-nbmodel the server runs cells with its own kernel
 * client, so their kernel messages say nothing this page can tie to a cell;
 * these two signals still do. A `%%ci` cell run that way is done when
 * `executed` says so, and the cells that Run All queued behind it are those
 * scheduled after it and before it ended: the server cancels them when the
 * handoff stops the queue, and jupyter-ci runs them once its run is done.
 */
export class ScheduleLog extends Lifecycle {
  constructor() {
    super();
    this.listen(NotebookActions.executionScheduled, this._onScheduled);
    this.listen(NotebookActions.executed, this._onExecuted);
  }

  /**
   * Whether the latest execution of the cell ended well; null if the
   * notebook did not schedule it, or it did not end within `timeout` ms.
   */
  async executed(
    notebook: Notebook,
    cellId: string,
    timeout = Private.TIMEOUT
  ): Promise<boolean | null> {
    const record = this._latest(notebook, cellId);
    if (!record) {
      return null;
    }
    await this._conditions.until(() => record.success !== null, timeout);
    return record.success;
  }

  /**
   * The cells (ids, in order) scheduled after the latest execution of
   * `cellId` and before it ended, whose own executions failed: the queue
   * that cell's failure stopped. Waits for them to end (up to `timeout` ms);
   * stops at the first one that ran well.
   */
  async failedAfter(
    notebook: Notebook,
    cellId: string,
    timeout = Private.TIMEOUT
  ): Promise<string[]> {
    const target = this._latest(notebook, cellId);
    if (!target) {
      return [];
    }
    await this._conditions.until(() => target.success !== null, timeout);
    const ended = target.endedAt ?? Number.POSITIVE_INFINITY;
    const queued = (this._records.get(notebook) ?? []).filter(
      record =>
        record.scheduledAt > target.scheduledAt && record.scheduledAt < ended
    );
    await this._conditions.until(
      () => queued.every(record => record.success !== null),
      timeout
    );
    const failed: string[] = [];
    for (const record of queued) {
      if (record.success !== false) {
        break;
      }
      if (!failed.includes(record.cellId)) {
        failed.push(record.cellId);
      }
    }
    return failed;
  }

  protected onDispose(): void {
    this._conditions.releaseAll();
  }

  private readonly _onScheduled = (
    _sender: unknown,
    args: { notebook: Notebook; cell: Cell }
  ): void => {
    const records = this._records.get(args.notebook) ?? [];
    this._ids.set(args.cell, args.cell.model.id);
    records.push({
      cellId: args.cell.model.id,
      scheduledAt: ++this._clock,
      endedAt: null,
      success: null
    });
    while (records.length > Private.MAX_RECORDS) {
      records.shift();
    }
    this._records.set(args.notebook, records);
  };

  private readonly _onExecuted = (
    _sender: unknown,
    args: { notebook: Notebook; cell: Cell; success: boolean }
  ): void => {
    // The id as scheduled: a server-side executor reports the end of a cell
    // whose notebook was closed meanwhile, when its model is gone.
    const cellId = this._ids.get(args.cell);
    const record =
      cellId === undefined ? undefined : this._pending(args.notebook, cellId);
    if (!record) {
      return;
    }
    record.success = args.success;
    record.endedAt = ++this._clock;
    this._conditions.check();
  };

  /**
   * The latest record of the cell.
   */
  private _latest(
    notebook: Notebook,
    cellId: string
  ): Private.IRecord | undefined {
    const records = this._records.get(notebook) ?? [];
    for (let i = records.length - 1; i >= 0; i--) {
      if (records[i].cellId === cellId) {
        return records[i];
      }
    }
    return undefined;
  }

  /**
   * The oldest record of the cell still waiting for its end (executions of
   * one cell end in the order they were scheduled).
   */
  private _pending(
    notebook: Notebook,
    cellId: string
  ): Private.IRecord | undefined {
    return (this._records.get(notebook) ?? []).find(
      record => record.cellId === cellId && record.success === null
    );
  }

  private readonly _records = new WeakMap<Notebook, Private.IRecord[]>();
  private readonly _ids = new WeakMap<Cell, string>();
  private readonly _conditions = new Conditions();
  private _clock = 0;
}

namespace Private {
  /**
   * How long to wait for an execution to end (ms): a long cell before the
   * `%%ci` in the same batch may take a while.
   */
  export const TIMEOUT = 10 * 60_000;

  /**
   * Executions remembered per notebook.
   */
  export const MAX_RECORDS = 1000;

  export interface IRecord {
    cellId: string;
    /**
     * When it was scheduled and ended, on the log's clock.
     */
    scheduledAt: number;
    endedAt: number | null;
    /**
     * How it ended (null while it has not).
     */
    success: boolean | null;
  }
}
