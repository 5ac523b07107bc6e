// generated from jupyter_ci/schema/protocol.schema.json by `jlpm build:protocol`; do not edit.
//
// The TypeScript types of jupyter-ci's protocol. Object definitions are
// interfaces named I + the definition's name (`IStateEvent` for
// `StateEvent`); unions and enums keep the definition's name (`RunEvent`,
// `RunState`). The values both sides must agree on are constants at the end
// (`CELL_STATUS_TITLES`, `CI_CELL_PATTERN`, ...). `jlpm check:protocol`
// fails when this file is out of date.

/**
 * Where a run is (see jupyter_ci/agent/states.py). A run in a TerminalRunState
 * is over.
 */
export type RunState =
  | 'queued'
  | 'generating'
  | 'awaiting_approval'
  | 'executing'
  | 'fixing'
  | 'done'
  | 'failed'
  | 'stopped';

/**
 * The states a run ends in: done, failed or stopped, each with an end reason.
 */
export type TerminalRunState = 'done' | 'failed' | 'stopped';

/**
 * Why a run ended done. Each title is the words the status line and the panel
 * show for it.
 */
export type DoneReason =
  'answered' | 'max_steps' | 'inserted' | 'rejected' | 'fixed' | 'called';

/**
 * Why a run ended failed. Each title is the words the status line and the panel
 * show for it.
 */
export type FailedReason =
  | 'max_attempts'
  | 'model_error'
  | 'config_error'
  | 'kernel_died'
  | 'budget_exceeded'
  | 'bad_code_block'
  | 'missing_package'
  | 'notebook_unavailable'
  | 'internal_error';

/**
 * Why a run ended stopped: what was asked. Each title is the words the status
 * line and the panel show for it.
 */
export type StoppedReason =
  | 'user'
  | 'disconnected'
  | 'kernel_restarted'
  | 'kernel_shutdown'
  | 'server_shutdown';

/**
 * Why a run ended, whatever its end state.
 */
export type EndReason = DoneReason | FailedReason | StoppedReason;

export type Mode = 'auto' | 'review' | 'insert';

/**
 * How a cell's execution ended, decided in one place
 * (jupyter_ci/execution/status.py). Each title is the label the panel shows.
 */
export type CellStatus =
  | 'ok'
  | 'error'
  | 'timed_out'
  | 'interrupted'
  | 'aborted'
  | 'kernel_died'
  | 'kernel_shutdown'
  | 'kernel_restarted';

/**
 * The status of the kernel's execute_reply, as the kernel sent it (the browser
 * reports it raw; the server classifies the cell's end).
 */
export type ReplyStatus = 'ok' | 'error' | 'aborted';

/**
 * How a %%ci cell is recognised, everywhere (the labextension, the magic, the
 * in-kernel loop, the headless workspace): the cell magic opens the cell, after
 * blank lines at most; %%cipher is not %%ci.
 */
export type CICellPattern = string;

/**
 * The protocol's version, as a handoff's version says it.
 */
export type ProtocolVersion = 1;

/**
 * The mime type of the %%ci magic's handoff output (a Handoff).
 */
export type HandoffMime = 'application/vnd.jupyter-ci.handoff+json';

/**
 * The mime type of the status output jupyter-ci keeps in a %%ci cell, next to a
 * text/plain line for other frontends.
 */
export type StatusMime = 'application/vnd.jupyter-ci.status+json';

/**
 * The exception the magic raises after a handoff, so the kernel stops the cells
 * queued after the %%ci cell.
 */
export type HandoffErrorName = 'JupyterCIHandoff';

/**
 * The error of a cell the kernel held back: sent with a handing-off %%ci (Run
 * All), it runs after the generated cells.
 */
export type HeldBackErrorName = 'JupyterCIHeldBack';

/**
 * Request metadata saying jupyter-ci itself runs the request (a generated cell,
 * the mark of a batch's end, the batch's continuation): the kernel never holds
 * it back.
 */
export type ResumeMetadataKey = 'jupyter_ci_resume';

/**
 * Request metadata naming the run whose cell the request executes (its run_id):
 * %%ci never starts a run from such a cell (generated code cannot start runs).
 */
export type RunMetadataKey = 'jupyter_ci_run';

/**
 * jupyter-ci's key in cell metadata: the stamp of a %%ci cell ({client}), the
 * hint on a generated cell ({run_id, ...}; agent: the outside agent that added
 * it, an MCP client's name), or on a cell of the user's that jupyter-ci fixed
 * or an outside agent changed, while it holds other code than theirs ({fixed:
 * {run_id, original, agent?}, attempt, max_attempts}: Restore puts original
 * back, after a reload too; agent: the MCP client that changed it).
 */
export type CellMetadataKey = 'jupyter_ci';

/**
 * The reason of a state event sent when the model starts or ends waiting out a
 * rate limit: the state is unchanged, only its status line (text) changes.
 */
export type RateLimitedReason = 'rate_limited';

/**
 * The reason of a fixing state event when the cell ran without an error but its
 * result looks wrong (check_results): the model is asked to look at a result,
 * not to fix an error.
 */
export type LooksWrongReason = 'looks_wrong';

