import { CELL_STATUS_TITLES } from '../protocol';
import type { IUsage, RunEvent, RunState } from '../protocol';

/**
 * One line of a run's progress in the panel ("Cell 1 inserted",
 * "Error → fixing, attempt 2/3", ...), linking to its cell when it has one.
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
 * What the panel shows of one run: its steps, usage and outcome.
 */
export interface IRunProgress {
  runId: string;
  state: RunState;
  reason: string;
  steps: IStep[];
  usage: IUsage | null;
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
    usage: null,
    review: null,
    proposal: null,
    maxAttempts: 1,
    attempt: 1,
    error: null,
    finished: false
  };
}

const FINISHED_LABEL: Record<'done' | 'failed' | 'stopped', string> = {
  done: 'Done',
  failed: 'Failed',
  stopped: 'Stopped'
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
      if (next.finished) {
        break;
      }
      next.state = event.state;
      next.reason = event.reason;
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
        steps.push({
          label: `Error → fixing, attempt ${next.attempt + 1}/${next.maxAttempts}`,
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
      steps.push({
        label: `Cell ${event.step} inserted`,
        cellId: event.cell_id,
        status: 'ok'
      });
      break;
    case 'cell_updated':
      next.proposal = {
        cellId: event.cell_id,
        source: event.source,
        diff: event.diff
      };
      steps.push({
        label: `Fix written (attempt ${event.attempt})`,
        cellId: event.cell_id,
        status: 'ok'
      });
      break;
    case 'token':
      // Code streams into the proposed cell after it was inserted empty.
      if (event.cell_id !== null && next.proposal?.cellId === event.cell_id) {
        next.proposal = {
          ...next.proposal,
          source: next.proposal.source + event.text
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
    case 'finished': {
      next.finished = true;
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
      const reason = event.reason
        ? ` (${event.reason.replace(/_/g, ' ')})`
        : '';
      steps.push({
        label: `${FINISHED_LABEL[event.state]}${reason}`,
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
  const cost =
    usage.cost === null || usage.cost === undefined
      ? 'cost unknown'
      : `$${usage.cost.toFixed(4)}`;
  return `${tokens.toLocaleString('en-US')} tokens · ${cost}`;
}
