import { Cell, ICellModel } from '@jupyterlab/cells';
import { Notebook, NotebookActions, NotebookPanel } from '@jupyterlab/notebook';

import { decorate, ICellDecoration } from './cellBadge';
import { CELL_METADATA_KEY as METADATA_KEY } from './protocol';
import { NotebookIndex } from './notebooks';
import { SourceStreamer } from './streaming';

export type { ICellDecoration } from './cellBadge';

/**
 * The marks jupyter-ci puts on generated cells, in every view of a notebook:
 * a small badge (generated, attempt x/y, stopped before running), the
 * before/after diff of the latest fix, and read-only while code streams in.
 *
 * Decorations are views only: nothing here is saved with the notebook, except
 * the attempt count and the stop, which `recordAttempt` and `recordStopped`
 * write into the cell's `metadata.jupyter_ci` hint (outside the undo
 * history). A stopped cell's mark goes once the user runs the cell.
 *
 * A cell the user wrote and jupyter-ci fixed stays theirs: it is badged
 * "fixed by jupyter-ci", its fix shows as a diff, and once the run is over a
 * Restore button (labelled, in the tab order) puts back the code it had
 * before the fix (`rememberOriginal`), as one Ctrl+Z in its editor does.
 * That code is kept in the cell's hint too (`jupyter_ci.fixed`, while the
 * cell holds other code), so the badge and Restore come back after a reload,
 * when the editor's undo history is gone.
 */
export class CellDecorations {
  constructor(index: NotebookIndex) {
    this._index = index;
    NotebookActions.executionScheduled.connect(this._onScheduled);
  }

  /**
   * Change a cell's decoration (found in any open notebook) and show it.
   */
  update(cellId: string, change: ICellDecoration): void {
    const previous = this._states.get(cellId);
    const state = { ...(previous ?? {}), ...change };
    if (previous && Private.same(previous, state)) {
      return; // e.g. every piece of streamed code says "streaming"
    }
    this._states.set(cellId, state);
    const found = this._index.findCellAnywhere(cellId);
    if (found) {
      this._apply(found.panel.context.path, cellId, state);
    }
  }

  /**
   * Show a cell's decoration in every view of the notebook at `path`.
   */
  show(path: string, cellId: string): void {
    this._apply(path, cellId, this._states.get(cellId) ?? {});
  }

  /**
   * Badge every generated cell of a notebook view (on open, and as cells
   * change), with whatever this page knows of them.
   */
  scan(panel: NotebookPanel): void {
    const model = panel.content.model;
    if (!model || panel.isDisposed) {
      return;
    }
    for (const widget of panel.content.widgets) {
      const hint: unknown = widget.model.getMetadata(METADATA_KEY);
      const fixed = CellDecorations.fixedOf(hint);
      if (fixed) {
        this._scanFixed(widget, fixed);
      } else if (CellDecorations.isGenerated(hint)) {
        const saved: ICellDecoration = {};
        if (typeof hint['attempt'] === 'number') {
          saved.attempt = hint['attempt'];
        }
        if (typeof hint['max_attempts'] === 'number') {
          saved.maxAttempts = hint['max_attempts'];
        }
        if (typeof hint['agent'] === 'string') {
          saved.agent = hint['agent'];
        }
        if (hint['stopped'] === true) {
          saved.stopped = true;
        }
        const state = this._states.get(widget.model.id) ?? {};
        decorate(widget, { ...saved, ...state }, () =>
          this.restore(widget.model.id)
        );
      }
    }
  }

  /**
   * Record a cell's attempt count and the run's limit in its
   * `metadata.jupyter_ci` hint (the badge reads the same after a reload).
   */
  recordAttempt(cellId: string, attempt: number, maxAttempts: number): void {
    this._record(cellId, hint => ({
      ...hint,
      attempt,
      max_attempts: maxAttempts
    }));
  }

  /**
   * Record in the cell's `metadata.jupyter_ci` hint that the run was stopped
   * while the model wrote it.
   */
  recordStopped(cellId: string): void {
    this._record(cellId, hint => ({ ...hint, stopped: true }));
  }

  /**
   * Forget a cell (deleted).
   */
  forget(cellId: string): void {
    this._states.delete(cellId);
    this._originals.delete(cellId);
  }

  /**
   * Remember the user's code of a cell a run of this tab is about to fix
   * (the first time only: Restore puts back what the user wrote), here and
   * in the cell's hint.
   */
  rememberOriginal(cellId: string, runId: string, model: ICellModel): void {
    if (this._originals.get(cellId)?.runId === runId) {
      return;
    }
    this._keepOriginal(model, {
      run_id: runId,
      original: model.sharedModel.getSource()
    });
    this._writeFixedHint(model, true);
  }

