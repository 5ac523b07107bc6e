import { ISignal, Signal } from '@lumino/signaling';

import { CIConnection } from '../connection';
import { Lifecycle } from '../lifecycle';
import type { IUsage, RunEvent } from '../protocol';
import { RunTracker } from '../runs';
import { IStoredConversation, IStoredMessage, fetchConversation } from './api';
import { IRunProgress, applyEvent, emptyProgress } from './steps';

/**
 * One entry of a conversation as the panel shows it.
 */
export type ChatEntry =
  | {
      kind: 'user';
      key: string;
      text: string;
      runId?: string | null;
      /**
       * What went with it (files and cells, by name), when the panel sent it.
       */
      attachments?: readonly string[];
    }
  | {
      kind: 'assistant';
      key: string;
      text: string;
      streaming: boolean;
      /**
       * The run it belongs to (null when not known).
       */
      runId: string | null;
    }
  | { kind: 'notice'; key: string; text: string }
  | { kind: 'run'; key: string; progress: IRunProgress };

/**
 * A notebook's conversation: its entries and what its runs cost.
 */
export interface IConversationView {
  path: string;
  entries: readonly ChatEntry[];
  /**
   * The tokens and cost of every run of the conversation (from the server).
   */
  usage: (IUsage & { runs: number }) | null;
  loading: boolean;
  error: string | null;
}

/**
 * The conversations of the notebooks this tab has shown in the panel.
 *
 * Loads each from the server's store the first time it is shown, and folds
 * the run events of runs on that notebook into it as they arrive (the model's
 * prose streaming, notices, and each run's progress).
 */
export class ChatModel extends Lifecycle {
  constructor(connection: CIConnection, runs: RunTracker) {
    super();
    this._connection = connection;
    this._runs = runs;
    this.listen(connection.events, this._onEvent);
  }

  /**
   * Emitted whenever a conversation changes.
   */
  get changed(): ISignal<this, string> {
    return this._changed;
  }

  /**
   * The conversation of the notebook at `path` (loaded on first use).
   */
  conversation(path: string): IConversationView {
    let view = this._views.get(path);
    if (!view) {
      view = { path, entries: [], usage: null, loading: true, error: null };
      this._views.set(path, view);
      void this.reload(path);
    }
    return view;
  }

  /**
   * Read the conversation again from the server (history and usage).
   */
  async reload(path: string): Promise<void> {
    try {
      const stored = await fetchConversation(path);
      const live = (this._views.get(path)?.entries ?? []).filter(
        entry => entry.kind === 'run' && !entry.progress.finished
      );
      const entries: ChatEntry[] = [];
      // A finished run's steps and usage follow its last message, as they
      // did while it ran (a live run keeps its own entry).
      const shown = Private.finishedRuns(stored, live);
      const last = new Map<string, number>();
      stored.messages.forEach((message, index) => {
        if (message.run_id) {
          last.set(message.run_id, index);
        }
      });
      stored.messages.forEach((message, index) => {
        entries.push(Private.entryOf(message, index));
        const runId = message.run_id;
        const progress = runId ? shown.get(runId) : undefined;
        if (runId && progress && last.get(runId) === index) {
          entries.push({ kind: 'run', key: runId, progress });
        }
      });
      this._set(path, {
        entries: [...entries, ...live],
        usage: stored.usage,
        loading: false,
        error: null
      });
      // Events of its runs that came before the conversation was shown (a
      // reloaded page replays its runs as it starts): the history has their
      // messages, not the progress of a run still going.
      const told = new Set(stored.messages.map(message => message.run_id));
      for (const event of this._early.get(path)?.splice(0) ?? []) {
        if (
          !shown.has(event.run_id) &&
          !(event.type === 'message' && told.has(event.run_id))
        ) {
          this._onEvent(this._connection, event);
        }
      }
    } catch (error) {
      this._set(path, {
        loading: false,
        error: error instanceof Error ? error.message : String(error)
      });
    }
  }

  /**
   * Refresh only the conversation's usage totals from the server.
   */
  async refreshUsage(path: string): Promise<void> {
    try {
      const stored = await fetchConversation(path);
      this._set(path, { usage: stored.usage });
    } catch {
      // The totals stay as they were; the next run tries again.
    }
  }

