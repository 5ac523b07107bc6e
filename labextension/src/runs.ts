import { ISignal, Signal } from '@lumino/signaling';

import { CIConnection } from './connection';
import { Lifecycle } from './lifecycle';
import type {
  IChangedFile,
  IErrorInfo,
  IFinishedEvent,
  IRunInfo,
  IUsage,
  RunEvent,
  RunState
} from './protocol';

/**
 * A cell the run proposed (inserted or changed), with the code the server
 * holds for it.
 */
export interface IProposedCell {
  cellId: string;
  source: string;
}

/**
 * A cell waiting for the user's answer (the run is in `awaiting_approval`):
 * `reason` is the state's ('' for a cell to run, `missing_package` for a
 * `%pip install` cell: Install and continue).
 */
export interface IAwaitedReview extends IProposedCell {
  reason: string;
}

/**
 * What the tab knows of one run, from the server's run list and its events.
 */
export interface IRunView {
  runId: string;
  notebookPath: string | null;
  /**
   * The client id of the tab that started the run, when known.
   */
  owner: string | null;
  /**
   * Where the run comes from: `panel`, `magic` (a `%%ci` cell) or `mcp` (an
   * outside agent's tool call); null until the server's run list says.
   */
  origin: IRunInfo['origin'] | null;
  /**
   * The outside agent whose tool call the run is (origin `mcp`), else null.
   */
  agent: string | null;
  /**
   * The `%%ci` cell (or the panel's anchor) the run answers.
   */
  anchorCellId: string | null;
  state: RunState;
  reason: string;
  /**
   * The run's status line, as the server composed it for its latest state
   * (its `state` and `finished` events); '' until the first arrives.
   */
  text: string;
  /**
   * The try in progress: the cell, its attempt and the run's limit.
   */
  attempt: { cellId: string; attempt: number; maxAttempts: number } | null;
  /**
   * Generated cells, in the order they were inserted (a cell the run deleted
   * again is gone).
   */
  cells: string[];
  /**
   * The latest cell proposed (inserted or changed), null before any.
   */
  proposal: IProposedCell | null;
  /**
   * The cell waiting for the user's answer, while the run waits.
   */
  review: IAwaitedReview | null;
  usage: IUsage | null;
  /**
   * How many pieces of text the model has streamed so far.
   */
  tokens: number;
  /**
   * The latest notice or answer of the run.
   */
  message: string | null;
  error: IErrorInfo | null;
  /**
   * The files the run's cells created or changed so far (its latest `files`
   * event; paths relative to the notebook's folder).
   */
  files: IChangedFile[];
  finished: IFinishedEvent | null;
  /**
   * 0 while the kernel's active run; 1, 2, ... while queued; null when not
   * in the server's list (finished, or not known yet).
   */
  position: number | null;
}

/**
 * Follows every run the tab hears of: the server's run list (all tabs see
 * it) and the events of runs this tab owns or whose notebook it has open.
 */
export class RunTracker extends Lifecycle {
  constructor(connection: CIConnection) {
    super();
    this._connection = connection;
    this.listen(connection.events, this._onEvent);
    this.listen(connection.runsChanged, this._onRuns);
    this._onRuns(connection, connection.runs);
  }

  /**
   * The tab's connection to the server.
   */
  get connection(): CIConnection {
    return this._connection;
  }

  /**
   * Emitted with a run's view whenever it changes (tokens included).
   */
  get changed(): ISignal<this, IRunView> {
    return this._changed;
  }

  /**
   * A run's view, or null when the tab has not heard of it.
   */
  get(runId: string): IRunView | null {
    return this._views.get(runId) ?? null;
  }

  /**
   * Start following a run this tab just started (its events may already be
   * in).
   */
  track(
    runId: string,
    notebookPath: string,
    anchorCellId: string | null
  ): IRunView {
    const view = this._view(runId);
    view.notebookPath ??= notebookPath;
    view.anchorCellId ??= anchorCellId;
    view.owner ??= this._connection.clientId;
    this._connection.follow(runId);
    return view;
  }

  /**
   * Say again that a run's view changed (what it names in the notebook, a
   * cell put back after a reload, is there now).
   */
  touch(runId: string): void {
    const view = this._views.get(runId);
    if (view) {
      this._changed.emit(view);
    }
  }

