import { ISessionContext, Notification } from '@jupyterlab/apputils';
import { Cell, ICellModel, ICodeCellModel } from '@jupyterlab/cells';
import { Notebook, NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import { Kernel } from '@jupyterlab/services';

import {
  CIConnection,
  ConnectionLostError,
  OutgoingRequest,
  RequestRefusedError
} from './connection';
import { delay, untilCell } from './cellWatch';
import { Continuation, IClaim, claimKey } from './continuation';
import { readHandoff, versionMismatch } from './handoffPayload';
import { isCICell } from './constants';
import { IHandoffSeen, KernelWatcher } from './kernelWatch';
import { Lifecycle } from './lifecycle';
import { NotebookIndex, watchPanels } from './notebooks';
import {
  CELL_METADATA_KEY as METADATA_KEY,
  HANDOFF_ERROR_NAME,
  HANDOFF_MIME,
  PROTOCOL_VERSION,
  RESUME_METADATA_KEY
} from './protocol';
import type { IErrorInfo, IHandoff } from './protocol';
import { RunTracker } from './runs';
import { SavedContinuations } from './savedContinuations';
import { ScheduleLog } from './scheduleLog';
import { makeStatus } from './statusData';
import { StatusOutputs } from './statusOutput';

/**
 * The `%%ci` handoff, browser side (ARCHITECTURE.md, "The path of one
 * request"):
 *
 * - **Stamp.** Just before JupyterLab sends a `%%ci` cell to the kernel
 *   (`NotebookActions.executionScheduled`), the cell's metadata gets
 *   `jupyter_ci.client` = the notebook's kernel connection client id; the
 *   execute request carries the cell's metadata, and the magic hands off only
 *   if the stamp equals the request's session. A stamp saved in a file never
 *   matches a later session.
 * - **Claim.** Only the kernel connection that sent the request claims its
 *   handoff output (see `KernelWatcher`); the claim is a `start_run` with the
 *   handoff's nonce (the server accepts each nonce once). The `%%ci` cell's
 *   outputs then become one status output that follows the run.
 * - **Server-side executors.** jupyter-server-nbmodel runs cells from the
 *   server, without their metadata, so the stamp never reaches the kernel.
 *   The tab therefore also tells the jupyter-ci server, at the same moment,
 *   which `%%ci` cell it scheduled (`expect_handoff`); the magic recognises
 *   that cell's request by its code and the server's session, and hands it
 *   off with the cell's id. This tab claims such a handoff only for a cell it
 *   scheduled and expects; the cell's end and the cells queued behind it come
 *   from the notebook's own signals (`ScheduleLog`).
 * - **Run All.** The magic ends by stopping the kernel's queue; once the run
 *   is done (or the server answered without a run), the cells that stop
 *   aborted run, in order. If the run failed or was stopped they do not run,
 *   and the status output says so. Another `%%ci` among them hands off in
 *   turn and carries the rest.
 */
export class HandoffController extends Lifecycle {
  constructor(options: HandoffController.IOptions) {
    super();
    this._index = options.index;
    this._connection = options.connection;
    this._runs = options.runs;
    this._statusOutputs = options.statusOutputs;
    this._userOptions = options.userOptions;
    this._schedule = this.own(new ScheduleLog());
    this._continuation = new Continuation(
      this._index,
      this._statusOutputs,
      (panel, model) => this.stamp(panel, model)
    );
    this.listen(NotebookActions.executionScheduled, this._onScheduled);
    this.own(watchPanels(this._index.tracker, panel => this._watch(panel)));
    // A reloaded page: the cells its requests held back run once their runs are done.
    this._saved.resume({
      connection: this._connection,
      runs: this._runs,
      index: this._index,
      statusOutputs: this._statusOutputs,
      continuation: this._continuation
    });
  }

  /**
   * Stamp a `%%ci` cell with the client id of the notebook's kernel
   * connection, outside the undo history.
   */
  stamp(panel: NotebookPanel, model: ICellModel): void {
    const kernel = panel.sessionContext.session?.kernel;
    if (!kernel || model.type !== 'code') {
      return;
    }
    const stamp = { client: kernel.clientId };
    model.sharedModel.transact(() => {
      model.setMetadata(METADATA_KEY, stamp);
    }, false);
  }

  protected onDispose(): void {
    for (const watcher of this._watchers.values()) {
      watcher.dispose();
    }
    this._watchers.clear();
  }

  // --- stamp -------------------------------------------------------------------

  private readonly _onScheduled = (
    _sender: unknown,
    args: { notebook: Notebook; cell: Cell }
  ): void => {
    const { notebook, cell } = args;
    if (
      cell.model.type !== 'code' ||
      !isCICell(cell.model.sharedModel.getSource())
    ) {
      return;
    }
    const panel = this._index.tracker.find(p => p.content === notebook);
    if (panel) {
      this.stamp(panel, cell.model);
      this._expect(panel, cell.model);
    }
  };

  /**
   * Tell the server this `%%ci` cell was scheduled, in case a server-side
   * executor runs it (see the class comment).
   */
  private _expect(panel: NotebookPanel, model: ICellModel): void {
    const kernel = panel.sessionContext.session?.kernel;
    if (!kernel) {
      return;
    }
    const cellId = model.id;
    this._expected.add(claimKey(kernel.id, cellId));
    this._connection
      .request(
        {
          request: 'expect_handoff',
          notebook_path: panel.context.path,
          kernel_id: kernel.id,
          cell_id: cellId,
          code: model.sharedModel.getSource()
        },
        { queueTimeout: Private.EXPECT_TIMEOUT }
      )
      .catch((error: unknown) => {
        // Only a server-side executor's request needs it; the stamp serves the rest.
        console.debug('jupyter-ci: expect_handoff not sent', error);
      });
    void this._claimFromCell(panel, kernel, cellId).catch((error: unknown) => {
      console.error('jupyter-ci: could not claim a %%ci handoff', error);
    });
  }

  /**
   * Claim an expected cell's handoff from the cell itself, once its
   * execution has ended, if the kernel connection did not show it: a
   * server-side executor may run the cell while this page's connection is
   * still joining the kernel's output channel (right after a kernel restart),
   * and the handoff then reaches the page only through the cell's outputs.
   * Only for a cell this page scheduled and still expects; the nonce is
   * claimed once whichever way it arrives.
   */
  private async _claimFromCell(
    panel: NotebookPanel,
    kernel: Kernel.IKernelConnection,
    cellId: string
  ): Promise<void> {
    const expected = claimKey(kernel.id, cellId);
    await this._schedule.executed(panel.content, cellId);
    // The executor writes the cell's outputs up to OUTPUTS_SETTLE after its end.
    const shown = await untilCell(
      this._index,
      cellId,
      model =>
        !this._expected.has(expected) || Private.handoffIn(model) !== null,
      delay(Private.OUTPUTS_SETTLE)
    );
    const found = this._index.findCellAnywhere(cellId);
    const payload = found ? Private.handoffIn(found.model) : null;
    const watcher = this._watchers.get(panel.sessionContext);
    if (!shown || !payload || !watcher || !this._expected.has(expected)) {
      return;
    }
    console.debug(
      `jupyter-ci: the handoff of cell ${cellId} read from the cell (the kernel connection did not show it)`
    );
    await this._claim(watcher, {
      kernel,
      payload,
      requestId: '',
      session:
        typeof payload.kernel_session === 'string'
          ? payload.kernel_session
          : '',
      own: false,
      fromUserCICell: false
    });
  }

  // --- watching kernels --------------------------------------------------------

  private _watch(panel: NotebookPanel): void {
    const context = panel.sessionContext;
    if (this._watchers.has(context)) {
      return;
    }
    const watcher = new KernelWatcher(context);
    watcher.handoffSeen.connect(this._onHandoff);
    this._watchers.set(context, watcher);
    context.disposed.connect(() => {
      this._watchers.delete(context);
      watcher.dispose();
    });
  }

  private readonly _onHandoff = (
    watcher: KernelWatcher,
    seen: IHandoffSeen
  ): void => {
    void this._claim(watcher, seen).catch((error: unknown) => {
      console.error('jupyter-ci: could not claim a %%ci handoff', error);
    });
  };

  // --- claim -------------------------------------------------------------------

  private async _claim(
    watcher: KernelWatcher,
    seen: IHandoffSeen
  ): Promise<void> {
    const handoff = readHandoff(seen.payload);
    if (!handoff || this._claimed.has(handoff.nonce)) {
      return;
    }
    const panel = this._index.tracker.find(
      p => p.sessionContext === watcher.sessionContext
    );
    if (!panel) {
      return;
    }
    const expected = claimKey(seen.kernel.id, handoff.cell_id);
    let request: IClaim;
    if (seen.own) {
      if (
        !seen.fromUserCICell ||
        (handoff.kernel_session &&
          handoff.kernel_session !== seen.kernel.clientId)
      ) {
        // Only a `%%ci` cell of the notebook hands off, never code jupyter-ci
        // runs (which could display the handoff's mime type).
        return;
      }
      // The batch the `%%ci` came with (Run All) is what the kernel received
      // before this: the kernel holds it back until it sees this mark.
      Private.markBatchEnd(seen.kernel);
      request = {
        path: panel.context.path,
        cellId: handoff.cell_id,
        requestId: seen.requestId,
        done: () => watcher.executionDone(seen.requestId),
        aborted: () => watcher.abortedAfter(seen.requestId)
      };
    } else {
      // Another client's request: claimed only if it is a server-side
      // executor's run of a %%ci cell this tab scheduled.
      if (
        handoff.kernel_session !== seen.session ||
        !this._expected.has(expected)
      ) {
        return;
      }
      Private.markBatchEnd(seen.kernel);
      const notebook = panel.content;
      request = {
        path: panel.context.path,
        cellId: handoff.cell_id,
        requestId: seen.requestId,
        done: () => this._serverExecuted(notebook, handoff.cell_id),
        aborted: () => this._schedule.failedAfter(notebook, handoff.cell_id)
      };
    }
    this._expected.delete(expected);
    this._claimed.add(handoff.nonce);
    this._statusOutputs.release(request.cellId);
    if (handoff.version !== PROTOCOL_VERSION) {
      await request.done();
      this._statusOutputs.write(
        request.cellId,
        makeStatus({
          state: 'unavailable',
          error: versionMismatch(handoff)
        })
      );
      return;
    }
    const runId = await this._start(request, handoff, seen.kernel.id);
    if (runId) {
      await this._follow(request, runId);
    }
  }

  /**
   * Ask the server for a run; show the status in the `%%ci` cell once the
   * kernel is done with it. Returns the run's id, or null when no run
   * started (refused, or not needed; the held-back cells are handled).
   */
  private async _start(
    claim: IClaim,
    handoff: IHandoff,
    kernelId: string
  ): Promise<string | null> {
    const { path, cellId } = claim;
    const message: OutgoingRequest = {
      request: 'start_run',
      notebook_path: path,
      kernel_id: kernelId,
      prompt: handoff.prompt,
      options: handoff.options,
      anchor_cell_id: cellId,
      handoff_nonce: handoff.nonce,
      handoff_request_id: claim.requestId || null,
      origin: 'magic',
      regenerate: handoff.regenerate,
      session_options: handoff.session_options,
      user_options: this._userOptions()
    };
    const send = () =>
      this._connection.request(message, {
        queueTimeout: Private.CONNECT_TIMEOUT
      });
    // The server answers a repeated nonce from this tab with the same run, so
    // a request whose reply was lost with the connection is asked again once
    // the connection is back (the run may well have started).
    const request = send().catch((error: unknown) => {
      if (error instanceof ConnectionLostError) {
        return send();
      }
      throw error;
    });
    // The handoff output and the queue-stopping error give way to the status
    // once the kernel is done with the cell.
    await claim.done();
    this._statusOutputs.write(cellId, makeStatus({ state: 'starting' }));
    let reply;
    try {
      reply = await request;
    } catch (error) {
      this._refused(cellId, path, error);
      await this._continuation.holdBack(claim, 'was not started');
      return null;
    }
    const note = reply.note ?? null;
    if (!reply.run_id) {
      // The last run's status line still stands; the note says why no run.
      this._statusOutputs.write(
        cellId,
        makeStatus({ state: 'reused', note, text: reply.status_line ?? '' })
      );
      await this._continuation.continue(claim, null, true);
      return null;
    }
    this._runs.track(reply.run_id, path, cellId);
    const state = reply.position ? 'queued' : 'generating';
    this._statusOutputs.follow(
      cellId,
      reply.run_id,
      makeStatus({ run_id: reply.run_id, state, note })
    );
    return reply.run_id;
  }

  /**
   * Resolves when a server-side executor's outputs of the `%%ci` cell (the
   * handoff, the queue-stopping error) are in the cell, so that the status
   * can replace them: with real-time collaboration they come through the
   * shared document, usually before the executor's page learns (by polling,
   * up to a second later) that the cell ended, sometimes just after; without
   * it the executor writes them when it learns. At the latest
   * `OUTPUTS_SETTLE` ms after the end, or when the cell is gone.
   *
   * If the executor writes its outputs again when it learns of the end (its
   * output-recovery option), the status is put back.
   */
  private async _serverExecuted(
    notebook: Notebook,
    cellId: string
  ): Promise<void> {
    const earlier = this._statusOutputs.get(cellId);
    const ended = this._schedule.executed(notebook, cellId).then(() => {
      const found = this._index.findCellAnywhere(cellId);
      const status = this._statusOutputs.get(cellId);
      if (
        found &&
        status &&
        status !== earlier &&
        Private.stoppedTheQueue(found.model)
      ) {
        this._statusOutputs.write(cellId, status);
      }
    });
    // The outputs may come up to OUTPUTS_SETTLE after the end, or before it.
    await untilCell(
      this._index,
      cellId,
      Private.stoppedTheQueue,
      ended.then(() => delay(Private.OUTPUTS_SETTLE))
    );
  }

  /**
   * Once the run has ended: run the held-back cells if it is done, else say
   * they did not run; tell the user if the notebook was closed meanwhile.
   */
  private async _follow(claim: IClaim, runId: string): Promise<void> {
    // Kept in the tab while the run goes on: a reloaded page runs them.
    const saved = this._continuation.heldBack(claim).then(cells => {
      if (cells.length) {
        this._saved.save({
          runId,
          clientId: this._connection.clientId,
          path: claim.path,
          cellId: claim.cellId,
          cells
        });
      }
    });
    const view = await this._runs.whenFinished(runId);
    await saved;
    this._saved.take(runId, claim.cellId);
    if (!this._index.findCellAnywhere(claim.cellId)) {
      Private.notifyAway(claim.path, view.text);
    }
    if (view.state === 'done') {
      await this._continuation.continue(claim, runId);
    } else {
      await this._continuation.holdBack(claim, 'did not finish');
    }
  }

  private _refused(cellId: string, path: string, error: unknown): void {
    const info: IErrorInfo =
      error instanceof RequestRefusedError
        ? error.error
        : {
            code: 'disconnected',
            message: error instanceof Error ? error.message : String(error),
            hint:
              'Is the jupyter-ci server extension enabled (jupyter server extension list)? ' +
              'Run the %%ci cell again once it is.'
          };
    const status = makeStatus({
      state: 'refused',
      reason: info.code,
      error: info
    });
    if (!this._statusOutputs.write(cellId, status)) {
      Private.notifyAway(path, status.text);
    }
  }

  private readonly _index: NotebookIndex;
  private readonly _connection: CIConnection;
  private readonly _runs: RunTracker;
  private readonly _statusOutputs: StatusOutputs;
  private readonly _userOptions: () => Record<string, unknown>;
  private readonly _watchers = new Map<ISessionContext, KernelWatcher>();
  private readonly _claimed = new Set<string>();
  /**
   * `%%ci` cells this tab scheduled, by kernel and cell id, not yet claimed.
   */
  private readonly _expected = new Set<string>();
  private readonly _schedule: ScheduleLog;
  private readonly _continuation: Continuation;
  private readonly _saved = new SavedContinuations();
}

/**
 * The namespace for `HandoffController` statics.
 */
export namespace HandoffController {
  export interface IOptions {
    index: NotebookIndex;
    connection: CIConnection;
    runs: RunTracker;
    statusOutputs: StatusOutputs;
    /**
     * The user's JupyterLab settings for runs (sent as `user_options`).
     */
    userOptions: () => Record<string, unknown>;
  }
}

namespace Private {
  /**
   * How long a claim waits for the socket to the server (ms).
   */
  export const CONNECT_TIMEOUT = 30_000;

  /**
   * How long an expectation waits for the socket (ms): the kernel waits for
   * it only briefly.
   */
  export const EXPECT_TIMEOUT = 2_000;

  /**
   * How long the outputs of a server-executed `%%ci` may lag its end (ms):
   * the executor's page learns of the end by polling (up to a second), then
   * writes them (ARCHITECTURE.md, "Timing windows"). A deadline, not a poll:
   * the outputs are awaited through their change events.
   */
  export const OUTPUTS_SETTLE = 2_000;

  /**
   * Tell the kernel the batch of the handoff just seen has ended: a silent
   * request of jupyter-ci's own (`metadata.jupyter_ci_resume`), behind every
   * request this tab sent so far on the same channel. The kernel holds back
   * requests of the `%%ci`'s session until it receives one.
   */
  export function markBatchEnd(kernel: Kernel.IKernelConnection): void {
    try {
      kernel.requestExecute(
        {
          code: 'pass',
          silent: true,
          store_history: false,
          allow_stdin: false,
          stop_on_error: false
        },
        true,
        { [RESUME_METADATA_KEY]: true }
      );
    } catch (error) {
      // The kernel went away; its hold went with it.
      console.debug('jupyter-ci: could not mark the end of a batch', error);
    }
  }

  /**
   * The handoff payload among the cell's outputs, if any.
   */
  export function handoffIn(model: ICellModel): Record<string, unknown> | null {
    if (model.type !== 'code') {
      return null;
    }
    const outputs = (model as ICodeCellModel).outputs;
    for (let i = 0; i < outputs.length; i++) {
      const payload = outputs.get(i).data[HANDOFF_MIME];
      if (typeof payload === 'object' && payload !== null) {
        return payload as Record<string, unknown>;
      }
    }
    return null;
  }

  /**
   * Whether the cell shows the handoff's queue-stopping error.
   */
  export function stoppedTheQueue(model: ICellModel): boolean {
    if (model.type !== 'code') {
      return true;
    }
    const outputs = (model as ICodeCellModel).outputs;
    for (let i = 0; i < outputs.length; i++) {
      const output = outputs.get(i).toJSON();
      if (
        output.output_type === 'error' &&
        output.ename === HANDOFF_ERROR_NAME
      ) {
        return true;
      }
    }
    return false;
  }

  /**
   * Say how a request ended when its notebook is no longer open here.
   */
  export function notifyAway(path: string, line: string): void {
    Notification.warning(`${line} (${path} is no longer open)`, {
      autoClose: false
    });
  }
}
