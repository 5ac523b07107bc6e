import { ISessionContext } from '@jupyterlab/apputils';
import { CodeCell } from '@jupyterlab/cells';
import type * as nbformat from '@jupyterlab/nbformat';
import { Kernel, KernelMessage } from '@jupyterlab/services';
import type { JSONObject } from '@lumino/coreutils';

import {
  CELL_METADATA_KEY as METADATA_KEY,
  REPLY_GRACE_SECONDS,
  RESUME_METADATA_KEY,
  RUN_METADATA_KEY
} from './protocol';
import type { ReplyStatus } from './protocol';

/**
 * Why a call could not be done, with the protocol's error code
 * (`notebook_not_open`, `cell_not_found`, `kernel_dead`, ...).
 */
export class CallError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly hint?: string
  ) {
    super(message);
    this.name = 'CallError';
  }
}

/**
 * How one of jupyter-ci's executions of a cell went, as the kernel said: the
 * server decides from it how the cell ended (the tab does not classify).
 */
export interface IExecution {
  /**
   * The execute_reply's status; null when no reply came for our request (the
   * user ran the cell again over ours, or the kernel went idle and replied
   * not within the protocol's `ReplyGraceSeconds`).
   */
  replyStatus: ReplyStatus | null;
  /**
   * The cell's outputs, read from its model once the execution was done.
   */
  outputs: nbformat.IOutput[];
  executionCount: number | null;
  /**
   * When the kernel began the cell (its execute_input), epoch seconds.
   */
  startedAt: number | null;
  /**
   * The kernel's own time for the cell (execute_input to reply), seconds.
   */
  kernelSeconds: number | null;
  /**
   * The text/plain value of the options' `expression`, evaluated by the
   * kernel with the cell; null when it was not (no expression, or the cell
   * did not end well: kernels evaluate user expressions only then).
   */
  expressionValue: string | null;
}

/**
 * Options of `executeCell`.
 */
export interface IExecuteOptions {
  cell: CodeCell;
  sessionContext: ISessionContext;
  /**
   * Called once, when the kernel begins the cell (epoch seconds), with the
   * msg_id of the cell's execute request (null for an empty cell, which is
   * not sent).
   */
  onStarted: (startedAt: number, msgId: string | null) => void;
  /**
   * Whether the notebook was closed (then the execution is `notebook_closed`).
   */
  isClosed: () => boolean;
  /**
   * An expression for the kernel to evaluate with the cell, as a user
   * expression of the same request (the server's files snapshot).
   */
  expression?: string;
  /**
   * The run whose cell this is (named in the request's metadata: `%%ci`
   * never starts a run from it).
   */
  runId: string;
}

/**
 * Run a code cell in the notebook's kernel the way JupyterLab does, with the
 * cell's output area attached to the execution (widgets, rich display,
 * `update_display_data` and the execution count behave natively), but with
 * stdin off and `stop_on_error` off: it is jupyter-ci's request, not the
 * user's queue.
 *
 * @throws {CallError} `kernel_unavailable`, `kernel_dead`, `kernel_restarted`
 *   or `notebook_closed` when the execution cannot happen or cannot end
 */
export async function executeCell(
  options: IExecuteOptions
): Promise<IExecution> {
  const { cell, sessionContext, onStarted, isClosed, expression, runId } =
    options;
  const kernel = sessionContext.session?.kernel ?? null;
  if (!kernel) {
    throw new CallError(
      'kernel_unavailable',
      'The notebook has no kernel.',
      'Start or select a kernel for the notebook.'
    );
  }
  if (kernel.status === 'dead') {
    throw new CallError('kernel_dead', 'The notebook’s kernel is dead.');
  }
  const model = cell.model;
  const code = model.sharedModel.getSource();
  model.sharedModel.transact(() => model.clearExecution(), false);
  cell.outputHidden = false;
  if (!code.trim()) {
    // JupyterLab does not send empty cells to the kernel either.
    const now = Date.now() / 1000;
    onStarted(now, null);
    return Private.result('ok', cell, null, now, 0);
  }
  const watch = Private.watchKernel(kernel, sessionContext);
  model.executionState = 'running';
  model.trusted = true;
  const future = kernel.requestExecute(
    {
      code,
      stop_on_error: false,
      allow_stdin: false,
      user_expressions: expression ? { value: expression } : {}
    },
    false,
    Private.requestMetadata(cell, runId)
  );
  let startedAt: number | null = null;
  // An interrupt that lands in the kernel's request handler, outside the
  // cell's code, ends the request (idle) without a reply: wait for it no
  // longer than the protocol's grace, as the server's workspaces do.
  let graceTimer: number | undefined;
  const replyless = new Promise<null>(resolve => {
    future.registerMessageHook(msg => {
      const type = msg.header.msg_type;
      const state =
        type === 'status'
          ? (msg.content as { execution_state?: string }).execution_state
          : undefined;
      if (
        startedAt === null &&
        (type === 'execute_input' || state === 'busy')
      ) {
        startedAt = Private.epochSeconds(msg.header.date);
        onStarted(startedAt, future.msg.header.msg_id);
      }
      if (state === 'idle' && graceTimer === undefined) {
        graceTimer = window.setTimeout(
          () => resolve(null),
          REPLY_GRACE_SECONDS * 1000
        );
      }
      return true;
    });
  });
  cell.outputArea.future = future;
  let reply: KernelMessage.IExecuteReplyMsg | null;
  try {
    reply = await Promise.race([future.done, replyless]);
  } catch {
    const error = watch.failure(isClosed());
    if (!cell.isDisposed) {
      model.executionState = 'idle';
    }
    if (error) {
      throw error;
    }
    // The user ran the cell again over ours: no reply will come for our request.
    return Private.result(null, cell, null, startedAt, null);
  } finally {
    window.clearTimeout(graceTimer);
    watch.dispose();
  }
  if (reply === null) {
    // The kernel went idle without replying: the server classifies the
    // missing reply (an aborted cell).
    if (!cell.isDisposed) {
      model.executionState = 'idle';
    }
    return Private.result(null, cell, null, startedAt, null);
  }
  const content = reply.content;
  const count =
    'execution_count' in content && typeof content.execution_count === 'number'
      ? content.execution_count
      : null;
  if (count !== null) {
    model.executionCount = count;
  }
  model.executionState = 'idle';
  const ended = Private.epochSeconds(reply.header.date);
  const kernelSeconds =
    startedAt !== null ? Math.max(0, ended - startedAt) : null;
  // Old kernels say 'abort' for what the protocol calls 'aborted'.
  const replyStatus = content.status === 'abort' ? 'aborted' : content.status;
  const execution = Private.result(
    replyStatus,
    cell,
    count,
    startedAt,
    kernelSeconds
  );
  if (expression && content.status === 'ok') {
    execution.expressionValue = Private.expressionText(content);
  }
  return execution;
}