  /**
   * Resolves with the run's view once it has finished (its `finished` event
   * arrived, live or replayed after a reconnect).
   */
  whenFinished(runId: string): Promise<IRunView> {
    const view = this._views.get(runId);
    if (view?.finished) {
      return Promise.resolve(view);
    }
    return new Promise<IRunView>(resolve => {
      const onChanged = (_sender: RunTracker, changed: IRunView): void => {
        if (changed.runId === runId && changed.finished) {
          this._changed.disconnect(onChanged);
          resolve(changed);
        }
      };
      this._changed.connect(onChanged);
    });
  }

  /**
   * The active or queued runs on a notebook started by another tab.
   */
  runsElsewhere(notebookPath: string): IRunInfo[] {
    return this._connection.runs.filter(
      run =>
        run.notebook_path === notebookPath &&
        run.owner !== this._connection.clientId
    );
  }

  /**
   * Whether the server lists the run as active or queued now.
   */
  isActive(runId: string): boolean {
    return this._connection.runs.some(run => run.run_id === runId);
  }

  private _view(runId: string): IRunView {
    let view = this._views.get(runId);
    if (!view) {
      view = {
        runId,
        notebookPath: null,
        owner: null,
        origin: null,
        agent: null,
        anchorCellId: null,
        state: 'queued',
        reason: '',
        text: '',
        attempt: null,
        cells: [],
        proposal: null,
        review: null,
        usage: null,
        tokens: 0,
        message: null,
        error: null,
        finished: null,
        position: null,
        files: []
      };
      this._views.set(runId, view);
      if (this._views.size > Private.MAX_RUNS) {
        const oldest = this._views.keys().next().value;
        if (oldest !== undefined) {
          this._views.delete(oldest);
        }
      }
    }
    return view;
  }

  private readonly _onRuns = (
    _sender: CIConnection,
    runs: readonly IRunInfo[]
  ): void => {
    const listed = new Set<string>();
    for (const run of runs) {
      listed.add(run.run_id);
      const view = this._view(run.run_id);
      view.notebookPath = run.notebook_path;
      view.owner = run.owner;
      view.origin = run.origin;
      view.agent = run.agent ?? null;
      view.anchorCellId = run.anchor_cell_id;
      view.position = run.position;
      if (!view.finished) {
        view.state = run.state;
      }
      this._changed.emit(view);
    }
    for (const view of this._views.values()) {
      if (view.position !== null && !listed.has(view.runId)) {
        view.position = null;
        this._changed.emit(view);
      }
    }
  };

  private readonly _onEvent = (
    _sender: CIConnection,
    event: RunEvent
  ): void => {
    const view = this._view(event.run_id);
    switch (event.type) {
      case 'state':
        if (!view.finished) {
          view.state = event.state;
          view.reason = event.reason;
          view.text = event.text;
          view.review =
            event.state === 'awaiting_approval' && view.proposal
              ? { ...view.proposal, reason: event.reason }
              : null;
        }
        break;
      case 'token':
        view.tokens += 1;
        break;
      case 'cell_inserted':
        if (!view.cells.includes(event.cell_id)) {
          view.cells.push(event.cell_id);
        }
        view.proposal = { cellId: event.cell_id, source: event.source };
        break;
      case 'cell_updated':
        view.proposal = { cellId: event.cell_id, source: event.source };
        break;
      case 'cell_deleted':
        view.cells = view.cells.filter(cellId => cellId !== event.cell_id);
        if (view.proposal?.cellId === event.cell_id) {
          view.proposal = null;
        }
        break;
      case 'attempt':
        view.attempt = {
          cellId: event.cell_id,
          attempt: event.attempt,
          maxAttempts: event.max_attempts
        };
        break;
      case 'message':
        if (event.role !== 'user') {
          view.message = event.text;
        }
        break;
      case 'usage':
        view.usage = event.usage;
        break;
      case 'files':
        view.files = event.files;
        break;
      case 'finished':
        view.finished = event;
        view.review = null;
        view.state = event.state;
        view.reason = event.reason;
        view.text = event.text;
        view.error = event.error;
        view.usage = event.summary.usage;
        break;
      default:
        break;
    }
    this._changed.emit(view);
  };

  private readonly _connection: CIConnection;
  private readonly _views = new Map<string, IRunView>();
  private readonly _changed = new Signal<this, IRunView>(this);
}

namespace Private {
  /**
   * Runs remembered per page.
   */
  export const MAX_RUNS = 200;
}