/**
 * How long a frontend or workspace waits for an execute_reply once the kernel
 * is idle again after the request (seconds): an interrupt that lands in the
 * kernel's request handler, outside the cell's code, ends the request without a
 * reply, and the cell then ends aborted.
 */
export type ReplyGraceSeconds = 3;

/**
 * An error as users and programs see it: a stable code, a message and what to
 * do.
 */
export interface IErrorInfo {
  code: string;
  message: string;
  hint?: string;
  [key: string]: unknown;
}

/**
 * Tokens and cost so far in a run. cost is null when the model's price is
 * unknown.
 */
export interface IUsage {
  /**
   * An integer, at least 0.
   */
  prompt_tokens: number;
  /**
   * An integer, at least 0.
   */
  completion_tokens: number;
  cost: number | null;
}

/**
 * One nbformat v4 output (stream, display_data, execute_result or error).
 */
export interface IOutput {
  output_type:
    | 'stream'
    | 'display_data'
    | 'execute_result'
    | 'error'
    | 'update_display_data';
  [key: string]: unknown;
}

/**
 * A notebook cell as read from the browser.
 */
export interface ICellInfo {
  id: string;
  cell_type: 'code' | 'markdown' | 'raw';
  source: string;
  outputs?: IOutput[];
  /**
   * An integer.
   */
  execution_count?: number | null;
  metadata?: Record<string, unknown>;
}

/**
 * A variable in the kernel, summarised cheaply: the shape of each entry of the
 * JSON that the variables' inspection expression evaluates to.
 */
export interface IVariableInfo {
  name: string;
  type: string;
  summary?: string;
  shape?: number[] | null;
  columns?: string[] | null;
  dtypes?: string[] | null;
}

/**
 * The one-line status of a finished run, as numbers.
 */
export interface IRunSummary {
  /**
   * An integer, at least 0.
   */
  cells: number;
  /**
   * An integer, at least 0.
   */
  attempts: number;
  usage: IUsage;
  /**
   * At least 0.
   */
  seconds: number;
}

export interface IEventBase {
  run_id: string;
  /**
   * 1, 2, 3, ... per run; a reconnecting client asks for events after the last
   * it saw. An integer, at least 1.
   */
  seq: number;
  /**
   * Seconds since the epoch.
   */
  time: number;
}

/**
 * The run moved to another state, or its status line changed within one; text
 * is its status line, composed by the server (the browser displays it). For
 * awaiting_approval, reason says what is asked: '' (a cell to run) or
 * missing_package (a %pip install cell: Install and continue). For fixing,
 * reason is looks_wrong (LooksWrongReason) when the cell ran but its result
 * looks wrong, else ''. reason rate_limited (RateLimitedReason): the state is
 * unchanged, only its line: the model waits out a rate limit before retrying
 * (text: 'jupyter-ci: rate limited — retrying in 6 s (1/2)'), or that wait is
 * over (text: the state's own line again). Every view that counts attempts
 * reads attempt and max_attempts from here and from AttemptEvent, never a count
 * of its own.
 */
export interface IStateEvent extends IEventBase {
  type: 'state';
  state: RunState;
  reason: string;
  text: string;
  /**
   * The try of a cell this state is about: the one being written (fixing),
   * waiting for review (awaiting_approval) or running (executing); its line
   * says the same. Null or absent when the state is about no one try
   * (generating, the end). An integer, at least 1.
   */
  attempt?: number | null;
  /**
   * The run's max_attempts, with attempt (null or absent without it). An
   * integer, at least 1.
   */
  max_attempts?: number | null;
}

/**
 * Text streamed from the model: part says whether it is prose (for the panel)
 * or code (for the cell cell_id, once the cell exists).
 */
export interface ITokenEvent extends IEventBase {
  type: 'token';
  text: string;
  cell_id: string | null;
  part: 'prose' | 'code';
}

export interface ICellInsertedEvent extends IEventBase {
  type: 'cell_inserted';
  cell_id: string;
  after_id: string | null;
  source: string;
  /**
   * An integer, at least 1.
   */
  step: number;
}

/**
 * A generated cell's source changed; source is the whole new source and diff a
 * unified diff from the one before (empty for a streamed cell written as it
 * streamed). cause says why.
 */
export interface ICellUpdatedEvent extends IEventBase {
  type: 'cell_updated';
  cell_id: string;
  source: string;
  diff: string;
  /**
   * An integer, at least 1.
   */
  attempt: number;
  /**
   * streamed: the code that streamed into the cell is complete (repaired if the
   * model's block needed it); fix: the model's fix after a failure, or of the
   * user's cell; own_fix: jupyter-ci's own fix after a failure, or of an answer
   * printed another way than the request's format, written without the model
   * (own_fixes: a column's name respelled, a usual import added, the answer
   * printed with the format's names), using no attempt (attempt is the cell's
   * attempt still); edited: the user's edit in review; reproposed: the model's
   * other proposal after a Reject. stopped: the run was stopped while the model
   * wrote this cell; its code is commented out, so it never runs unedited (Run
   * All included). restored: the user's own code put back into their cell (a
   * fix of it), as an undoable change, because the run ended while the model's
   * proposal waited unaccepted (rejected, or the run stopped or failed during
   * the review). kept: the version of the cell that ran put back (and run
   * again), because its result looked wrong and the fixes of it failed until
   * max_attempts. agent: an outside agent's (MCP) code for the cell: its edit
   * (diff from the code before), or the code it asks to run (diff empty).
   */
  cause:
    | 'streamed'
    | 'fix'
    | 'own_fix'
    | 'edited'
    | 'reproposed'
    | 'stopped'
    | 'restored'
    | 'kept'
    | 'agent';
}