  /**
   * An outside agent (an MCP client's edit_cell) changed a cell: its diff,
   * badged "changed by …". On a cell of the user's (not one an agent or
   * jupyter-ci added) the hint names the agent too, next to the user's code
   * (`rememberOriginal`), so a reload badges it the same, with Restore;
   * returns whether the cell is the user's.
   */
  changed(event: { cell_id: string; diff: string }, agent: string): boolean {
    this.update(event.cell_id, { diff: event.diff, changedBy: agent });
    const found = this._index.findCellAnywhere(event.cell_id);
    const hint: unknown = found?.model.getMetadata(METADATA_KEY);
    if (!found || CellDecorations.isGenerated(hint)) {
      return false;
    }
    const original = this._originals.get(event.cell_id);
    if (original && original.agent !== agent) {
      original.agent = agent;
      if (CellDecorations.fixedOf(hint)) {
        this._writeFixedHint(found.model, true);
      }
    }
    return true;
  }

  /**
   * A user's cell jupyter-ci fixed (or an outside agent changed), as its
   * hint says (this page was loaded after the change): badged so, with
   * Restore, unless it holds the user's code.
   */
  private _scanFixed(widget: Cell, fixed: CellDecorations.IFixed): void {
    const model = widget.model;
    if (!this._originals.has(model.id)) {
      if (model.sharedModel.getSource() === fixed.original) {
        return; // the user's code: nothing to restore
      }
      this._keepOriginal(model, fixed);
      const hint = model.getMetadata(METADATA_KEY) as Record<string, unknown>;
      this._states.set(model.id, {
        fixed: true,
        restorable: true,
        restored: false,
        ...(fixed.agent !== undefined && { changedBy: fixed.agent }),
        ...(typeof hint['attempt'] === 'number'
          ? { attempt: hint['attempt'] }
          : {}),
        ...(typeof hint['max_attempts'] === 'number'
          ? { maxAttempts: hint['max_attempts'] }
          : {}),
        ...(this._states.get(model.id) ?? {})
      });
    }
    decorate(widget, this._states.get(model.id) ?? {}, () =>
      this.restore(model.id)
    );
  }

  private _keepOriginal(
    model: ICellModel,
    fixed: CellDecorations.IFixed
  ): void {
    const cellId = model.id;
    this._originals.set(cellId, {
      runId: fixed.run_id,
      source: fixed.original,
      ...(fixed.agent !== undefined && { agent: fixed.agent })
    });
    if (!this._following.has(cellId)) {
      // Ctrl+Z, Ctrl+Shift+Z and Restore all change the source: the badge,
      // the diff and Restore follow whether it is the user's code again.
      this._following.add(cellId);
      model.contentChanged.connect(() => this._followSource(cellId, model));
    }
  }

  /**
   * Whether Restore can put the user's code of the cell back.
   */
  hasOriginal(cellId: string): boolean {
    return this._originals.has(cellId);
  }

  /**
   * Put the user's code back into a cell jupyter-ci fixed, in the cell's undo
   * history (Ctrl+Z brings the fix back).
   */
  restore(cellId: string): void {
    const original = this._originals.get(cellId);
    const found = this._index.findCellAnywhere(cellId);
    if (original === undefined || !found) {
      return;
    }
    SourceStreamer.replace(found.model, original.source, true);
  }

  /**
   * A fixed cell's source changed: is it the user's code again?
   */
  private _followSource(cellId: string, model: ICellModel): void {
    const original = this._originals.get(cellId);
    if (!original || model.isDisposed) {
      return;
    }
    const restored = model.sharedModel.getSource() === original.source;
    if ((this._states.get(cellId)?.restored ?? false) !== restored) {
      this.update(cellId, { restored });
      this._writeFixedHint(model, !restored);
    }
  }

  /**
   * Keep the user's code of a fixed cell in its hint while the cell holds
   * other code (`present`), with the attempt the badge shows; drop it once
   * the cell holds the user's code again. Outside the undo history.
   */
  private _writeFixedHint(model: ICellModel, present: boolean): void {
    const original = this._originals.get(model.id);
    const hint = model.getMetadata(METADATA_KEY) as unknown;
    const rest: Record<string, unknown> =
      typeof hint === 'object' && hint !== null && !Array.isArray(hint)
        ? { ...(hint as Record<string, unknown>) }
        : {};
    if (CellDecorations.isGenerated(rest)) {
      return; // a generated cell has the run's hint
    }
    delete rest['fixed'];
    delete rest['attempt'];
    delete rest['max_attempts'];
    const state = this._states.get(model.id);
    const next: Record<string, unknown> =
      present && original
        ? {
            ...rest,
            fixed: {
              run_id: original.runId,
              original: original.source,
              ...(original.agent !== undefined && { agent: original.agent })
            },
            ...(state?.attempt !== undefined && { attempt: state.attempt }),
            ...(state?.maxAttempts !== undefined && {
              max_attempts: state.maxAttempts
            })
          }
        : rest;
    model.sharedModel.transact(() => {
      if (Object.keys(next).length) {
        model.setMetadata(METADATA_KEY, next);
      } else {
        model.deleteMetadata(METADATA_KEY);
      }
    }, false);
  }

