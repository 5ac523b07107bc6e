import {
  CELL_STATUS_TITLES,
  END_REASON_TITLES,
  LOOKS_WRONG_REASON,
  RATE_LIMITED_REASON
} from '../protocol';
import type {
  EndReason,
  ICellUpdatedEvent,
  IChangedFile,
  IUsage,
  RunEvent,
  RunState,
  TerminalRunState
} from '../protocol';

/**
 * One line of a run's progress in the panel ("Cell 1 inserted",
 * "Error → fixing, attempt 2/3", "Result looks wrong → fixing, ...", ...), linking to its cell
 * when it has one.
 */
export interface IStep {
  label: string;
  cellId: string | null;
  status: 'active' | 'ok' | 'error';
}

/**
 * A cell the run proposes and waits on in review mode.
 */
export interface IProposal {
  cellId: string;
  source: string;
  /**
   * A unified diff for a fix; empty for a new cell.
   */
  diff: string;
}

/**
 * A cell the run generated (or fixed), with its latest complete code.
 */
export interface IRunCell {
  cellId: string;
  /**
   * The cell's code as of its latest `cell_inserted` or `cell_updated` event
   * ('' while its first code is still being written).
   */
  source: string;
}

/**
 * Code the model is writing now: the code as streamed (without the
 * Markdown fence around it), for the cell `cellId` (null until the cell is
 * known: a new cell before it is inserted, another proposal, a fix of the
 * user's cell).
 */
export interface IWriting {
  cellId: string | null;
  text: string;
}

/**
 * What the panel shows of one run: its steps, cells, usage and outcome.
 */
export interface IRunProgress {
  runId: string;
  state: RunState;
  reason: string;
  steps: IStep[];
  /**
   * The cells the run generated or fixed, in the order it first named them.
   */
  cells: IRunCell[];
  /**
   * The code being written, until its cell's `cell_updated` event.
   */
  writing: IWriting | null;
  usage: IUsage | null;
  /**
   * The files the run's cells created or changed (paths relative to the
   * notebook's folder).
   */
  files: IChangedFile[];
  /**
   * The cell waiting for the user's review, while the run waits.
   */
  review: IProposal | null;
  /**
   * The latest cell proposed (inserted or fixed).
   */
  proposal: IProposal | null;
  maxAttempts: number;
  attempt: number;
  error: string | null;
  finished: boolean;
  /**
   * The model's final answer, once the run finished ('' if none).
   */
  answer: string;
}

/**
 * A run's progress before any event.
 */
export function emptyProgress(runId: string): IRunProgress {
  return {
    runId,
    state: 'queued',
    reason: '',
    steps: [],
    cells: [],
    writing: null,
    usage: null,
    files: [],
    review: null,
    proposal: null,
    maxAttempts: 1,
    attempt: 1,
    error: null,
    finished: false,
    answer: ''
  };
}

const FINISHED_LABEL: Record<TerminalRunState, string> = {
  done: 'Done',
  failed: 'Failed',
  stopped: 'Stopped'
};

/**
 * The step shown for each way a cell's code changes after it was inserted
 * (none for `streamed`: the code it streamed is complete, no new step).
 */
const UPDATE_LABEL: Record<ICellUpdatedEvent['cause'], string> = {
  streamed: '',
  fix: 'Fix written',
  own_fix: 'Fixed by jupyter-ci',
  edited: 'Edited by you',
  reproposed: 'Proposed again',
  stopped: 'Stopped before it was complete',
  restored: 'Your code put back',
  kept: 'Back to the version that ran',
  agent: 'Changed by the agent'
};

/**
 * Fold one run event into the run's progress (returns a new object; the
 * steps list is copied, so React sees the change).
 */
