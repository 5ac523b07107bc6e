import { CellDecorations, ICellDecoration } from './cellDecorations';
import { CIConnection } from './connection';
import { Lifecycle } from './lifecycle';
import { NotebookIndex } from './notebooks';
import type { ICellUpdatedEvent, RunEvent } from './protocol';
import { RunTracker } from './runs';
import { SourceStreamer } from './streaming';

/**
 * What a run's events show on its cells: the attempt a cell is at, a cell
 * stopped or changed by an outside agent, the diff of a fix, and Restore on
 * the user's cells a run of this tab fixed, once the run is over.
 *
 * The bridge (`bridge.ts`) does the calls; this reads the events of every
 * run, this tab's or another's, and keeps the cells' decorations true to them.
 */
export class RunDecorations extends Lifecycle {
  constructor(options: RunDecorations.IOptions) {
    super();
    this._index = options.index;
    this._runs = options.runs;
    this._streamer = options.streamer;
    this._decorations = options.decorations;
    this._ownsRun = options.ownsRun;
    this.listen(options.connection.events, this._onEvent);
  }

  private readonly _onEvent = (
    _sender: CIConnection,
    event: RunEvent
  ): void => {
    switch (event.type) {
      case 'attempt':
        if (this._runs.get(event.run_id)?.origin === 'mcp') {
          break; // an outside agent's cell has one try per call: no "attempt" to show
        }
        this._decorations.update(event.cell_id, {
          attempt: event.attempt,
          maxAttempts: event.max_attempts,
          fixed: this._isUsers(event.run_id, event.cell_id)
        });
        if (this._ownsRun(event.run_id)) {
          this._decorations.recordAttempt(
            event.cell_id,
            event.attempt,
            event.max_attempts
          );
        }
        break;
      case 'cell_updated': {
        // The cell's code is complete: no longer read-only, nor "writing…"
        // (a cell waiting for review is edited and run by the user).
        const found = this._index.findCellAnywhere(event.cell_id);
        if (found) {
          this._streamer.flush(found.model);
        }
        if (event.cause === 'stopped') {
          this._decorations.update(event.cell_id, {
            stopped: true,
            streaming: false
          });
          if (this._ownsRun(event.run_id)) {
            this._decorations.recordStopped(event.cell_id);
          }
        } else if (event.cause === 'agent') {
          // An outside agent's edit (a diff), or the code it asks to run (none).
          const agent = this._runs.get(event.run_id)?.agent ?? 'an agent';
          this._decorations.update(event.cell_id, { streaming: false });
          if (event.diff && this._decorations.changed(event, agent)) {
            this._fixed(event.run_id, event.cell_id); // Restore, once it is over
          }
        } else {
          this._decorations.update(event.cell_id, {
            ...shownChange(event),
            fixed: this._isUsers(event.run_id, event.cell_id),
            streaming: false
          });
          this._fixed(event.run_id, event.cell_id);
        }
        break;
      }
      case 'state': {
        // A cell waits for review as the attempt it is for (a fix: the next).
        const view = this._runs.get(event.run_id);
        const cellId = view?.proposal?.cellId;
        if (
          view?.origin !== 'mcp' && // an outside agent's call: one try, no attempt to show
          event.state === 'awaiting_approval' &&
          typeof event.attempt === 'number' &&
          cellId
        ) {
          this._decorations.update(cellId, {
            attempt: event.attempt,
            maxAttempts: event.max_attempts ?? undefined,
            fixed: this._isUsers(event.run_id, cellId)
          });
        }
        break;
      }
      case 'finished': {
        this._streamer.flushAll();
        for (const cellId of this._runs.get(event.run_id)?.cells ?? []) {
          this._decorations.update(cellId, { streaming: false });
        }
        // The run is over: the user's cells it fixed can be restored.
        for (const cellId of this._fixedBy.get(event.run_id) ?? []) {
          if (this._decorations.hasOriginal(cellId)) {
            this._decorations.update(cellId, { restorable: true });
          }
        }
        this._fixedBy.delete(event.run_id);
        break;
      }
      default:
        break;
    }
  };

  /**
   * Whether a cell a run changes is the user's (the run did not insert it:
   * "Fix with jupyter-ci"), as the run's own events say.
   */
  private _isUsers(runId: string, cellId: string): boolean {
    const view = this._runs.get(runId);
    return view !== null && !view.cells.includes(cellId);
  }

  /**
   * Note a user's cell a run of this tab changed (Restore, once it is over).
   */
  private _fixed(runId: string, cellId: string): void {
    if (!this._ownsRun(runId) || !this._isUsers(runId, cellId)) {
      return;
    }
    const cells = this._fixedBy.get(runId) ?? new Set<string>();
    cells.add(cellId);
    this._fixedBy.set(runId, cells);
  }

  private readonly _index: NotebookIndex;
  private readonly _runs: RunTracker;
  private readonly _streamer: SourceStreamer;
  private readonly _decorations: CellDecorations;
  private readonly _ownsRun: (runId: string) => boolean;
  /**
   * The user's cells each run of this tab fixed.
   */
  private readonly _fixedBy = new Map<string, Set<string>>();
}

/**
 * The namespace for `RunDecorations` statics.
 */
export namespace RunDecorations {
  export interface IOptions {
    connection: CIConnection;
    index: NotebookIndex;
    runs: RunTracker;
    streamer: SourceStreamer;
    decorations: CellDecorations;
    /**
     * Whether this tab answers the run's calls (the bridge's `ownsRun`).
     */
    ownsRun: (runId: string) => boolean;
  }
}

/**
 * What a cell's decoration shows of a change of its code: the model's
 * proposal (a fix, or its other proposal after a Reject; the version that ran
 * put back) as the diff of the
 * attempt it is for; the user's edit in review apart from it (the model's
 * stays shown); none once the user's code is put back; nothing for code
 * that streamed in.
 */
function shownChange(event: ICellUpdatedEvent): ICellDecoration {
  switch (event.cause) {
    case 'fix':
    case 'own_fix':
    case 'reproposed':
    case 'kept':
      return {
        diff: event.diff,
        diffAttempt: event.attempt,
        editDiff: '',
        keptBack: event.cause === 'kept'
      };
    case 'edited':
      return { editDiff: event.diff };
    case 'restored':
      // The user's code is back (the proposal was not accepted): no diff.
      return { diff: '', editDiff: '', restored: true };
    default:
      return {};
  }
}
