import type * as nbformat from '@jupyterlab/nbformat';
import type { PartialJSONObject } from '@lumino/coreutils';

import { STATUS_MIME } from './constants';
import type { IErrorInfo, IRunSummary, RunState } from './protocol';
import type { IRunView } from './runs';

/**
 * Where a `%%ci` request is, as its status output says: a run state, or
 * `starting` (claimed, not accepted yet), `refused` (the server said no),
 * `reused` (the server answered without a run: the generated cells are
 * there), `unavailable` (the handoff could not be claimed).
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
   * The one-line status ("jupyter-ci: done — 1 cell, 2 attempts, ...").
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
}

/**
 * Whether a status state is final.
 */
export function isTerminal(state: StatusState): boolean {
  return [
    'done',
    'failed',
    'stopped',
    'refused',
    'reused',
    'unavailable'
  ].includes(state);
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
    ...fields
  };
  data.text = statusLine(data);
  return data;
}

/**
 * The status of a run, as the tab knows it now, over an earlier status.
 */
export function statusFromRun(base: IStatusData, run: IRunView): IStatusData {
  return makeStatus({
    ...base,
    run_id: run.runId,
    state: run.state,
    reason: run.reason,
    attempt: run.attempt?.attempt ?? base.attempt,
    max_attempts: run.attempt?.maxAttempts ?? base.max_attempts,
    summary: run.finished?.summary ?? null,
    error: run.finished?.error ?? null
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
 * The one-line status, as the server's outcome line reads.
 */
export function statusLine(data: IStatusData): string {
  switch (data.state) {
    case 'starting':
      return 'jupyter-ci: starting…';
    case 'refused':
      return `jupyter-ci: not started — ${data.error?.message ?? data.reason}`;
    case 'unavailable':
      return `jupyter-ci: not started — ${data.error?.message ?? data.reason}`;
    case 'reused':
      return `jupyter-ci: ${data.note ?? 'the generated cells are already here.'}`;
    case 'queued':
      return 'jupyter-ci: queued behind another request in this kernel';
    case 'done':
    case 'failed':
    case 'stopped':
      return `jupyter-ci: ${Private.outcome(data)}${Private.numbers(data.summary)}`;
    default: {
      const attempt =
        data.attempt !== null && data.max_attempts !== null
          ? ` — attempt ${data.attempt}/${data.max_attempts}`
          : '';
      return `jupyter-ci: ${data.state.replace('_', ' ')}${attempt}`;
    }
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
  if (data.note && data.state !== 'reused') {
    lines.push(data.note);
  }
  if (data.continuation) {
    lines.push(data.continuation);
  }
  return lines.join('\n');
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
   * Reasons as words.
   */
  const REASONS: Record<string, string> = {
    user: 'stopped by the user',
    max_attempts: 'the cell still failed at the last attempt',
    max_steps: 'reached the step limit',
    inserted: 'inserted, not run',
    rejected: 'rejected in review',
    notebook_unavailable: 'notebook unavailable',
    kernel_restarted: 'the kernel restarted',
    kernel_shutdown: 'the kernel was shut down',
    kernel_died: 'the kernel died',
    disconnected: 'the tab was away too long',
    budget_exceeded: 'over budget',
    model_error: 'model error',
    config_error: 'configuration error',
    bad_code_block: 'no usable code from the model',
    missing_package: 'a package is missing',
    server_shutdown: 'the server stopped',
    internal_error: 'internal error'
  };

  export function outcome(data: IStatusData): string {
    const words = REASONS[data.reason] ?? data.reason.replace(/_/g, ' ');
    if (data.state === 'done') {
      return data.reason === 'answered' || !data.reason
        ? 'done'
        : `done (${words})`;
    }
    if (data.state === 'stopped' && data.reason === 'user') {
      return words;
    }
    return words ? `${data.state} (${words})` : data.state;
  }

  export function numbers(summary: IRunSummary | null): string {
    if (!summary) {
      return '';
    }
    const plural = (n: number, word: string): string =>
      `${n.toLocaleString('en-US')} ${word}${n === 1 ? '' : 's'}`;
    const tokens =
      summary.usage.prompt_tokens + summary.usage.completion_tokens;
    const cost =
      summary.usage.cost === null
        ? 'cost unknown'
        : `$${summary.usage.cost.toFixed(4)}`;
    return (
      ` — ${plural(summary.cells, 'cell')}, ${plural(summary.attempts, 'attempt')}, ` +
      `${plural(tokens, 'token')}, ${cost}, ${summary.seconds.toFixed(1)} s`
    );
  }
}
