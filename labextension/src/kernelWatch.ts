import { ISessionContext } from '@jupyterlab/apputils';
import { Kernel, KernelMessage } from '@jupyterlab/services';
import { ISignal, Signal } from '@lumino/signaling';

import { Conditions } from './conditions';
import { Lifecycle } from './lifecycle';
import {
  CELL_METADATA_KEY as METADATA_KEY,
  HELD_BACK_ERROR_NAME
} from './protocol';
import { HANDOFF_MIME } from './protocol';

/**
 * A `%%ci` handoff output seen on a notebook's kernel connection.
 */
export interface IHandoffSeen {
  kernel: Kernel.IKernelConnection;
  /**
   * The handoff payload, unchecked.
   */
  payload: unknown;
  /**
   * The msg_id of the `%%ci` cell's execute request.
   */
  requestId: string;
  /**
   * The session that sent that request.
   */
  session: string;
  /**
   * Whether this connection sent it (else another client of the kernel did:
   * another tab, or a server-side executor such as jupyter-server-nbmodel).
   */
  own: boolean;
  /**
   * Whether this connection sent the request as a `%%ci` cell of the
   * notebook (stamped with this connection's client id; jupyter-ci's own
   * executions of generated cells never are). A handoff from anything else
   * (generated code that displays the handoff's mime type) is never claimed.
   */
  fromUserCICell: boolean;
}

/**
 * How an execute request ended (its reply's status and error name).
 */
export interface IReplySeen {
  status: string;
  ename: string | null;
}

/**
 * Watches a notebook's kernel connection (following kernel changes): the
 * execute requests it sends, with their cell ids and replies, and the
 * `%%ci` handoff outputs on it.
 *
 * A handoff is claimed only from here, where the message's parent session is
 * known, never from a renderer: renderers run again whenever a notebook is
 * reopened. A handoff is seen at most once per execute request, and only
 * while the kernel executes that request (between its `busy` and `idle`
 * statuses, which the output channel delivers in order with the display):
 * code run later (a generated cell that found the `%%ci` request's header)
 * cannot hand off in that request's name.
 */
export class KernelWatcher extends Lifecycle {
  constructor(sessionContext: ISessionContext) {
    super();
    this._sessionContext = sessionContext;
    this.listen(sessionContext.kernelChanged, this._onKernelChanged);
    this._connect(sessionContext.session?.kernel ?? null);
  }

  /**
   * Emitted for each handoff output on the connection (see `own`).
   */
  get handoffSeen(): ISignal<this, IHandoffSeen> {
    return this._handoffSeen;
  }

  /**
   * The notebook's session context.
   */
  get sessionContext(): ISessionContext {
    return this._sessionContext;
  }

  /**
   * Resolves when the execute request `requestId` has its reply and its idle
   * status, and JupyterLab has put its outputs in the cell.
   */
  async executionDone(requestId: string, timeout = 60_000): Promise<void> {
    const record = this._log.get(requestId);
    if (!record) {
      return;
    }
    await this._conditions.until(
      () => record.reply !== null && record.idle,
      timeout
    );
    // The kernel connection handles a reply after announcing it: let it.
    await new Promise<void>(resolve => window.setTimeout(resolve, 0));
  }

  /**
   * The reply of execute request `requestId`, once it arrived (null if this
   * connection did not send it, or no reply came within `timeout`).
   */
  async replyOf(
    requestId: string,
    timeout = 60_000
  ): Promise<IReplySeen | null> {
    const record = this._log.get(requestId);
    if (!record) {
      return null;
    }
    await this._conditions.until(() => record.reply !== null, timeout);
    return record.reply;
  }

  /**
   * The cells (ids, in the order they were sent) whose executions the kernel
   * aborted because request `requestId` failed: those sent after it and
   * before its reply arrived, whose replies say `aborted`, up to the first
   * one that ran. The kernel aborts what it has queued when a cell fails; a
   * request that reached it later runs (under load, a later `%%ci` may), and
   * what that one's own failure aborted is its own to hold back.
   */
  async abortedAfter(requestId: string, timeout = 30_000): Promise<string[]> {
    const target = this._log.get(requestId);
    if (!target) {
      return [];
    }
    await this._conditions.until(() => target.reply !== null, timeout);
    const replied = target.replyOrder ?? Number.POSITIVE_INFINITY;
    const queued = [...this._log.values()]
      .filter(
        record =>
          record.cellId !== null && // not jupyter-ci's own silent requests
          record.order > target.order &&
          record.order < replied
      )
      .sort((a, b) => a.order - b.order);
    await this._conditions.until(
      () => queued.every(record => record.reply !== null),
      timeout
    );
    const held: string[] = [];
    for (const record of queued) {
      const heldBack =
        record.reply?.status === 'error' &&
        record.reply.ename === HELD_BACK_ERROR_NAME;
      if (record.reply?.status !== 'aborted' && !heldBack) {
        break;
      }
      held.push(record.cellId as string);
    }
    return held;
  }

  protected onDispose(): void {
    this._kernel = null;
    this._conditions.releaseAll();
  }

  private readonly _onKernelChanged = (
    _sender: ISessionContext,
    change: { newValue: Kernel.IKernelConnection | null }
  ): void => {
    this._connect(change.newValue);
  };