  /**
   * Change a generated (or fixed) cell's hint, outside the undo history.
   */
  private _record(
    cellId: string,
    change: (hint: Record<string, unknown>) => Record<string, unknown>
  ): void {
    const found = this._index.findCellAnywhere(cellId);
    if (!found) {
      return;
    }
    const hint = found.model.getMetadata(METADATA_KEY) as unknown;
    if (!CellDecorations.isGenerated(hint) && !CellDecorations.fixedOf(hint)) {
      return;
    }
    const shared = found.model.sharedModel;
    shared.transact(() => {
      found.model.setMetadata(
        METADATA_KEY,
        change(hint as Record<string, unknown>)
      );
    }, false);
  }

  /**
   * The user runs a cell: one stopped before running is no longer.
   */
  private readonly _onScheduled = (
    _sender: unknown,
    args: { notebook: Notebook; cell: Cell }
  ): void => {
    const model = args.cell.model;
    const hint = model.getMetadata(METADATA_KEY) as unknown;
    const shown = this._states.get(model.id)?.stopped;
    if (!CellDecorations.isGenerated(hint) || (!hint['stopped'] && !shown)) {
      return;
    }
    if (hint['stopped']) {
      this._record(model.id, ({ stopped: _dropped, ...rest }) => rest);
    }
    const state: ICellDecoration = {
      ...(typeof hint['attempt'] === 'number'
        ? { attempt: hint['attempt'] }
        : {}),
      ...(typeof hint['max_attempts'] === 'number'
        ? { maxAttempts: hint['max_attempts'] }
        : {}),
      ...(this._states.get(model.id) ?? {}),
      stopped: false
    };
    this._states.set(model.id, state);
    decorate(args.cell, state, () => this.restore(model.id));
  };

  private _apply(path: string, cellId: string, state: ICellDecoration): void {
    for (const widget of this._index.cellWidgets(path, cellId)) {
      decorate(widget, state, () => this.restore(cellId));
    }
  }

  private readonly _index: NotebookIndex;
  private readonly _states = new Map<string, ICellDecoration>();
  /**
   * The user's code of the cells this tab's runs fixed (or an outside agent
   * changed), before the change.
   */
  private readonly _originals = new Map<
    string,
    { runId: string; source: string; agent?: string }
  >();
  /**
   * The fixed cells whose source changes are followed.
   */
  private readonly _following = new Set<string>();
}

/**
 * The namespace for `CellDecorations` statics.
 */
export namespace CellDecorations {
  /**
   * Whether a `metadata.jupyter_ci` value marks a generated cell (a hint:
   * copy and paste duplicates it; the server's run record is the truth).
   */
  export function isGenerated(
    hint: unknown
  ): hint is Record<string, unknown> & { run_id: string } {
    return (
      typeof hint === 'object' &&
      hint !== null &&
      typeof (hint as Record<string, unknown>)['run_id'] === 'string'
    );
  }

  /**
   * The user's code of a cell jupyter-ci fixed, and the run that fixed it
   * (with the outside agent whose edit it was, if one's), as the cell's
   * `metadata.jupyter_ci.fixed` hint keeps them.
   */
  export interface IFixed {
    run_id: string;
    original: string;
    agent?: string;
  }

  /**
   * The `fixed` part of a `metadata.jupyter_ci` value (null when none).
   */
  export function fixedOf(hint: unknown): IFixed | null {
    if (typeof hint !== 'object' || hint === null) {
      return null;
    }
    const fixed = (hint as Record<string, unknown>)['fixed'];
    if (typeof fixed !== 'object' || fixed === null) {
      return null;
    }
    const { run_id: runId, original, agent } = fixed as Record<string, unknown>;
    if (typeof runId !== 'string' || typeof original !== 'string') {
      return null;
    }
    return {
      run_id: runId,
      original,
      ...(typeof agent === 'string' && { agent })
    };
  }
}

namespace Private {
  export function same(a: ICellDecoration, b: ICellDecoration): boolean {
    return (
      a.attempt === b.attempt &&
      a.maxAttempts === b.maxAttempts &&
      a.streaming === b.streaming &&
      a.diff === b.diff &&
      a.diffAttempt === b.diffAttempt &&
      a.editDiff === b.editDiff &&
      a.stopped === b.stopped &&
      a.fixed === b.fixed &&
      a.restorable === b.restorable &&
      a.restored === b.restored &&
      a.agent === b.agent &&
      a.changedBy === b.changedBy
    );
  }
}
