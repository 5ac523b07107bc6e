import { CodeCell, ICellModel, ICodeCellModel } from '@jupyterlab/cells';
import * as nbformat from '@jupyterlab/nbformat';
import { NotebookPanel } from '@jupyterlab/notebook';
import { Kernel } from '@jupyterlab/services';

import { CellDecorations } from './cellDecorations';
import { CIConnection } from './connection';
import { CallError, evaluateExpression, executeCell } from './execute';
import { Lifecycle } from './lifecycle';
import { IFoundCell, NotebookIndex } from './notebooks';
import { capOutputs, MAX_OUTPUT_BYTES, showOutputs } from './outputs';
import { CELL_METADATA_KEY } from './protocol';
import type {
  Call,
  CallReply,
  ICallProgress,
  ICallResult,
  ICellInfo,
  IInsertCellCall,
  IRestoreCellsCall,
  IRunCellCall
} from './protocol';
import { RunTracker } from './runs';
import { SourceStreamer } from './streaming';
import { CallTimings } from './timings';

/**
 * A call's result fields (everything but `call_id` and `ok`).
 */
type ResultFields = Omit<ICallResult, 'call_id' | 'ok'>;

/**
 * The notebook bridge: answers the server's calls for the runs this tab owns
 * (ARCHITECTURE.md, "The parts": the browser is the hands in Lab).
 *
 * Notebooks are found by path and cells by id; cells are inserted and edited
 * through the notebook's shared model, outside the undo history; `run_cell`
 * runs the cell in the notebook's kernel with its output area attached, says
 * `started` when the kernel begins it, and answers with the outputs read
 * from the cell model, capped to fit a message. A call id seen before is
 * answered with the same result and never done twice: the server resends
 * unanswered calls after a reconnect.
 *
 * After a reload the page is the same client (`identity.ts`) but holds none
 * of its runs' unsaved cells: the server's first call of each run is
 * `restore_cells`, which puts back the cells the notebook lacks, and the
 * run's other calls wait for it. Calls for a notebook this page has not
 * opened yet wait for it to open (a reloaded page opens its notebooks again
 * as it starts), at most `NotebookIndex.OPEN_WAIT`.
 */
export class NotebookBridge extends Lifecycle {
  constructor(options: NotebookBridge.IOptions) {
    super();
    this._connection = options.connection;
    this._index = options.index;
    this._runs = options.runs;
    this._streamer = options.streamer;
    this._decorations = options.decorations;
    this._timings = options.timings;
    this._userOptions = options.userOptions;
    this.listen(this._connection.calls, this._onCall);
  }

  /**
   * Whether this tab has answered calls of the run (it owns it).
   */
  ownsRun(runId: string): boolean {
    return this._ownRuns.has(runId);
  }

  // --- calls ---------------------------------------------------------------

  private readonly _onCall = (_sender: CIConnection, call: Call): void => {
    this._ownRuns.add(call.run_id);
    const restoring = this._restoring.get(call.run_id);
    let answer = this._answers.get(call.call_id);
    if (answer) {
      // A resend: repeat what we said, never do it twice.
      const progress = this._progress.get(call.call_id);
      if (progress) {
        this._connection.reply(progress);
      }
    } else {
      this._trimAnswers();
      const created: Private.IAnswer = {
        reply:
          restoring && call.method !== 'restore_cells'
            ? restoring.then(() => this._answer(call))
            : this._answer(call),
        answeredAt: null
      };
      answer = created;
      this._answers.set(call.call_id, created);
      if (call.method === 'restore_cells') {
        // The run's later calls (resent behind this one) wait for it.
        this._restoring.set(
          call.run_id,
          created.reply.then(() => undefined)
        );
      }
      void created.reply.then(() => {
        created.answeredAt = Date.now();
      });
    }
    void answer.reply.then(reply => {
      this._progress.delete(call.call_id);
      this._connection.reply(reply);
    });
  };

  private async _answer(call: Call): Promise<CallReply> {
    const received = CallTimings.now();
    const timing = { kernelSeconds: null as number | null };
    let reply: CallReply;
    try {
      const fields = await this._do(call, timing);
      reply = { call_id: call.call_id, ok: true, ...fields };
    } catch (error) {
      reply = {
        call_id: call.call_id,
        ok: false,
        error: Private.errorInfo(error)
      };
    }
    this._timings.add({
      callId: call.call_id,
      runId: call.run_id,
      method: call.method,
      received,
      answered: CallTimings.now(),
      kernelSeconds: timing.kernelSeconds
    });
    return reply;
  }