  private _connect(kernel: Kernel.IKernelConnection | null): void {
    if (this._kernel) {
      this.unlisten(this._kernel.anyMessage, this._onAnyMessage);
      this.unlisten(this._kernel.iopubMessage, this._onIOPub);
    }
    this._kernel = kernel;
    this._executing.clear();
    if (kernel) {
      this.listen(kernel.anyMessage, this._onAnyMessage);
      this.listen(kernel.iopubMessage, this._onIOPub);
    }
  }

  private readonly _onAnyMessage = (
    _kernel: Kernel.IKernelConnection,
    args: Kernel.IAnyMessageArgs
  ): void => {
    const msg = args.msg;
    if (
      args.direction === 'send' &&
      msg.header.msg_type === 'execute_request'
    ) {
      const metadata = msg.metadata as Record<string, unknown>;
      const cellId = metadata.cellId;
      const stamp = metadata[METADATA_KEY] as { client?: unknown } | undefined;
      this._log.set(msg.header.msg_id, {
        order: ++this._clock,
        cellId: typeof cellId === 'string' ? cellId : null,
        // Only a `%%ci` cell of the notebook carries the stamp: jupyter-ci's own
        // executions of generated cells never do (execute.ts drops it).
        userCICell: stamp?.client === this._kernel?.clientId,
        reply: null,
        replyOrder: null,
        idle: false
      });
      this._trim();
    } else if (
      args.direction === 'recv' &&
      msg.channel === 'shell' &&
      msg.header.msg_type === 'execute_reply'
    ) {
      const record = this._log.get(msg.parent_header.msg_id ?? '');
      if (record) {
        const content = msg.content as { status?: string; ename?: string };
        record.reply = {
          status: content.status ?? 'error',
          ename: typeof content.ename === 'string' ? content.ename : null
        };
        record.replyOrder = ++this._clock;
        this._conditions.check();
      }
    }
  };

  private readonly _onIOPub = (
    kernel: Kernel.IKernelConnection,
    msg: KernelMessage.IIOPubMessage
  ): void => {
    const parent = msg.parent_header as Partial<KernelMessage.IHeader>;
    if (KernelMessage.isStatusMsg(msg)) {
      const state = msg.content.execution_state;
      if (state === 'busy' && parent.msg_id) {
        this._executing.add(parent.msg_id);
        // An idle lost with a restarted kernel leaves its request here.
        Private.trimSet(this._executing, Private.MAX_EXECUTING);
      } else if (state === 'idle') {
        this._executing.delete(parent.msg_id ?? '');
        const record = this._log.get(parent.msg_id ?? '');
        if (record) {
          record.idle = true;
          this._conditions.check();
        }
      }
      return;
    }
    if (
      KernelMessage.isDisplayDataMsg(msg) &&
      HANDOFF_MIME in msg.content.data &&
      parent.msg_id
    ) {
      if (
        !this._executing.has(parent.msg_id) ||
        this._handedOff.has(parent.msg_id)
      ) {
        // Not while the kernel executes that request, or not its first:
        // forged in its name by other code (ARCHITECTURE.md, Invariants).
        console.warn(
          `jupyter-ci: a handoff under request ${parent.msg_id} was ignored (that request is not executing, or handed off already)`
        );
        return;
      }
      this._handedOff.add(parent.msg_id);
      Private.trimSet(this._handedOff, Private.MAX_REQUESTS);
      this._handoffSeen.emit({
        kernel,
        payload: msg.content.data[HANDOFF_MIME],
        requestId: parent.msg_id,
        session: parent.session ?? '',
        own: parent.session === kernel.clientId,
        fromUserCICell: this._log.get(parent.msg_id)?.userCICell === true
      });
    }
  };

  private _trim(): void {
    // Old requests are of no use once their replies are long in.
    while (this._log.size > Private.MAX_REQUESTS) {
      const oldest = this._log.keys().next().value;
      if (oldest === undefined) {
        return;
      }
      this._log.delete(oldest);
    }
  }

  private readonly _sessionContext: ISessionContext;
  private _kernel: Kernel.IKernelConnection | null = null;
  private readonly _log = new Map<string, Private.IRequestRecord>();
  /**
   * Requests the kernel is executing now (seen `busy`, not yet `idle`).
   */
  private readonly _executing = new Set<string>();
  /**
   * Requests whose handoff was seen (each hands off once).
   */
  private readonly _handedOff = new Set<string>();
  private _clock = 0;
  private readonly _conditions = new Conditions();
  private readonly _handoffSeen = new Signal<this, IHandoffSeen>(this);
}

namespace Private {
  /**
   * Execute requests remembered per kernel connection.
   */
  export const MAX_REQUESTS = 2000;

  /**
   * Requests remembered as executing (a kernel executes one at a time).
   */
  export const MAX_EXECUTING = 64;

  /**
   * Forget the oldest entries of a set beyond `max`.
   */
  export function trimSet(set: Set<string>, max: number): void {
    for (const oldest of set) {
      if (set.size <= max) {
        return;
      }
      set.delete(oldest);
    }
  }

  export interface IRequestRecord {
    /**
     * When it was sent, on the watcher's clock (sends and replies count).
     */
    order: number;
    cellId: string | null;
    /**
     * Sent as a `%%ci` cell of the notebook (stamped with the client id).
     */
    userCICell: boolean;
    reply: IReplySeen | null;
    /**
     * When its reply arrived, on the same clock.
     */
    replyOrder: number | null;
    idle: boolean;
  }
}
