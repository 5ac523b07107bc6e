import { ICellModel, CodeCell } from '@jupyterlab/cells';
import { NotebookPanel } from '@jupyterlab/notebook';
import { PromiseDelegate } from '@lumino/coreutils';

import { CellDecorations } from './cellDecorations';
import { isCICell } from './constants';
import {
  CELL_METADATA_KEY,
  HANDOFF_ERROR_NAME,
  RESUME_METADATA_KEY
} from './protocol';
import { NotebookIndex } from './notebooks';
import { StatusOutputs } from './statusOutput';

/**
 * A claimed handoff: where its `%%ci` cell is, and how to learn when the
 * kernel is done with it and which cells its queue stop held back.
 */
export interface IClaim {
  path: string;
  cellId: string;
  /**
   * The msg_id of the `%%ci` cell's execute request ('' when not known).
   */
  requestId: string;
  done: () => Promise<void>;
  aborted: () => Promise<string[]>;
}

/**
 * A key for a cell of a notebook (or of a kernel).
 */
export function claimKey(where: string, cellId: string): string {
  return `${where}\n${cellId}`;
}

/**
 * Run All around a `%%ci` cell: the magic stops the kernel's queue; once the
 * request is done the cells that stop held back run, in order, as Run All
 * would have run them (stopping at an error); another `%%ci` among them
 * hands off in turn and carries the rest. If the request failed or was
 * stopped they do not run, and the `%%ci` cell's status says so.
 */
export class Continuation {
  constructor(
    index: NotebookIndex,
    statusOutputs: StatusOutputs,
    stamp: (panel: NotebookPanel, model: ICellModel) => void
  ) {
    this._index = index;
    this._statusOutputs = statusOutputs;
    this._stamp = stamp;
  }

  /**
   * The cells this request held back: those the kernel aborted after the
   * `%%ci` cell, and those an earlier continuation handed on to it. Known
   * soon after the handoff (the kernel refuses them at once); asked once per
   * claim.
   */
  heldBack(claim: IClaim): Promise<string[]> {
    let held = this._held.get(claim);
    if (!held) {
      held = (async () => {
        const aborted = await claim.aborted();
        const key = claimKey(claim.path, claim.cellId);
        const handedOn = (await this._handedOn.get(key)?.promise) ?? [];
        this._handedOn.delete(key);
        return [...aborted, ...handedOn.filter(id => !aborted.includes(id))];
      })();
      this._held.set(claim, held);
    }
    return held;
  }

  private async _heldBack(
    claim: IClaim,
    runId: string | null = null
  ): Promise<string[]> {
    const held = await this.heldBack(claim);
    // The cells of the run this %%ci followed were that run's to run (a Run
    // All again while it went on queued them too): never a second time.
    return runId === null
      ? held
      : held.filter(id => this._runOf(claim.path, id) !== runId);
  }

  private _runOf(path: string, cellId: string): string | null {
    const hint: unknown = this._index
      .findCell(path, cellId)
      ?.model.getMetadata(CELL_METADATA_KEY);
    return CellDecorations.isGenerated(hint) ? hint.run_id : null;
  }

  /**
   * The request did not run to its end: say the held-back cells did not run.
   */
  async holdBack(claim: IClaim, why: string): Promise<void> {
    const cells = await this._heldBack(claim);
    if (cells.length) {
      this._statusOutputs.amend(claim.cellId, {
        continuation: `${count(cells.length)} after this one did not run: the request ${why}.`
      });
    }
  }

  /**
   * The request is done: run the held-back cells, in order. `quiet` (the
   * server answered without a run: Run All over a `%%ci` whose cells are
   * there) says only what went wrong: running the rest is what Run All does.
   */
  async continue(
    claim: IClaim,
    runId: string | null = null,
    quiet = false
  ): Promise<void> {
    const cells = await this._heldBack(claim, runId);
    if (!cells.length) {
      return;
    }
    const total = count(cells.length);
    if (!quiet) {
      this._statusOutputs.amend(claim.cellId, {
        continuation: `running the ${total} after this one that waited for it…`
      });
    }
    const outcome = await this._runCells(claim.path, cells);
    if (quiet && (outcome === 'ran' || outcome === 'handed_on')) {
      return;
    }
    const said: Record<string, string> = {
      ran: `ran the ${total} after this one that waited for it.`,
      failed: `ran the cells after this one until one failed (of ${total}).`,
      handed_on: `ran the cells after this one up to the next %%ci, which runs the rest.`,
      stopped: `the ${total} after this one did not all run: the notebook or its kernel went away.`
    };
    this._statusOutputs.amend(claim.cellId, { continuation: said[outcome] });
  }

  /**
   * Run cells in order, as Run All would have: stop at an error; a `%%ci`
   * that hands off carries the rest with it.
   */
  private async _runCells(
    path: string,
    cellIds: string[]
  ): Promise<'ran' | 'failed' | 'handed_on' | 'stopped'> {
    for (let i = 0; i < cellIds.length; i++) {
      const found = this._index.findCell(path, cellIds[i]);
      if (!found || found.model.type !== 'code') {
        continue; // deleted meanwhile, or no longer code
      }
      const widget = this._index
        .cellWidgets(path, cellIds[i])
        .find(w => w instanceof CodeCell);
      if (!(widget instanceof CodeCell)) {
        continue;
      }
      const panel = found.panel;
      const magic = isCICell(found.model.sharedModel.getSource());
      const rest = new PromiseDelegate<string[]>();
      const key = claimKey(path, cellIds[i]);
      if (magic) {
        this._stamp(panel, found.model);
        this._handedOn.set(key, rest);
      }
      let status: string;
      let ename: string | undefined;
      try {
        const reply = await CodeCell.execute(widget, panel.sessionContext, {
          deletedCells: [],
          recordTiming: panel.content.notebookConfig.recordTiming,
          // The kernel holds back the rest of a handed-off batch; not this.
          [RESUME_METADATA_KEY]: true
        });
        status = reply?.content.status ?? 'ok';
        ename =
          reply && 'ename' in reply.content ? reply.content.ename : undefined;
      } catch {
        rest.resolve([]);
        return 'stopped';
      }
      if (magic && status === 'error' && ename === HANDOFF_ERROR_NAME) {
        rest.resolve(cellIds.slice(i + 1));
        return 'handed_on';
      }
      rest.resolve([]);
      if (status !== 'ok') {
        return 'failed';
      }
    }
    return 'ran';
  }

  private readonly _index: NotebookIndex;
  private readonly _statusOutputs: StatusOutputs;
  private readonly _stamp: (panel: NotebookPanel, model: ICellModel) => void;
  private readonly _handedOn = new Map<string, PromiseDelegate<string[]>>();
  private readonly _held = new WeakMap<IClaim, Promise<string[]>>();
}

function count(cells: number): string {
  return cells === 1 ? '1 cell' : `${cells} cells`;
}
