import { ICellModel } from '@jupyterlab/cells';

import { Lifecycle } from './lifecycle';

/**
 * Writes streamed code into cells at a bounded rate, outside the undo
 * history.
 *
 * The server sends code as it arrives from the model (`append_source`, often
 * a few characters at a time). Each piece is buffered per cell, and the
 * buffers are written at most once per `interval()` milliseconds, so a fast
 * model does not make the editor re-render for every token. Anything that
 * needs the cell's full source (running it, reading it, replacing it) calls
 * `flush` first. Writes happen in a transaction the undo manager does not
 * track: Ctrl+Z in the cell never unwrites the model's code.
 */
export class SourceStreamer extends Lifecycle {
  /**
   * @param interval - the minimum milliseconds between two writes
   */
  constructor(interval: () => number) {
    super();
    this._interval = interval;
  }

  /**
   * Queue `text` for the end of `cell`'s source.
   */
  append(cell: ICellModel, text: string): void {
    if (this.isDisposed || !text) {
      return;
    }
    this._pending.set(cell, (this._pending.get(cell) ?? '') + text);
    this._schedule();
  }

  /**
   * Write what is queued for `cell` now.
   */
  flush(cell: ICellModel): void {
    const text = this._pending.get(cell);
    this._pending.delete(cell);
    if (text) {
      SourceStreamer.write(cell, text);
    }
  }

  /**
   * Forget what is queued for `cell` (its source is being replaced).
   */
  discard(cell: ICellModel): void {
    this._pending.delete(cell);
  }

  /**
   * Write everything queued now.
   */
  flushAll(): void {
    for (const cell of [...this._pending.keys()]) {
      this.flush(cell);
    }
  }

  protected onDispose(): void {
    window.clearTimeout(this._timer);
    this._pending.clear();
  }

  private _schedule(): void {
    if (this._timer) {
      return;
    }
    const wait = Math.max(0, this._interval() - (Date.now() - this._lastWrite));
    this._timer = window.setTimeout(() => {
      this._timer = 0;
      this._lastWrite = Date.now();
      this.flushAll();
    }, wait);
  }

  private readonly _interval: () => number;
  private readonly _pending = new Map<ICellModel, string>();
  private _timer = 0;
  private _lastWrite = 0;
}

/**
 * The namespace for `SourceStreamer` statics.
 */
export namespace SourceStreamer {
  /**
   * Append `text` to a cell's source, outside the undo history.
   */
  export function write(cell: ICellModel, text: string): void {
    if (cell.isDisposed) {
      return;
    }
    const shared = cell.sharedModel;
    shared.transact(() => {
      const end = shared.getSource().length;
      shared.updateSource(end, end, text);
    }, false);
  }

  /**
   * Replace a cell's source, outside the undo history; or, `undoable`, as
   * one step of its own in it (a cell the user wrote: one Ctrl+Z in its
   * editor brings their code back).
   */
  export function replace(
    cell: ICellModel,
    source: string,
    undoable = false
  ): void {
    if (cell.isDisposed) {
      return;
    }
    const shared = cell.sharedModel;
    // The undo manager merges changes close in time: not with the user's typing.
    const history = (shared as Private.IWithUndo).undoManager ?? null;
    if (undoable) {
      history?.stopCapturing();
    }
    shared.transact(() => shared.setSource(source), undoable);
    if (undoable) {
      history?.stopCapturing();
    }
  }
}

namespace Private {
  /**
   * A shared cell's undo manager (a Yjs `UndoManager`; null when the
   * notebook's undo history spans cells).
   */
  export interface IWithUndo {
    undoManager?: { stopCapturing(): void } | null;
  }
}