  private async _do(
    call: Call,
    timing: { kernelSeconds: number | null }
  ): Promise<ResultFields> {
    const path = call.notebook_path;
    if (!this._index.panel(path) && this._index.isOpening(path)) {
      // A reloaded page opens its notebooks again as it starts.
      await this._index.whenOpen(path, NotebookIndex.OPEN_WAIT);
    }
    const panel = this._panel(path);
    switch (call.method) {
      case 'read_cells':
        this._streamer.flushAll();
        return Private.readCells(panel, call.outputs !== false);
      case 'insert_cell':
        return { cell_id: this._insert(panel, call) };
      case 'append_source': {
        const found = this._cell(path, call.cell_id);
        this._streamer.append(found.model, call.text);
        this._decorations.update(call.cell_id, { streaming: true });
        return {};
      }
      case 'replace_source': {
        const found = this._cell(path, call.cell_id);
        this._streamer.discard(found.model);
        if (call.undoable) {
          // The user's cell (a fix, or an outside agent's edit): Ctrl+Z brings back what
          // they wrote (and Restore, after a fix).
          this._decorations.rememberOriginal(
            call.cell_id,
            call.run_id,
            found.model
          );
          this._decorations.update(call.cell_id, { restorable: false });
        }
        SourceStreamer.replace(
          found.model,
          call.source,
          call.undoable ?? false
        );
        this._decorations.update(call.cell_id, { streaming: false });
        return {};
      }
      case 'delete_cell': {
        const found = this._cell(path, call.cell_id);
        this._streamer.discard(found.model);
        this._delete(found);
        this._decorations.forget(call.cell_id);
        return {};
      }
      case 'run_cell':
        return this._run(call, timing);
      case 'evaluate': {
        const text = await evaluateExpression(
          Private.kernelOf(panel),
          call.expression
        );
        return { text };
      }
      case 'interrupt':
        await Private.kernelOf(panel).interrupt();
        return {};
      case 'run_options':
        return { options: this._userOptions() };
      case 'save':
        // With real-time collaboration the server saves the shared document itself (a save
        // from here would be refused as a conflict with its own).
        if (!panel.context.model.collaborative) {
          await panel.context.save();
        }
        return {};
      case 'restore_cells': {
        const restored = this._restore(panel, call);
        this._runs.touch(call.run_id);
        return { restored };
      }
      case 'show_outputs': {
        const found = this._cell(path, call.cell_id);
        if (found.model.type !== 'code') {
          throw new CallError(
            'not_code',
            `Cell ${call.cell_id} is not a code cell.`
          );
        }
        showOutputs(found.model as ICodeCellModel, call);
        return {};
      }
      default:
        throw new CallError(
          'unknown_method',
          `This JupyterLab extension does not know the call ${(call as { method: string }).method}; update jupyter-ci.`
        );
    }
  }

  private _insert(panel: NotebookPanel, call: IInsertCellCall): string {
    const notebook = panel.content.model;
    if (!notebook) {
      throw Private.notOpen(call.notebook_path, true);
    }
    let index = 0;
    if (call.after_id !== null) {
      const after = NotebookIndex.cellIn(panel, call.after_id);
      if (!after) {
        throw Private.noCell(call.notebook_path, call.after_id);
      }
      index = after.index + 1;
    }
    const shared = notebook.sharedModel;
    let cellId = '';
    shared.transact(() => {
      const cell = shared.insertCell(index, {
        cell_type: call.cell_type ?? 'code',
        source: call.source,
        metadata: call.metadata as nbformat.ICodeCellMetadata
      });
      cellId = cell.getId();
    }, false);
    const agent = Private.agentOf(call.metadata);
    this._decorations.update(cellId, {
      streaming: call.source === '',
      ...(agent !== null && { agent })
    });
    this._reveal(panel, index, call.after_id);
    return cellId;
  }