  /**
   * Show the user's request (with the names of what was attached to it), and
   * the run it started, in the conversation.
   */
  addRequest(
    path: string,
    text: string,
    runId: string | null,
    attachments: readonly string[] = []
  ): void {
    const view = this.conversation(path);
    const entries: ChatEntry[] = [
      ...view.entries,
      { kind: 'user', key: `u${++this._keys}`, text, attachments }
    ];
    if (runId) {
      this._runPaths.set(runId, path);
      if (!view.entries.some(e => e.kind === 'run' && e.key === runId)) {
        entries.push({
          kind: 'run',
          key: runId,
          progress: emptyProgress(runId)
        });
      }
    }
    this._set(path, { entries });
  }

  /**
   * Add a note of the panel's own (a refusal, an error) to the conversation.
   */
  addNotice(path: string, text: string): void {
    const view = this.conversation(path);
    this._set(path, {
      entries: [
        ...view.entries,
        { kind: 'notice', key: `n${++this._keys}`, text }
      ]
    });
  }

  /**
   * Forget a conversation locally (after the server cleared it).
   */
  cleared(path: string): void {
    this._set(path, {
      entries: [],
      usage: { prompt_tokens: 0, completion_tokens: 0, cost: 0, runs: 0 }
    });
  }

  /**
   * The progress of a run, if the conversation of `path` shows it.
   */
  progress(path: string, runId: string): IRunProgress | null {
    const entry = this._views
      .get(path)
      ?.entries.find(e => e.kind === 'run' && e.key === runId);
    return entry && entry.kind === 'run' ? entry.progress : null;
  }

  /**
   * The cells of each run the conversation of `path` shows, newest run
   * first (where the next request's cells go depends on them).
   */
  runCells(path: string): string[][] {
    const entries = this._views.get(path)?.entries ?? [];
    const cells: string[][] = [];
    for (const entry of entries) {
      if (entry.kind === 'run') {
        cells.unshift(entry.progress.cells.map(cell => cell.cellId));
      }
    }
    return cells;
  }

  private _pathOf(runId: string): string | null {
    const known = this._runPaths.get(runId);
    if (known) {
      return known;
    }
    const path =
      this._runs.get(runId)?.notebookPath ??
      this._connection.runs.find(run => run.run_id === runId)?.notebook_path ??
      null;
    if (path) {
      this._runPaths.set(runId, path);
    }
    return path;
  }