/**
 * A generated cell the run deleted: a cell the model had just begun to write
 * when the run was stopped, before any of its code arrived; or, just before a
 * re-run %%ci's first new cell, a cell of that %%ci's earlier answer the user
 * had not edited (its record is the earlier run's).
 */
export interface ICellDeletedEvent extends IEventBase {
  type: 'cell_deleted';
  cell_id: string;
}

export interface IExecutionStartedEvent extends IEventBase {
  type: 'execution_started';
  cell_id: string;
  /**
   * An integer, at least 1.
   */
  attempt: number;
}

/**
 * A cell ran; digest is the text the model is shown of its outputs.
 */
export interface IExecutionFinishedEvent extends IEventBase {
  type: 'execution_finished';
  cell_id: string;
  status: CellStatus;
  /**
   * An integer.
   */
  execution_count: number | null;
  digest: string;
  duration: number | null;
}

/**
 * A new try of a cell begins ('attempt 2/3').
 */
export interface IAttemptEvent extends IEventBase {
  type: 'attempt';
  cell_id: string;
  /**
   * An integer, at least 1.
   */
  attempt: number;
  /**
   * An integer, at least 1.
   */
  max_attempts: number;
}

/**
 * A complete message in the conversation (the model's prose, or a notice from
 * jupyter-ci).
 */
export interface IMessageEvent extends IEventBase {
  type: 'message';
  role: 'user' | 'assistant' | 'notice';
  text: string;
}

export interface IUsageEvent extends IEventBase {
  type: 'usage';
  usage: IUsage;
}

/**
 * The files in the notebook's folder the run's cells created or changed so far
 * (paths relative to that folder, newest first, at most 50); sent when the list
 * changes.
 */
export interface IFilesEvent extends IEventBase {
  type: 'files';
  files: IChangedFile[];
}

/**
 * A file a run's cells created or changed.
 */
export interface IChangedFile {
  path: string;
  change: 'created' | 'modified';
  /**
   * An integer, at least 0.
   */
  size: number;
}

/**
 * The run is over: done, failed or stopped, with the reason, the error if any,
 * and the summary.
 */
export interface IFinishedEvent extends IEventBase {
  type: 'finished';
  state: TerminalRunState;
  reason: string;
  error: IErrorInfo | null;
  summary: IRunSummary;
  /**
   * The model's final answer in prose ('' if none).
   */
  answer: string;
  /**
   * The run's status line, composed by the server (the browser displays it).
   */
  text: string;
}

/**
 * Discriminated by `type`.
 */
export type RunEvent =
  | IStateEvent
  | ITokenEvent
  | ICellInsertedEvent
  | ICellUpdatedEvent
  | ICellDeletedEvent
  | IExecutionStartedEvent
  | IExecutionFinishedEvent
  | IAttemptEvent
  | IMessageEvent
  | IUsageEvent
  | IFilesEvent
  | IFinishedEvent;

/**
 * A call from the server to the browser tab that owns a run. Every call names
 * the notebook; cells are named by id, never 'the active cell'.
 */
export interface ICallBase {
  call_id: string;
  run_id: string;
  notebook_path: string;
}

export interface IReadCellsCall extends ICallBase {
  method: 'read_cells';
  /**
   * Whether code cells come with their outputs (absent: true). False for a read
   * of sources and ids only (an outside agent's edit), which then stays small
   * however large the notebook's outputs are.
   */
  outputs?: boolean;
}

/**
 * After a reload: the run's cells as the run wrote them, in the order it
 * inserted them. The tab inserts each one its notebook lacks (after after_id,
 * else after the one before it) with that source and metadata, and gives
 * streaming_cell_id (the cell being written, which the user cannot edit) that
 * source. Calls of the run wait until this one is answered.
 */
export interface IRestoreCellsCall extends ICallBase {
  method: 'restore_cells';
  cells: {
    cell_id: string;
    after_id: string | null;
    source: string;
    metadata: Record<string, unknown>;
    /**
     * The cell's type when not code (an outside agent's markdown or raw cell).
     */
    cell_type?: 'markdown' | 'raw';
  }[];
  streaming_cell_id: string | null;
}

export interface IInsertCellCall extends ICallBase {
  method: 'insert_cell';
  after_id: string | null;
  source: string;
  metadata: Record<string, unknown>;
  /**
   * The new cell's type (default code); an outside agent (MCP) may insert
   * markdown or raw cells.
   */
  cell_type?: 'code' | 'markdown' | 'raw';
}

export interface IAppendSourceCall extends ICallBase {
  method: 'append_source';
  cell_id: string;
  text: string;
}