  /**
   * Put back the run's cells the notebook lacks (a reload dropped them: they
   * were not saved), each after its recorded neighbour, with the run's
   * source; the cell being streamed into gets the run's source even when it
   * is there (with real-time collaboration the previous page's writes are
   * in the shared document, the last perhaps twice). Returns the ids put
   * back.
   */
  private _restore(panel: NotebookPanel, call: IRestoreCellsCall): string[] {
    const shared = panel.content.model?.sharedModel;
    if (!shared) {
      throw Private.notOpen(call.notebook_path, true);
    }
    const restored: string[] = [];
    let previous: string | null = null;
    for (const cell of call.cells) {
      const found = NotebookIndex.cellIn(panel, cell.cell_id);
      if (found) {
        if (
          cell.cell_id === call.streaming_cell_id &&
          found.model.sharedModel.getSource() !== cell.source
        ) {
          this._streamer.discard(found.model);
          SourceStreamer.replace(found.model, cell.source);
        }
        previous = cell.cell_id;
        continue;
      }
      const after =
        (cell.after_id !== null &&
          NotebookIndex.cellIn(panel, cell.after_id)) ||
        (previous !== null && NotebookIndex.cellIn(panel, previous));
      const index = after
        ? after.index + 1
        : cell.after_id === null
          ? 0
          : shared.cells.length;
      shared.transact(() => {
        shared.insertCell(index, {
          id: cell.cell_id,
          cell_type: cell.cell_type ?? 'code',
          source: cell.source,
          metadata: cell.metadata as nbformat.ICodeCellMetadata
        });
      }, false);
      restored.push(cell.cell_id);
      previous = cell.cell_id;
    }
    if (call.streaming_cell_id) {
      this._decorations.update(call.streaming_cell_id, { streaming: true });
    }
    return restored;
  }

  private _delete(found: IFoundCell): void {
    const shared = found.panel.content.model?.sharedModel;
    if (!shared) {
      return;
    }
    shared.transact(() => shared.deleteCell(found.index), false);
  }

  private async _run(
    call: IRunCellCall,
    timing: { kernelSeconds: number | null }
  ): Promise<ResultFields> {
    const path = call.notebook_path;
    const found = this._cell(path, call.cell_id);
    this._streamer.flush(found.model);
    this._decorations.update(call.cell_id, { streaming: false });
    const cell = this._codeCellWidget(path, found);
    const panel = found.panel;
    const execution = await executeCell({
      cell,
      sessionContext: panel.sessionContext,
      isClosed: () => panel.isDisposed && this._index.panel(path) === null,
      expression: call.expression,
      runId: call.run_id,
      onStarted: (startedAt, msgId) => {
        // The request's msg_id: the server follows the cell under it on the
        // kernel's output channel too, should this page be reloaded.
        const progress: ICallProgress = {
          call_id: call.call_id,
          progress: 'started',
          started_at: startedAt,
          ...(msgId !== null && { msg_id: msgId })
        };
        this._progress.set(call.call_id, progress);
        this._connection.reply(progress);
      }
    });
    timing.kernelSeconds = execution.kernelSeconds;
    const capped = capOutputs(execution.outputs);
    return {
      reply_status: execution.replyStatus,
      outputs: capped.outputs,
      truncated: capped.truncated,
      execution_count: execution.executionCount,
      started_at: execution.startedAt,
      ...(execution.expressionValue !== null && {
        text: execution.expressionValue
      })
    };
  }

  // --- lookups ---------------------------------------------------------------

  private _panel(path: string): NotebookPanel {
    const panel = this._index.panel(path);
    if (!panel) {
      throw Private.notOpen(path, this._index.wasOpen(path));
    }
    return panel;
  }

  private _cell(path: string, cellId: string): IFoundCell {
    const found = this._index.findCell(path, cellId);
    if (!found) {
      this._panel(path); // a closed notebook says so, not "no cell"
      throw Private.noCell(path, cellId);
    }
    return found;
  }

  private _codeCellWidget(path: string, found: IFoundCell): CodeCell {
    if (found.model.type !== 'code') {
      throw new CallError(
        'not_code',
        `Cell ${found.model.id} is not a code cell.`
      );
    }
    const widgets = this._index.cellWidgets(path, found.model.id);
    const widget = widgets.find(w => w instanceof CodeCell);
    if (!(widget instanceof CodeCell)) {
      throw Private.noCell(path, found.model.id);
    }
    return widget;
  }

  /**
   * Bring a new cell into view when the user is looking at where it goes.
   */
  private _reveal(
    panel: NotebookPanel,
    index: number,
    afterId: string | null
  ): void {
    const anchor =
      afterId === null
        ? null
        : panel.content.widgets.find(w => w.model.id === afterId);
    if (anchor?.inViewport) {
      void panel.content.scrollToItem(index, 'smart').catch(() => undefined);
    }
  }

  /**
   * Forget answers the server can no longer ask for again: a run waits 30 s
   * for its tab to come back, then ends. Answers can be large (outputs), so
   * they are kept minutes, not forever; unanswered calls are always kept.
   */
  private _trimAnswers(): void {
    const now = Date.now();
    for (const [callId, answer] of this._answers) {
      const answered = answer.answeredAt;
      if (
        answered !== null &&
        (now - answered > Private.ANSWER_TTL ||
          this._answers.size > Private.MAX_ANSWERS)
      ) {
        this._answers.delete(callId);
      }
    }
  }