  private readonly _onEvent = (
    _sender: CIConnection,
    event: RunEvent
  ): void => {
    const path = this._pathOf(event.run_id);
    if (!path) {
      return;
    }
    if (!this._views.has(path)) {
      if (event.type !== 'token') {
        const early = this._early.get(path) ?? [];
        early.push(event);
        early.splice(0, Math.max(0, early.length - Private.MAX_EARLY));
        this._early.set(path, early);
      }
      return;
    }
    const view = this._views.get(path)!;
    const entries = [...view.entries];
    const runId = event.run_id;
    let runIndex = entries.findIndex(e => e.kind === 'run' && e.key === runId);
    if (runIndex < 0) {
      // A run this panel did not start (a %%ci cell, another tab): show its
      // request, unless the conversation's history has it already.
      const info = this._connection.runs.find(run => run.run_id === runId);
      const asked = entries.some(e => e.kind === 'user' && e.runId === runId);
      if (info && !asked) {
        entries.push({
          kind: 'user',
          key: `u${++this._keys}`,
          text: info.origin === 'magic' ? `%%ci ${info.prompt}` : info.prompt
        });
      }
      entries.push({ kind: 'run', key: runId, progress: emptyProgress(runId) });
      runIndex = entries.length - 1;
    }
    const run = entries[runIndex];
    if (run.kind === 'run') {
      entries[runIndex] = { ...run, progress: applyEvent(run.progress, event) };
    }
    const stream = this._streams.get(runId);
    // Only the model's prose streams into the conversation: code streams into
    // its cell, which the run's entry shows.
    if (event.type === 'token' && event.part === 'prose') {
      const index = stream?.open
        ? entries.findIndex(e => e.key === stream.key)
        : -1;
      const previous = entries[index];
      if (previous && previous.kind === 'assistant') {
        entries[index] = { ...previous, text: previous.text + event.text };
      } else {
        const key = `s-${runId}-${++this._keys}`;
        this._streams.set(runId, { key, open: true });
        entries.splice(runIndex, 0, {
          kind: 'assistant',
          key,
          text: event.text,
          streaming: true,
          runId
        });
      }
    } else if (event.type === 'message' && event.role === 'assistant') {
      // The final answer arrives whole after it streamed: replace the stream.
      const index = stream ? entries.findIndex(e => e.key === stream.key) : -1;
      const previous = entries[index];
      const entry: ChatEntry = {
        kind: 'assistant',
        key: previous ? previous.key : `a${++this._keys}`,
        text: event.text,
        streaming: false,
        runId
      };
      if (
        previous &&
        previous.kind === 'assistant' &&
        previous.text.trim() === event.text.trim()
      ) {
        entries[index] = entry;
      } else {
        entries.splice(runIndex, 0, entry);
      }
      this._streams.delete(runId);
    } else if (event.type === 'message') {
      // A notice, or the user's word during the run (a rejected cell).
      const user = event.role === 'user';
      entries.splice(runIndex, 0, {
        kind: user ? 'user' : 'notice',
        key: `${user ? 'u' : 'n'}${++this._keys}`,
        text: event.text
      });
    } else if (event.type !== 'token' && stream?.open) {
      // Anything else the run does ends the reply that was streaming.
      stream.open = false;
      const index = entries.findIndex(e => e.key === stream.key);
      const previous = entries[index];
      if (previous && previous.kind === 'assistant') {
        entries[index] = { ...previous, streaming: false };
      }
    }
    if (event.type === 'finished') {
      this._streams.delete(runId);
      void this.refreshUsage(path);
    }
    this._set(path, { entries });
  };

  private _set(path: string, change: Partial<IConversationView>): void {
    const view = this._views.get(path) ?? {
      path,
      entries: [],
      usage: null,
      loading: false,
      error: null
    };
    this._views.set(path, { ...view, ...change });
    this._changed.emit(path);
  }

  private readonly _connection: CIConnection;
  private readonly _runs: RunTracker;
  private readonly _views = new Map<string, IConversationView>();
  /**
   * Run events (not tokens) of notebooks whose conversation was not shown
   * yet, applied once it is.
   */
  private readonly _early = new Map<string, RunEvent[]>();
  private readonly _runPaths = new Map<string, string>();
  private readonly _streams = new Map<string, { key: string; open: boolean }>();
  private _keys = 0;
  private readonly _changed = new Signal<this, string>(this);
}

namespace Private {
  /**
   * Events kept per notebook before its conversation is shown.
   */
  export const MAX_EARLY = 5_000;

  /**
   * The panel's entry for a stored message.
   */
  export function entryOf(message: IStoredMessage, index: number): ChatEntry {
    const key = `h${index}-${message.time}`;
    if (message.role === 'user') {
      return { kind: 'user', key, text: message.text, runId: message.run_id };
    }
    if (message.role === 'assistant') {
      return {
        kind: 'assistant',
        key,
        text: message.text,
        streaming: false,
        runId: message.run_id
      };
    }
    return { kind: 'notice', key, text: message.text };
  }

  /**
   * The progress of each stored run that finished, from its events (not
   * those shown live).
   */
  export function finishedRuns(
    stored: IStoredConversation,
    live: readonly ChatEntry[]
  ): Map<string, IRunProgress> {
    const liveIds = new Set(live.map(entry => entry.key));
    const progress = new Map<string, IRunProgress>();
    for (const run of stored.runs ?? []) {
      if (
        liveIds.has(run.run_id) ||
        !run.events.some(event => event.type === 'finished')
      ) {
        continue;
      }
      progress.set(
        run.run_id,
        run.events.reduce(applyEvent, emptyProgress(run.run_id))
      );
    }
    return progress;
  }
}