export interface IReplaceSourceCall extends ICallBase {
  method: 'replace_source';
  cell_id: string;
  source: string;
  /**
   * The cell is the user's (a fix of a cell they wrote, or an outside agent's
   * edit_cell): the change goes into the cell's undo history, so one Ctrl+Z in
   * its editor brings their code back. Absent or false: outside it, as streamed
   * code is written.
   */
  undoable?: boolean;
}

/**
 * Delete a cell jupyter-ci generated and the user did not edit: a cell of a
 * %%ci's earlier answer its new one replaces (--regenerate, or asking again
 * after a failure; the run checked its source hash against the record first),
 * or a cell the model had just begun when the run was stopped.
 */
export interface IDeleteCellCall extends ICallBase {
  method: 'delete_cell';
  cell_id: string;
}

/**
 * Run the cell in the notebook's kernel; the server keeps the timeout and sends
 * interrupt when it expires.
 */
export interface IRunCellCall extends ICallBase {
  method: 'run_cell';
  cell_id: string;
  /**
   * A Python expression evaluated as a user expression of the cell's own
   * execute request (the loop's files snapshot), so that no second request is
   * needed; its text/plain value comes back as the reply's text. Kernels
   * evaluate user expressions only after a cell that ended well.
   */
  expression?: string;
}

/**
 * Evaluate expression in the notebook's kernel as a user expression of an
 * empty, silent execute request (no history, no execution count, no change to
 * the user's namespace) and reply with its text/plain value as text.
 */
export interface IEvaluateCall extends ICallBase {
  method: 'evaluate';
  expression: string;
}

export interface IInterruptCall extends ICallBase {
  method: 'interrupt';
}

/**
 * The run options the user set in this tab (their JupyterLab settings for
 * jupyter-ci), as a request's user_options: the reply's options. An outside
 * agent's run (MCP) has no request from the tab to carry them (review mode is
 * one).
 */
export interface IRunOptionsCall extends ICallBase {
  method: 'run_options';
}

/**
 * Save the notebook (as the user's Save does): an outside agent's cells are on
 * disk without real-time collaboration too.
 */
export interface ISaveCall extends ICallBase {
  method: 'save';
}

/**
 * After a reload while a cell of the run was running: the cell's outputs and
 * execution count as the server heard them on the kernel's output channel (all
 * of them, not only the new ones), while it runs (running true) and once it
 * ended. The tab makes the cell show exactly these.
 */
export interface IShowOutputsCall extends ICallBase {
  method: 'show_outputs';
  cell_id: string;
  outputs: IOutput[];
  /**
   * An integer.
   */
  execution_count: number | null;
  running: boolean;
}

/**
 * Discriminated by `method`.
 */
export type Call =
  | IReadCellsCall
  | IInsertCellCall
  | IAppendSourceCall
  | IReplaceSourceCall
  | IDeleteCellCall
  | IRunCellCall
  | IEvaluateCall
  | IInterruptCall
  | IRunOptionsCall
  | ISaveCall
  | IRestoreCellsCall
  | IShowOutputsCall;

/**
 * The browser's successful reply to a call. Which fields are set depends on the
 * method: read_cells → cells; insert_cell → cell_id; run_cell → execution
 * fields; evaluate → text; restore_cells → restored; show_outputs → nothing.
 */
export interface ICallResult {
  call_id: string;
  ok: true;
  cell_id?: string;
  cells?: ICellInfo[];
  /**
   * run_cell: the execute_reply's status as the kernel sent it ('ok' for an
   * empty cell, which is not sent); null when no reply came for jupyter-ci's
   * request (the user ran the cell again over it).
   */
  reply_status?: ReplyStatus | null;
  outputs?: IOutput[];
  /**
   * An integer.
   */
  execution_count?: number | null;
  /**
   * When the kernel began the cell (its execute_input), seconds since the
   * epoch.
   */
  started_at?: number | null;
  /**
   * Whether the browser cut outputs to fit the message size cap.
   */
  truncated?: boolean;
  /**
   * restore_cells: the ids of the cells the notebook lacked and the tab put
   * back.
   */
  restored?: string[];
  /**
   * evaluate: the expression's text/plain value ('' when it raised). run_cell:
   * the value of the call's expression; absent when the kernel did not evaluate
   * it (no expression asked, or the cell failed).
   */
  text?: string;
  /**
   * run_options: the user's run options in this tab.
   */
  options?: Record<string, unknown>;
}

/**
 * The browser could not do what a call asked (notebook closed, cell gone,
 * kernel dead).
 */
export interface ICallFailure {
  call_id: string;
  ok: false;
  error: IErrorInfo;
}

/**
 * The browser says the kernel began the cell of a run_cell call (its
 * execute_input): the server's timeout starts now.
 */
export interface ICallProgress {
  call_id: string;
  progress: 'started';
  started_at: number;
  /**
   * The msg_id of the cell's execute request (absent for an empty cell, which
   * is not sent): the server follows the cell on the kernel's output channel
   * under it, so a reload of the page does not lose the cell.
   */
  msg_id?: string;
}

/**
 * Discriminated by `ok`.
 */
export type CallReply = ICallResult | ICallFailure;

/**
 * What a request for a run says, the same in start_run and in preview (which
 * shows what start_run would send). options are the request's own options;
 * session_options the %ci session settings of the kernel (from the handoff);
 * user_options the user's JupyterLab settings. All three are untrusted: they
 * may choose among what the server configured, never a new api_base.
 */