  private readonly _connection: CIConnection;
  private readonly _index: NotebookIndex;
  private readonly _runs: RunTracker;
  private readonly _streamer: SourceStreamer;
  private readonly _decorations: CellDecorations;
  private readonly _timings: CallTimings;
  private readonly _userOptions: () => Record<string, unknown>;
  private readonly _answers = new Map<string, Private.IAnswer>();
  private readonly _progress = new Map<string, ICallProgress>();
  private readonly _ownRuns = new Set<string>();
  /**
   * The `restore_cells` answer of each run restored in this page.
   */
  private readonly _restoring = new Map<string, Promise<void>>();
}

/**
 * The namespace for `NotebookBridge` statics.
 */
export namespace NotebookBridge {
  export interface IOptions {
    connection: CIConnection;
    index: NotebookIndex;
    runs: RunTracker;
    streamer: SourceStreamer;
    decorations: CellDecorations;
    timings: CallTimings;
    /**
     * The user's run options (their JupyterLab settings), for `run_options`.
     */
    userOptions: () => Record<string, unknown>;
  }
}

namespace Private {
  /**
   * Answers remembered for resent calls: at most this many, each for at most
   * `ANSWER_TTL` ms once answered (the server resends within its 30 s grace).
   */
  export const MAX_ANSWERS = 500;
  export const ANSWER_TTL = 5 * 60 * 1000;

  /**
   * A call's answer, once for all its sends.
   */
  export interface IAnswer {
    reply: Promise<CallReply>;
    answeredAt: number | null;
  }

  /**
   * The outside agent named in a cell's `jupyter_ci` hint, if any.
   */
  export function agentOf(metadata: Record<string, unknown>): string | null {
    const hint = metadata[CELL_METADATA_KEY];
    if (typeof hint === 'object' && hint !== null) {
      const agent = (hint as Record<string, unknown>)['agent'];
      return typeof agent === 'string' && agent ? agent : null;
    }
    return null;
  }

  export function notOpen(path: string, wasOpen: boolean): CallError {
    return wasOpen
      ? new CallError('notebook_closed', `The notebook ${path} was closed.`)
      : new CallError(
          'notebook_not_open',
          `The notebook ${path} is not open in this tab.`
        );
  }

  export function noCell(path: string, cellId: string): CallError {
    return new CallError(
      'cell_not_found',
      `There is no cell ${cellId} in ${path} (it may have been deleted).`
    );
  }

  export function kernelOf(panel: NotebookPanel): Kernel.IKernelConnection {
    const kernel = panel.sessionContext.session?.kernel;
    if (!kernel) {
      throw new CallError('kernel_unavailable', 'The notebook has no kernel.');
    }
    if (kernel.status === 'dead') {
      throw new CallError('kernel_dead', 'The notebook’s kernel is dead.');
    }
    return kernel;
  }

  /**
   * Every cell of the notebook, outputs capped so the reply fits; without
   * `outputs`, code cells come with their execution count only.
   */
  export function readCells(
    panel: NotebookPanel,
    outputs: boolean
  ): ResultFields {
    const model = panel.content.model;
    if (!model) {
      return { cells: [] };
    }
    const cells: ICellInfo[] = [];
    const budget = Math.max(
      16 * 1024,
      Math.floor(MAX_OUTPUT_BYTES / Math.max(1, model.cells.length))
    );
    let truncated = false;
    for (let index = 0; index < model.cells.length; index++) {
      const cell: ICellModel = model.cells.get(index);
      const json = cell.toJSON();
      const info: ICellInfo = {
        id: cell.id,
        cell_type:
          cell.type === 'code' || cell.type === 'markdown' ? cell.type : 'raw',
        source: cell.sharedModel.getSource(),
        metadata: { ...json.metadata }
      };
      if (nbformat.isCode(json)) {
        info.execution_count = json.execution_count;
        if (outputs) {
          const capped = capOutputs(json.outputs, budget);
          truncated ||= capped.truncated;
          info.outputs = capped.outputs;
        }
      }
      cells.push(info);
    }
    return { cells, truncated };
  }

  export function errorInfo(error: unknown): {
    code: string;
    message: string;
    hint?: string;
  } {
    if (error instanceof CallError) {
      return error.hint
        ? { code: error.code, message: error.message, hint: error.hint }
        : { code: error.code, message: error.message };
    }
    const message = error instanceof Error ? error.message : String(error);
    return {
      code: 'internal',
      message: `jupyter-ci in the browser: ${message}`
    };
  }
}
