import type * as nbformat from '@jupyterlab/nbformat';
import type { PartialJSONObject } from '@lumino/coreutils';

import { STATUS_MIME } from './protocol';
import { TERMINAL_RUN_STATE_VALUES } from './protocol';
import type {
  IChangedFile,
  IErrorInfo,
  IRunSummary,
  RunState
} from './protocol';
import { filesLine, notebookFolder } from './files';
import type { IRunView } from './runs';

/**
 * Where a `%%ci` request is, as its status output says: a run state, or
 * `starting` (claimed, not accepted yet), `refused` (the server said no),
 * `reused` (the server answered without a run: the generated cells are
 * there; the line is the last run's, the note says why), `unavailable`
 * (the handoff could not be claimed).
 */
export type StatusState =
  RunState | 'starting' | 'refused' | 'reused' | 'unavailable';

/**
 * The status output of a `%%ci` cell (mime type `STATUS_MIME`), saved with
 * the notebook next to a `text/plain` rendering of the same.
 */
export interface IStatusData {
  version: 1;
  run_id: string | null;
  state: StatusState;
  reason: string;
  /**
   * The one-line status ("jupyter-ci: done — 1 cell, 2 attempts, ..."): the
   * server's line for a run state (see `statusLine`).
   */
  text: string;
  attempt: number | null;
  max_attempts: number | null;
  summary: IRunSummary | null;
  error: IErrorInfo | null;
  /**
   * A sentence from the server (why no model was called).
   */
  note: string | null;
  /**
   * What happened to the cells after this one that the handoff stopped.
   */
  continuation: string | null;
  /**
   * The files the run's cells created or changed (paths relative to the
   * notebook's folder); null or absent when none.
   */
  files?: IChangedFile[] | null;
  /**
   * The notebook's folder (from the server's root) when the files were
   * listed: where their paths start.
   */
  files_folder?: string | null;
}

/**
 * Whether a status state is final.
 */
export function isTerminal(state: StatusState): boolean {
  return (
    (TERMINAL_RUN_STATE_VALUES as readonly StatusState[]).includes(state) ||
    Private.LOCAL_TERMINAL.includes(state)
  );
}

/**
 * A status with every field, from a few.
 */
export function makeStatus(fields: Partial<IStatusData>): IStatusData {
  const data: IStatusData = {
    version: 1,
    run_id: null,
    state: 'starting',
    reason: '',
    text: '',
    attempt: null,
    max_attempts: null,
    summary: null,
    error: null,
    note: null,
    continuation: null,
    files: null,
    files_folder: null,
    ...fields
  };
  data.text = statusLine(data);
  return data;
}

/**
 * The status of a run, as the tab knows it now, over an earlier status. The
 * state and its line change together, when the server's next line arrives:
 * until its first, the earlier status stands.
 */
export function statusFromRun(base: IStatusData, run: IRunView): IStatusData {
  if (!run.text) {
    return makeStatus({ ...base, run_id: run.runId });
  }
  return makeStatus({
    ...base,
    run_id: run.runId,
    state: run.state,
    reason: run.reason,
    text: run.text,
    attempt: run.attempt?.attempt ?? base.attempt,
    max_attempts: run.attempt?.maxAttempts ?? base.max_attempts,
    summary: run.finished?.summary ?? null,
    error: run.finished?.error ?? null,
    files: run.files.length ? run.files : (base.files ?? null),
    files_folder: notebookFolder(run.notebookPath) ?? base.files_folder ?? null
  });
}

/**
 * Read a status output's data (null when it is not one).
 */
export function readStatus(value: unknown): IStatusData | null {
  if (typeof value !== 'object' || value === null) {
    return null;
  }
  const data = value as Partial<IStatusData>;
  if (data.version !== 1 || typeof data.state !== 'string') {
    return null;
  }
  return makeStatus(data);
}

/**
 * The one-line status. The server composes the line of every run state (its
 * `state` and `finished` events carry it as `text`); the tab composes only
 * those of states no server run has: starting, refused, reused, unavailable,
 * and queued while the server has sent no state for the run.
 */
export function statusLine(data: IStatusData): string {
  switch (data.state) {
    case 'starting':
      return Private.STARTING;
    case 'refused':
    case 'unavailable':
      return `jupyter-ci: not started — ${data.error?.message ?? data.reason}`;
    case 'reused':
      // The last run's line, which still stands (the note says the rest).
      return data.text || 'jupyter-ci: the generated cells are already here.';
    case 'queued':
      return (
        data.text || 'jupyter-ci: queued behind another request in this kernel'
      );
    default:
      // Accepted: the server's line, or, until its first arrives, the start's.
      return data.text || Private.STARTING;
  }
}

/**
 * The text/plain part of the status output: the line, then the error and
 * what happened to the following cells, for frontends without jupyter-ci.
 */
export function statusPlainText(data: IStatusData): string {
  const lines = [data.text];
  const inLine =
    ['refused', 'unavailable'].includes(data.state) ||
    (data.state === 'stopped' && data.reason === 'user');
  if (data.error && !inLine) {
    lines.push(data.error.message);
  }
  if (data.error?.hint) {
    lines.push(data.error.hint);
  }
  if (noteShown(data)) {
    lines.push(data.note);
  }
  if (data.continuation) {
    lines.push(data.continuation);
  }
  const files = filesLine(data.files ?? null);
  if (files) {
    lines.push(files);
  }
  return lines.join('\n');
}

/**
 * Whether the status shows its note under the line (not when the line says
 * it already: a status saved by an earlier version).
 */
export function noteShown(
  data: IStatusData
): data is IStatusData & { note: string } {
  return !!data.note && !data.text.includes(data.note);
}

/**
 * The nbformat output holding a status.
 */
export function statusOutput(data: IStatusData): nbformat.IDisplayData {
  return {
    output_type: 'display_data',
    data: {
      [STATUS_MIME]: data as unknown as PartialJSONObject,
      'text/plain': statusPlainText(data)
    },
    metadata: {}
  };
}

namespace Private {
  /**
   * The final states of a request that started no server run.
   */
  export const LOCAL_TERMINAL: readonly StatusState[] = [
    'refused',
    'reused',
    'unavailable'
  ];

  /**
   * The line of a request the server has not answered yet.
   */
  export const STARTING = 'jupyter-ci: starting…';
}