export interface IRunRequestBase {
  /**
   * Chosen by the client; the server's RequestReply carries it back as
   * reply_to. At least 1 character.
   */
  request_id?: string;
  notebook_path: string;
  /**
   * The notebook's kernel (one run at a time per kernel). At least 1 character.
   */
  kernel_id: string;
  options: Record<string, unknown>;
  anchor_cell_id: string | null;
  session_options?: Record<string, unknown>;
  user_options?: Record<string, unknown>;
  /**
   * "Fix with jupyter-ci": fix this cell in place instead of writing new cells.
   */
  fix_cell_id?: string | null;
  /**
   * Cells the user attached (by id): their code and outputs go with the request
   * (outputs only with share_outputs on; jupyter-ci-skip cells never).
   */
  attached_cell_ids?: string[];
  /**
   * Files the user attached (paths under the server's root); their schema and
   * first rows go into the context.
   */
  attachments?: string[];
}

/**
 * Start a run (from the panel, or a claimed %%ci handoff).
 */
export interface IStartRunRequest extends IRunRequestBase {
  request: 'start_run';
  /**
   * At least 1 character.
   */
  prompt: string;
  handoff_nonce: string | null;
  /**
   * A claimed %%ci handoff: the msg_id of the %%ci cell's execute request. The
   * server accepts one handoff per request of a kernel.
   */
  handoff_request_id?: string | null;
  /**
   * panel (refused while the kernel is busy) or magic (queued in order).
   */
  origin?: 'panel' | 'magic';
  /**
   * %%ci --regenerate: replace the unedited generated cells of the anchor's
   * last run.
   */
  regenerate?: boolean;
}

export interface IStopRunRequest {
  request: 'stop_run';
  /**
   * Chosen by the client; the server's RequestReply carries it back as
   * reply_to. At least 1 character.
   */
  request_id?: string;
  run_id: string;
}

/**
 * The user's answer to a cell awaiting approval: run it (possibly edited),
 * reject it, or ran: the user ran it in the notebook themselves (its outputs
 * are there; it counts as Run).
 */
export interface IReviewRequest {
  request: 'review';
  /**
   * Chosen by the client; the server's RequestReply carries it back as
   * reply_to. At least 1 character.
   */
  request_id?: string;
  run_id: string;
  cell_id: string;
  decision: 'run' | 'reject' | 'ran';
  /**
   * The user's edited source, when they edited before running.
   */
  source: string | null;
  /**
   * With reject: the user's reason, if they gave one; it goes to the model with
   * the rejection and stays in the conversation. At most 4000 characters.
   */
  comment?: string | null;
}

/**
 * After a reconnect: send the run's events with seq greater than after_seq.
 */
export interface IReplayRequest {
  request: 'replay';
  /**
   * Chosen by the client; the server's RequestReply carries it back as
   * reply_to. At least 1 character.
   */
  request_id?: string;
  run_id: string;
  /**
   * An integer, at least 0.
   */
  after_seq: number;
}

/**
 * What the next request would send to the model, without sending it: the same
 * fields as start_run. The reply's preview holds the messages and their token
 * count.
 */
export interface IPreviewRequest extends IRunRequestBase {
  request: 'preview';
  prompt: string;
}

/**
 * The tab has just scheduled this %%ci cell. Should a server-side executor
 * (jupyter-server-nbmodel) run it, which sends the kernel no cell metadata, the
 * magic recognises it by its code and hands it off to this tab. The reply's
 * expected says whether the server could tell the kernel.
 */
export interface IExpectHandoffRequest {
  request: 'expect_handoff';
  /**
   * Chosen by the client; the server's RequestReply carries it back as
   * reply_to. At least 1 character.
   */
  request_id?: string;
  notebook_path: string;
  /**
   * At least 1 character.
   */
  kernel_id: string;
  /**
   * At least 1 character.
   */
  cell_id: string;
  /**
   * The cell's source, as the kernel will receive it.
   */
  code: string;
}

/**
 * Discriminated by `request`.
 */
export type ClientRequest =
  | IHelloRequest
  | ISubscribeRequest
  | IStartRunRequest
  | IStopRunRequest
  | IReviewRequest
  | IReplayRequest
  | IPreviewRequest
  | IExpectHandoffRequest;

/**
 * The first message of a connection: who the tab is (client_id, stable across
 * its reconnects) and the notebooks it has open. The server replies with the
 * runs in progress and, the first time, the tab's client_secret: a later hello
 * with the same client_id must carry it (nobody else can take the tab's place
 * and its runs' calls).
 */
export interface IHelloRequest {
  request: 'hello';
  /**
   * Chosen by the client; the server's RequestReply carries it back as
   * reply_to. At least 1 character.
   */
  request_id?: string;
  /**
   * At least 8 characters.
   */
  client_id: string;
  protocol_version: 1;
  notebook_paths: string[];
  /**
   * The secret the server gave this client_id at its first hello (absent the
   * first time).
   */
  client_secret?: string;
  /**
   * The first hello of a page: a tab that kept its client_id across a reload
   * holds none of its runs' cells nor answers; the server first has it restore
   * each run's cells (restore_cells), and does not send again a run_cell the
   * previous page may have run.
   */
  page_start?: boolean;
}