export function applyEvent(
  progress: IRunProgress,
  event: RunEvent
): IRunProgress {
  const next: IRunProgress = { ...progress, steps: [...progress.steps] };
  const steps = next.steps;
  switch (event.type) {
    case 'state':
      if (next.finished || event.reason === RATE_LIMITED_REASON) {
        // A wait within the state (its status line says it): no new step.
        break;
      }
      next.state = event.state;
      next.reason = event.reason;
      if (typeof event.max_attempts === 'number') {
        // The run's limit, before any try (a fix of the user's cell starts so).
        next.maxAttempts = event.max_attempts;
      }
      if (event.state === 'awaiting_approval' && next.proposal) {
        next.review = next.proposal;
        steps.push({
          label: 'Waiting for your review',
          cellId: next.proposal.cellId,
          status: 'active'
        });
      } else if (event.state !== 'awaiting_approval') {
        next.review = null;
      }
      if (event.state === 'fixing') {
        // The attempt being written, as the server counts it (never a count
        // of the panel's own: a fix of the user's cell is its attempt 1).
        const count =
          typeof event.attempt === 'number' &&
          typeof event.max_attempts === 'number'
            ? `, attempt ${event.attempt}/${event.max_attempts}`
            : '';
        // A cell that ran but whose result looks wrong is looked at, not an error.
        const cause =
          event.reason === LOOKS_WRONG_REASON ? 'Result looks wrong' : 'Error';
        steps.push({
          label: `${cause} → fixing${count}`,
          cellId: next.proposal?.cellId ?? null,
          status: 'active'
        });
      }
      break;
    case 'cell_inserted':
      next.proposal = {
        cellId: event.cell_id,
        source: event.source,
        diff: ''
      };
      next.cells = Private.withCell(next.cells, event.cell_id, event.source);
      if (event.source !== '') {
        next.writing = null; // inserted with its code: complete
      } else if (next.writing && next.writing.cellId === null) {
        // Inserted empty: the code streaming now goes into it.
        next.writing = { ...next.writing, cellId: event.cell_id };
      }
      steps.push({
        label: `Cell ${event.step} inserted`,
        cellId: event.cell_id,
        status: 'ok'
      });
      break;
    case 'cell_updated': {
      // A streamed cell's code is new, not a change to review as a diff.
      next.proposal = {
        cellId: event.cell_id,
        source: event.source,
        diff: event.cause === 'streamed' ? '' : event.diff
      };
      next.cells = Private.withCell(next.cells, event.cell_id, event.source);
      next.writing = null;
      // Stored before events had a cause: labelled as they were then.
      const cause = event.cause ?? 'fix';
      // An agent's cell to run (no diff) is no change: no step.
      if (UPDATE_LABEL[cause] && (cause !== 'agent' || event.diff)) {
        steps.push({
          label:
            cause === 'fix'
              ? `${UPDATE_LABEL[cause]}, attempt ${event.attempt}/${next.maxAttempts}`
              : UPDATE_LABEL[cause],
          cellId: event.cell_id,
          status: 'ok'
        });
      }
      break;
    }
    case 'cell_deleted':
      // The model stopped before any code of this cell came: it is gone.
      next.cells = next.cells.filter(cell => cell.cellId !== event.cell_id);
      if (next.proposal?.cellId === event.cell_id) {
        next.proposal = null;
      }
      if (next.writing?.cellId === event.cell_id) {
        next.writing = null;
      }
      break;
    case 'token':
      if (event.part === 'code') {
        next.writing = {
          // A fix is written for the cell that failed.
          cellId:
            next.writing?.cellId ??
            event.cell_id ??
            (next.state === 'fixing' ? (next.proposal?.cellId ?? null) : null),
          text: (next.writing?.text ?? '') + event.text
        };
      }
      break;
    case 'attempt':
      next.attempt = event.attempt;
      next.maxAttempts = event.max_attempts;
      break;
    case 'execution_started':
      steps.push({
        label:
          event.attempt > 1
            ? `Running, attempt ${event.attempt}/${next.maxAttempts}`
            : 'Running',
        cellId: event.cell_id,
        status: 'active'
      });
      break;
    case 'execution_finished': {
      for (let i = steps.length - 1; i >= 0; i--) {
        const step = steps[i];
        if (step.cellId === event.cell_id && step.status === 'active') {
          steps[i] = {
            ...step,
            label: `${CELL_STATUS_TITLES[event.status]}${step.label.slice('Running'.length)}`,
            status: event.status === 'ok' ? 'ok' : 'error'
          };
          break;
        }
      }
      break;
    }
    case 'usage':
      next.usage = event.usage;
      break;
    case 'files':
      next.files = event.files;
      break;
    case 'finished': {
      next.finished = true;
      next.answer = event.answer ?? '';
      next.state = event.state;
      next.reason = event.reason;
      next.review = null;
      next.usage = event.summary.usage;
      next.error = event.error?.message ?? null;
      for (let i = 0; i < steps.length; i++) {
        if (steps[i].status === 'active') {
          steps[i] = { ...steps[i], status: 'ok' };
        }
      }
      next.writing = null;
      steps.push({
        label: Private.endLabel(event.state, event.reason),
        cellId: null,
        status: event.state === 'done' ? 'ok' : 'error'
      });
      break;
    }
    default:
      break;
  }
  return next;
}

/**
 * Tokens and cost as one short line ("1,234 tokens · $0.0012").
 */
export function usageLine(usage: IUsage | null): string {
  if (!usage) {
    return '';
  }
  const tokens = usage.prompt_tokens + usage.completion_tokens;
  // As the status line says it (agent/outcome.py, cost_words).
  const cost =
    tokens === 0
      ? 'no cost'
      : usage.cost === null || usage.cost === undefined
        ? 'cost unknown'
        : `$${usage.cost.toFixed(4)}`;
  return `${tokens.toLocaleString('en-US')} tokens · ${cost}`;
}

namespace Private {
  /**
   * The cells with `cellId`'s code now `source` (added if new).
   */
  export function withCell(
    cells: readonly IRunCell[],
    cellId: string,
    source: string
  ): IRunCell[] {
    const index = cells.findIndex(cell => cell.cellId === cellId);
    if (index < 0) {
      return [...cells, { cellId, source }];
    }
    const next = [...cells];
    next[index] = { cellId, source };
    return next;
  }

  /**
   * The last step of a run: how it ended, in the schema's words for its
   * reason ("Failed (the cell still failed at the last attempt)").
   */
  export function endLabel(state: TerminalRunState, reason: string): string {
    const words =
      END_REASON_TITLES[reason as EndReason] ?? reason.replace(/_/g, ' ');
    if (!words || reason === 'answered') {
      return FINISHED_LABEL[state];
    }
    // "Stopped by the user", not "Stopped (stopped by the user)".
    return words.startsWith(state)
      ? `${FINISHED_LABEL[state]}${words.slice(state.length)}`
      : `${FINISHED_LABEL[state]} (${words})`;
  }
}
