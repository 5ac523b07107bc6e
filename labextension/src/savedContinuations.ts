import { CIConnection } from './connection';
import { Continuation, IClaim } from './continuation';
import { NotebookIndex } from './notebooks';
import { RunTracker } from './runs';
import { makeStatus } from './statusData';
import { StatusOutputs } from './statusOutput';

/**
 * The cells a `%%ci` request held back (Run All), saved while its run goes
 * on.
 */
export interface ISavedContinuation {
  runId: string;
  /**
   * The client that claimed the request (a duplicated tab copies the
   * storage, not the client).
   */
  clientId: string;
  path: string;
  /**
   * The `%%ci` cell.
   */
  cellId: string;
  /**
   * The held-back cells, in order.
   */
  cells: string[];
}

/**
 * The held-back cells of the `%%ci` requests this browser tab claimed, kept
 * in the tab's session storage (which a reload keeps, as it keeps the tab's
 * identity: `identity.ts`) from the moment they are known until their run
 * ends. A reloaded page runs them once the run is done, as the page that
 * claimed the request would have (`resume`); the page that sees the run end
 * takes them out before it runs them, so no cell runs twice.
 */
export class SavedContinuations {
  constructor(storage: Storage | null = Private.sessionStorage()) {
    this._storage = storage;
  }

  /**
   * Keep the held-back cells of a run's `%%ci` request.
   */
  save(entry: ISavedContinuation): void {
    const kept = this._load().filter(
      other => Private.key(other) !== Private.key(entry)
    );
    this._store([...kept, entry].slice(-Private.MAX_KEPT));
  }

  /**
   * Forget the held-back cells of a run's `%%ci` request (its run ended);
   * whether they were kept.
   */
  take(runId: string, cellId: string): boolean {
    const kept = this._load();
    const rest = kept.filter(
      entry => entry.runId !== runId || entry.cellId !== cellId
    );
    this._store(rest);
    return rest.length < kept.length;
  }

  /**
   * In a page that starts (a reload, perhaps): once connected, for each run
   * of this client with saved cells, wait for the run's end and then run
   * them if it is done, else say in the `%%ci` cell that they did not run.
   * Entries of another client (this tab was duplicated from the one that
   * saved them) are dropped.
   */
  resume(options: SavedContinuations.IResumeOptions): void {
    const entries = this._load();
    if (!entries.length) {
      return;
    }
    void Private.connected(options.connection).then(() => {
      for (const entry of entries) {
        if (entry.clientId !== options.connection.clientId) {
          this.take(entry.runId, entry.cellId);
          continue;
        }
        // Its events, from the start: it may have ended while the page loaded.
        options.connection.follow(entry.runId, true);
        void this._resumeOne(options, entry).catch((error: unknown) => {
          console.error('jupyter-ci: the cells held back were not run', error);
        });
      }
    });
  }

  private async _resumeOne(
    options: SavedContinuations.IResumeOptions,
    entry: ISavedContinuation
  ): Promise<void> {
    const { index, runs, statusOutputs, continuation } = options;
    const view = await runs.whenFinished(entry.runId);
    if (!this.take(entry.runId, entry.cellId)) {
      return; // another page of this tab took them (it saw the end)
    }
    if (!(await index.whenOpen(entry.path, NotebookIndex.OPEN_WAIT))) {
      return;
    }
    if (!statusOutputs.get(entry.cellId)) {
      // The run ended while the page loaded: its cell shows how.
      statusOutputs.follow(
        entry.cellId,
        entry.runId,
        makeStatus({ run_id: entry.runId, state: view.state })
      );
    }
    const claim: IClaim = {
      path: entry.path,
      cellId: entry.cellId,
      requestId: '',
      done: () => Promise.resolve(),
      aborted: () => Promise.resolve(entry.cells)
    };
    if (view.state === 'done') {
      await continuation.continue(claim, entry.runId);
    } else {
      await continuation.holdBack(claim, 'did not finish');
    }
  }

  private _load(): ISavedContinuation[] {
    try {
      const raw = this._storage?.getItem(Private.KEY);
      const parsed: unknown = raw ? JSON.parse(raw) : [];
      return Array.isArray(parsed) ? parsed.filter(Private.isEntry) : [];
    } catch {
      return []; // storage refused, or not ours
    }
  }

  private _store(entries: ISavedContinuation[]): void {
    try {
      if (entries.length) {
        this._storage?.setItem(Private.KEY, JSON.stringify(entries));
      } else {
        this._storage?.removeItem(Private.KEY);
      }
    } catch (error) {
      // Full or refused: a reload then leaves the held-back cells to the user.
      console.debug('jupyter-ci: held-back cells not saved', error);
    }
  }

  private readonly _storage: Storage | null;
}

/**
 * The namespace for `SavedContinuations` statics.
 */
export namespace SavedContinuations {
  export interface IResumeOptions {
    connection: CIConnection;
    runs: RunTracker;
    index: NotebookIndex;
    statusOutputs: StatusOutputs;
    continuation: Continuation;
  }
}

namespace Private {
  export const KEY = 'jupyter-ci:held-back';

  /**
   * Requests kept at most (a tab runs one request per kernel at a time).
   */
  export const MAX_KEPT = 50;

  export function key(entry: ISavedContinuation): string {
    return `${entry.runId}\n${entry.cellId}`;
  }

  export function isEntry(value: unknown): value is ISavedContinuation {
    const entry = value as Partial<ISavedContinuation> | null;
    return (
      typeof entry === 'object' &&
      entry !== null &&
      typeof entry.runId === 'string' &&
      typeof entry.clientId === 'string' &&
      typeof entry.path === 'string' &&
      typeof entry.cellId === 'string' &&
      Array.isArray(entry.cells) &&
      entry.cells.every(cell => typeof cell === 'string')
    );
  }

  export function sessionStorage(): Storage | null {
    try {
      return window.sessionStorage;
    } catch {
      return null;
    }
  }

  /**
   * Resolves once the connection said hello and was welcomed (the tab's
   * identity is final then).
   */
  export function connected(connection: CIConnection): Promise<void> {
    if (connection.status === 'connected') {
      return Promise.resolve();
    }
    return new Promise<void>(resolve => {
      const onStatus = (_sender: CIConnection, status: string): void => {
        if (status === 'connected') {
          connection.statusChanged.disconnect(onStatus);
          resolve();
        }
      };
      connection.statusChanged.connect(onStatus);
    });
  }
}