/**
 * The notebooks the tab has open now: it receives the events of runs on them
 * (runs it owns are always sent to it).
 */
export interface ISubscribeRequest {
  request: 'subscribe';
  /**
   * Chosen by the client; the server's RequestReply carries it back as
   * reply_to. At least 1 character.
   */
  request_id?: string;
  notebook_paths: string[];
}

/**
 * A run the server knows of (active or queued), as every connected tab sees it.
 * prompt is the start of the request, for the owner and tabs with the notebook
 * open only ('' for others).
 */
export interface IRunInfo {
  run_id: string;
  notebook_path: string;
  kernel_id: string;
  /**
   * The client_id of the tab that started the run (its calls go only there).
   */
  owner: string;
  /**
   * panel, magic, or mcp: an outside agent's tool call (its owner is the tab
   * that has the notebook open).
   */
  origin: 'panel' | 'magic' | 'mcp';
  /**
   * origin mcp: the outside agent whose call it is (the MCP client's name, as
   * the cells it adds are badged).
   */
  agent?: string;
  state: RunState;
  prompt: string;
  anchor_cell_id: string | null;
  /**
   * 0 for the kernel's active run; 1, 2, ... for runs queued behind it. An
   * integer, at least 0.
   */
  position: number;
  /**
   * The sequence number of the run's latest event (0 before any). An integer,
   * at least 0.
   */
  last_seq: number;
}

/**
 * Exactly what a request would send to the model: its messages (as the model
 * gets them) and their token count (an estimate where the model's tokenizer is
 * not at hand).
 */
export interface IPreview {
  model: string;
  messages: {
    role: string;
    content: string;
    /**
     * The message's share of prompt_tokens (an estimate where the model's
     * tokenizer is not at hand). An integer, at least 0.
     */
    tokens: number;
  }[];
  /**
   * An integer, at least 0.
   */
  prompt_tokens: number;
  /**
   * The context_tokens budget the view was fitted to. An integer, at least 0.
   */
  context_tokens: number;
}

/**
 * The server did what a client request asked. start_run: run_id and position (0
 * = running now); hello: runs, server_version and client_secret; replay: the
 * events follow this reply.
 */
export interface IRequestAccepted {
  reply_to: string;
  ok: true;
  run_id?: string;
  /**
   * An integer, at least 0.
   */
  position?: number;
  runs?: IRunInfo[];
  server_version?: string;
  /**
   * hello: the secret this client_id must show in its later hellos.
   */
  client_secret?: string;
  /**
   * A sentence for the user (e.g. why no model was called).
   */
  note?: string;
  /**
   * start_run answered without a run (a %%ci whose cells are still below it):
   * the status line of that %%ci's last run, which still stands; the cell shows
   * it, with the note under it.
   */
  status_line?: string;
  preview?: IPreview;
  /**
   * expect_handoff: whether the kernel can now recognise the cell if a
   * server-side executor runs it.
   */
  expected?: boolean;
}

/**
 * The server refused a client request, saying why and what to do; run_id names
 * the run in the way (e.g. the kernel's active run, to offer Stop).
 */
export interface IRequestRefused {
  reply_to: string;
  ok: false;
  error: IErrorInfo;
  run_id?: string;
}

/**
 * Discriminated by `ok`.
 */
export type RequestReply = IRequestAccepted | IRequestRefused;

/**
 * Sent to every tab whenever a run starts, changes state or ends: the runs now
 * active or queued.
 */
export interface IRunsNotice {
  notice: 'runs';
  runs: IRunInfo[];
}

/**
 * A message from the client could not be handled (not JSON, not a known
 * message, too large); the connection stays open.
 */
export interface IErrorNotice {
  notice: 'error';
  error: IErrorInfo;
}

/**
 * Discriminated by `notice`.
 */
export type Notice = IRunsNotice | IErrorNotice;

/**
 * Anything the server sends on the websocket.
 */
export type ServerMessage = RunEvent | Call | RequestReply | Notice;

/**
 * Anything a tab sends on the websocket.
 */
export type ClientMessage = ClientRequest | CallReply | ICallProgress;

/**
 * What %%ci outputs (mime type application/vnd.jupyter-ci.handoff+json) when it
 * hands a request to the JupyterLab frontend. The tab whose kernel client id
 * equals the message's parent session claims it, by sending a start_run with
 * the nonce; the server accepts each nonce once.
 */
export interface IHandoff {
  version: 1;
  /**
   * At least 1 character.
   */
  prompt: string;
  options: Record<string, unknown>;
  cell_id: string;
  /**
   * At least 16 characters.
   */
  nonce: string;
  jupyter_ci_version: string;
  /**
   * The kernel's %ci session settings (untrusted: the server treats them like
   * the request's own options).
   */
  session_options: Record<string, unknown>;
  /**
   * %%ci --regenerate.
   */
  regenerate: boolean;
  /**
   * The session (kernel client id) of the request the magic handled: only the
   * tab with that client id claims the handoff.
   */
  kernel_session: string;
}