/**
 * Evaluate `expression` as a user expression of an empty, silent execute
 * request (no history, no execution count, nothing shown) and return its
 * `text/plain` value ('' when it raised).
 */
export async function evaluateExpression(
  kernel: Kernel.IKernelConnection,
  expression: string
): Promise<string> {
  const future = kernel.requestExecute(
    {
      code: '',
      silent: true,
      store_history: false,
      allow_stdin: false,
      stop_on_error: false,
      user_expressions: { value: expression }
    },
    true
  );
  const reply = await future.done;
  const content = reply.content;
  return content.status === 'ok' ? (Private.expressionText(content) ?? '') : '';
}

namespace Private {
  /**
   * The execute request's metadata, as `CodeCell.execute` builds it (the
   * cell's metadata and its id), without a `%%ci` stamp: jupyter-ci's own
   * executions never hand off, the kernel never holds them back as part of a
   * handed-off batch, and they name their run (`%%ci` starts no run in them).
   */
  export function requestMetadata(cell: CodeCell, runId: string): JSONObject {
    const metadata: JSONObject = {
      ...cell.model.metadata,
      cellId: cell.model.sharedModel.getId(),
      [RESUME_METADATA_KEY]: true,
      [RUN_METADATA_KEY]: runId
    };
    const own = metadata[METADATA_KEY];
    if (own && typeof own === 'object' && !Array.isArray(own)) {
      const rest = { ...own };
      delete rest['client'];
      metadata[METADATA_KEY] = rest;
    }
    return metadata;
  }

  export function result(
    replyStatus: ReplyStatus | null,
    cell: CodeCell,
    executionCount: number | null,
    startedAt: number | null,
    kernelSeconds: number | null
  ): IExecution {
    const outputs = cell.isDisposed ? [] : cell.model.outputs.toJSON();
    return {
      replyStatus,
      outputs,
      executionCount,
      startedAt,
      kernelSeconds,
      expressionValue: null
    };
  }

  /**
   * The text/plain value of an ok reply's user expression `value`; null when
   * it raised or is missing.
   */
  export function expressionText(
    content: KernelMessage.IExecuteReplyMsg['content'] & { status: 'ok' }
  ): string | null {
    const value = content.user_expressions['value'] as
      { status?: string; data?: Record<string, unknown> } | undefined;
    const text = value?.status === 'ok' ? value.data?.['text/plain'] : null;
    return typeof text === 'string' ? text : null;
  }

  export function epochSeconds(date: string | undefined): number {
    const parsed = date ? Date.parse(date) : NaN;
    return (Number.isNaN(parsed) ? Date.now() : parsed) / 1000;
  }

  /**
   * Watches what happens to the kernel during an execution, to say why an
   * execution ended without a reply.
   */
  export function watchKernel(
    kernel: Kernel.IKernelConnection,
    sessionContext: ISessionContext
  ): {
    failure: (closed: boolean) => CallError | null;
    dispose: () => void;
  } {
    let restarted = false;
    let dead = false;
    let replaced = false;
    const onStatus = (
      _sender: Kernel.IKernelConnection,
      status: Kernel.Status
    ): void => {
      if (status === 'restarting' || status === 'autorestarting') {
        restarted = true;
      } else if (status === 'dead') {
        dead = true;
      }
    };
    const onKernel = (): void => {
      replaced = true;
    };
    kernel.statusChanged.connect(onStatus);
    sessionContext.kernelChanged.connect(onKernel);
    return {
      failure: (closed: boolean) => {
        if (closed) {
          return new CallError(
            'notebook_closed',
            'The notebook was closed while its cell ran.'
          );
        }
        if (restarted) {
          return new CallError(
            'kernel_restarted',
            'The kernel restarted while the cell ran.'
          );
        }
        if (dead || kernel.status === 'dead') {
          return new CallError('kernel_dead', 'The kernel died.');
        }
        if (replaced || kernel.isDisposed) {
          return new CallError(
            'kernel_unavailable',
            'The notebook’s kernel was changed or shut down while the cell ran.'
          );
        }
        return null;
      },
      dispose: () => {
        kernel.statusChanged.disconnect(onStatus);
        sessionContext.kernelChanged.disconnect(onKernel);
      }
    };
  }
}