/**
 * Every definition of the protocol schema by its name there:
 * `IProtocolDefinitions['StateEvent']` is `IStateEvent`.
 *
 * jupyter-ci's messages: run events (server to clients), calls (server to the
 * browser that owns a run, with replies), client requests (browser to server),
 * and the magic's handoff payload. Version 1.
 */
export interface IProtocolDefinitions {
  RunState: RunState;
  TerminalRunState: TerminalRunState;
  DoneReason: DoneReason;
  FailedReason: FailedReason;
  StoppedReason: StoppedReason;
  EndReason: EndReason;
  Mode: Mode;
  CellStatus: CellStatus;
  ReplyStatus: ReplyStatus;
  CICellPattern: CICellPattern;
  ProtocolVersion: ProtocolVersion;
  HandoffMime: HandoffMime;
  StatusMime: StatusMime;
  HandoffErrorName: HandoffErrorName;
  HeldBackErrorName: HeldBackErrorName;
  ResumeMetadataKey: ResumeMetadataKey;
  RunMetadataKey: RunMetadataKey;
  CellMetadataKey: CellMetadataKey;
  RateLimitedReason: RateLimitedReason;
  LooksWrongReason: LooksWrongReason;
  ReplyGraceSeconds: ReplyGraceSeconds;
  ErrorInfo: IErrorInfo;
  Usage: IUsage;
  Output: IOutput;
  CellInfo: ICellInfo;
  VariableInfo: IVariableInfo;
  RunSummary: IRunSummary;
  EventBase: IEventBase;
  StateEvent: IStateEvent;
  TokenEvent: ITokenEvent;
  CellInsertedEvent: ICellInsertedEvent;
  CellUpdatedEvent: ICellUpdatedEvent;
  CellDeletedEvent: ICellDeletedEvent;
  ExecutionStartedEvent: IExecutionStartedEvent;
  ExecutionFinishedEvent: IExecutionFinishedEvent;
  AttemptEvent: IAttemptEvent;
  MessageEvent: IMessageEvent;
  UsageEvent: IUsageEvent;
  FilesEvent: IFilesEvent;
  ChangedFile: IChangedFile;
  FinishedEvent: IFinishedEvent;
  RunEvent: RunEvent;
  CallBase: ICallBase;
  ReadCellsCall: IReadCellsCall;
  RestoreCellsCall: IRestoreCellsCall;
  InsertCellCall: IInsertCellCall;
  AppendSourceCall: IAppendSourceCall;
  ReplaceSourceCall: IReplaceSourceCall;
  DeleteCellCall: IDeleteCellCall;
  RunCellCall: IRunCellCall;
  EvaluateCall: IEvaluateCall;
  InterruptCall: IInterruptCall;
  RunOptionsCall: IRunOptionsCall;
  SaveCall: ISaveCall;
  ShowOutputsCall: IShowOutputsCall;
  Call: Call;
  CallResult: ICallResult;
  CallFailure: ICallFailure;
  CallProgress: ICallProgress;
  CallReply: CallReply;
  RunRequestBase: IRunRequestBase;
  StartRunRequest: IStartRunRequest;
  StopRunRequest: IStopRunRequest;
  ReviewRequest: IReviewRequest;
  ReplayRequest: IReplayRequest;
  PreviewRequest: IPreviewRequest;
  ExpectHandoffRequest: IExpectHandoffRequest;
  ClientRequest: ClientRequest;
  HelloRequest: IHelloRequest;
  SubscribeRequest: ISubscribeRequest;
  RunInfo: IRunInfo;
  Preview: IPreview;
  RequestAccepted: IRequestAccepted;
  RequestRefused: IRequestRefused;
  RequestReply: RequestReply;
  RunsNotice: IRunsNotice;
  ErrorNotice: IErrorNotice;
  Notice: Notice;
  ServerMessage: ServerMessage;
  ClientMessage: ClientMessage;
  Handoff: IHandoff;
}

/**
 * The values of `RunState`, in the schema's order.
 */
export const RUN_STATE_VALUES: readonly RunState[] = [
  'queued',
  'generating',
  'awaiting_approval',
  'executing',
  'fixing',
  'done',
  'failed',
  'stopped'
];

/**
 * The values of `TerminalRunState`, in the schema's order.
 */
export const TERMINAL_RUN_STATE_VALUES: readonly TerminalRunState[] = [
  'done',
  'failed',
  'stopped'
];

/**
 * The words shown for each value of `DoneReason` (its titles).
 */
export const DONE_REASON_TITLES: Record<DoneReason, string> = {
  answered: 'answered',
  max_steps: 'reached the step limit',
  inserted: 'inserted, not run',
  rejected: 'rejected in review',
  fixed: 'fixed',
  called: 'done'
};

/**
 * The words shown for each value of `FailedReason` (its titles).
 */
export const FAILED_REASON_TITLES: Record<FailedReason, string> = {
  max_attempts: 'the cell still failed at the last attempt',
  model_error: 'model error',
  config_error: 'configuration error',
  kernel_died: 'the kernel died',
  budget_exceeded: 'over budget',
  bad_code_block: 'no usable code from the model',
  missing_package: 'a package is missing',
  notebook_unavailable: 'notebook unavailable',
  internal_error: 'internal error'
};

/**
 * The words shown for each value of `StoppedReason` (its titles).
 */
export const STOPPED_REASON_TITLES: Record<StoppedReason, string> = {
  user: 'stopped by the user',
  disconnected: 'the tab was away too long',
  kernel_restarted: 'the kernel restarted',
  kernel_shutdown: 'the kernel was shut down',
  server_shutdown: 'the server stopped'
};

/**
 * The words shown for each value of `EndReason` (its titles).
 */
export const END_REASON_TITLES: Record<EndReason, string> = {
  answered: 'answered',
  max_steps: 'reached the step limit',
  inserted: 'inserted, not run',
  rejected: 'rejected in review',
  fixed: 'fixed',
  called: 'done',
  max_attempts: 'the cell still failed at the last attempt',
  model_error: 'model error',
  config_error: 'configuration error',
  kernel_died: 'the kernel died',
  budget_exceeded: 'over budget',
  bad_code_block: 'no usable code from the model',
  missing_package: 'a package is missing',
  notebook_unavailable: 'notebook unavailable',
  internal_error: 'internal error',
  user: 'stopped by the user',
  disconnected: 'the tab was away too long',
  kernel_restarted: 'the kernel restarted',
  kernel_shutdown: 'the kernel was shut down',
  server_shutdown: 'the server stopped'
};

/**
 * The values of `Mode`, in the schema's order.
 */
export const MODE_VALUES: readonly Mode[] = ['auto', 'review', 'insert'];

/**
 * The words shown for each value of `CellStatus` (its titles).
 */
export const CELL_STATUS_TITLES: Record<CellStatus, string> = {
  ok: 'Ran',
  error: 'Error',
  timed_out: 'Timed out',
  interrupted: 'Interrupted',
  aborted: 'Stopped by the user',
  kernel_died: 'Kernel died',
  kernel_shutdown: 'Kernel shut down',
  kernel_restarted: 'Kernel restarted'
};

/**
 * The values of `ReplyStatus`, in the schema's order.
 */
export const REPLY_STATUS_VALUES: readonly ReplyStatus[] = [
  'ok',
  'error',
  'aborted'
];

/**
 * `CICellPattern` as a regular expression.
 */
export const CI_CELL_PATTERN = new RegExp('^\\s*%%ci(?:\\s|$)');

/**
 * The protocol's version, as a handoff's version says it.
 */
export const PROTOCOL_VERSION: ProtocolVersion = 1;

/**
 * The mime type of the %%ci magic's handoff output (a Handoff).
 */
export const HANDOFF_MIME: HandoffMime =
  'application/vnd.jupyter-ci.handoff+json';

/**
 * The mime type of the status output jupyter-ci keeps in a %%ci cell, next to a
 * text/plain line for other frontends.
 */
export const STATUS_MIME: StatusMime = 'application/vnd.jupyter-ci.status+json';

/**
 * The exception the magic raises after a handoff, so the kernel stops the cells
 * queued after the %%ci cell.
 */
export const HANDOFF_ERROR_NAME: HandoffErrorName = 'JupyterCIHandoff';

/**
 * The error of a cell the kernel held back: sent with a handing-off %%ci (Run
 * All), it runs after the generated cells.
 */
export const HELD_BACK_ERROR_NAME: HeldBackErrorName = 'JupyterCIHeldBack';

/**
 * Request metadata saying jupyter-ci itself runs the request (a generated cell,
 * the mark of a batch's end, the batch's continuation): the kernel never holds
 * it back.
 */
export const RESUME_METADATA_KEY: ResumeMetadataKey = 'jupyter_ci_resume';

/**
 * Request metadata naming the run whose cell the request executes (its run_id):
 * %%ci never starts a run from such a cell (generated code cannot start runs).
 */
export const RUN_METADATA_KEY: RunMetadataKey = 'jupyter_ci_run';

/**
 * jupyter-ci's key in cell metadata: the stamp of a %%ci cell ({client}), the
 * hint on a generated cell ({run_id, ...}; agent: the outside agent that added
 * it, an MCP client's name), or on a cell of the user's that jupyter-ci fixed
 * or an outside agent changed, while it holds other code than theirs ({fixed:
 * {run_id, original, agent?}, attempt, max_attempts}: Restore puts original
 * back, after a reload too; agent: the MCP client that changed it).
 */
export const CELL_METADATA_KEY: CellMetadataKey = 'jupyter_ci';

/**
 * The reason of a state event sent when the model starts or ends waiting out a
 * rate limit: the state is unchanged, only its status line (text) changes.
 */
export const RATE_LIMITED_REASON: RateLimitedReason = 'rate_limited';

/**
 * The reason of a fixing state event when the cell ran without an error but its
 * result looks wrong (check_results): the model is asked to look at a result,
 * not to fix an error.
 */
export const LOOKS_WRONG_REASON: LooksWrongReason = 'looks_wrong';

/**
 * How long a frontend or workspace waits for an execute_reply once the kernel
 * is idle again after the request (seconds): an interrupt that lands in the
 * kernel's request handler, outside the cell's code, ends the request without a
 * reply, and the cell then ends aborted.
 */
export const REPLY_GRACE_SECONDS: ReplyGraceSeconds = 3;
