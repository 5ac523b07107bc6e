/**
 * Sample protocol messages, typed with the generated types of
 * `../src/protocol`. `jlpm check:protocol` compiles this file (so each sample
 * must type-check as its definition) and then validates every sample against
 * the JSON Schema: valid samples must be accepted, invalid ones refused.
 *
 * Invalid samples marked `@ts-expect-error` are refused by the TypeScript
 * types too (the compile fails if they are not); the others break a rule the
 * types cannot express (a minimum, a minimum length, an integer).
 */
import type { IProtocolDefinitions } from '../src/protocol';

/**
 * The name of a definition in the protocol schema.
 */
export type DefinitionName = keyof IProtocolDefinitions;

/**
 * A message and the schema definition it is checked against.
 */
export interface ISample {
  /**
   * The definition (`#/$defs/<definition>`).
   */
  definition: DefinitionName;
  /**
   * Whether the schema must accept the message.
   */
  valid: boolean;
  /**
   * What is wrong with an invalid sample (shown when the schema accepts it).
   */
  why: string;
  /**
   * The message.
   */
  message: unknown;
}

const RUN_INFO: IProtocolDefinitions['RunInfo'] = {
  run_id: 'r1',
  notebook_path: 'a.ipynb',
  kernel_id: 'k-1',
  owner: 'tab-0123456789',
  origin: 'panel',
  state: 'executing',
  prompt: 'plot',
  anchor_cell_id: null,
  position: 0,
  last_seq: 12
};

function valid<K extends DefinitionName>(
  definition: K,
  message: IProtocolDefinitions[K]
): ISample {
  return { definition, valid: true, why: '', message };
}

function invalid<K extends DefinitionName>(
  definition: K,
  why: string,
  message: IProtocolDefinitions[K]
): ISample {
  return { definition, valid: false, why, message };
}

const base = { run_id: 'r1', seq: 3, time: 1700000000.5 };
const call = { call_id: 'k1', run_id: 'r1', notebook_path: 'a/b.ipynb' };
const usage = { prompt_tokens: 10, completion_tokens: 5, cost: null };
const summary = { cells: 1, attempts: 3, usage, seconds: 4.2 };
const stream = { output_type: 'stream', name: 'stdout', text: 'hi\n' } as const;

/**
 * Messages the schema accepts: every member of every union, and a sample of
 * each other definition.
 */
export const VALID: ISample[] = [
  valid('RunState', 'awaiting_approval'),
  valid('Mode', 'review'),
  valid('CellStatus', 'timed_out'),
  valid('CellStatus', 'kernel_shutdown'),
  valid('TerminalRunState', 'stopped'),
  valid('DoneReason', 'answered'),
  valid('FailedReason', 'max_attempts'),
  valid('StoppedReason', 'kernel_shutdown'),
  valid('EndReason', 'disconnected'),
  valid('ReplyStatus', 'aborted'),
  valid('CICellPattern', '%%ci plot the iris data'),
  valid('ProtocolVersion', 1),
  valid('HandoffMime', 'application/vnd.jupyter-ci.handoff+json'),
  valid('StatusMime', 'application/vnd.jupyter-ci.status+json'),
  valid('HandoffErrorName', 'JupyterCIHandoff'),
  valid('HeldBackErrorName', 'JupyterCIHeldBack'),
  valid('ResumeMetadataKey', 'jupyter_ci_resume'),
  valid('RateLimitedReason', 'rate_limited'),
  valid('LooksWrongReason', 'looks_wrong'),
  valid('RunMetadataKey', 'jupyter_ci_run'),
  valid('CellMetadataKey', 'jupyter_ci'),
  valid('ReplyGraceSeconds', 3),
  valid('ErrorInfo', { code: 'kernel_dead', message: 'The kernel died.' }),
  valid('Usage', { ...usage, cost: 0.0012 }),
  valid('Output', stream),
  valid('CellInfo', { id: 'c1', cell_type: 'markdown', source: '# Title' }),
  valid('VariableInfo', {
    name: 'df',
    type: 'DataFrame',
    summary: '150 rows × 5 columns',
    shape: [150, 5],
    columns: ['sepal_length', 'species'],
    dtypes: ['float64', 'object']
  }),
  valid('VariableInfo', { name: 'x', type: 'int', shape: null }),
  valid('RunSummary', summary),

  // RunEvent: each member.
  valid('RunEvent', {
    ...base,
    type: 'state',
    state: 'fixing',
    reason: '',
    text: 'jupyter-ci: fixing — attempt 2/3'
  }),
  valid('RunEvent', {
    ...base,
    type: 'token',
    text: 'impo',
    cell_id: 'c1',
    part: 'code'
  }),
  valid('RunEvent', {
    ...base,
    type: 'token',
    text: 'Sure',
    cell_id: null,
    part: 'prose'
  }),
  valid('RunEvent', {
    ...base,
    type: 'cell_inserted',
    cell_id: 'c2',
    after_id: null,
    source: '',
    step: 1
  }),
  valid('RunEvent', {
    ...base,
    type: 'cell_updated',
    cell_id: 'c2',
    source: 'x = 1',
    diff: '-x = y\n+x = 1',
    attempt: 2,
    cause: 'fix'
  }),
  valid('RunEvent', { ...base, type: 'cell_deleted', cell_id: 'c3' }),
  valid('RunEvent', {
    ...base,
    type: 'files',
    files: [{ path: 'clean.csv', change: 'created', size: 1024 }]
  }),
  valid('ChangedFile', { path: 'out/plot.png', change: 'modified', size: 0 }),
  valid('RunEvent', {
    ...base,
    type: 'execution_started',
    cell_id: 'c2',
    attempt: 1
  }),
  valid('RunEvent', {
    ...base,
    type: 'execution_finished',
    cell_id: 'c2',
    status: 'timed_out',
    execution_count: null,
    digest: '…',
    duration: 120.0
  }),
  valid('RunEvent', {
    ...base,
    type: 'attempt',
    cell_id: 'c2',
    attempt: 2,
    max_attempts: 3
  }),
  valid('RunEvent', {
    ...base,
    type: 'message',
    role: 'notice',
    text: 'Stopped.'
  }),
  valid('RunEvent', { ...base, type: 'usage', usage }),
  valid('RunEvent', {
    ...base,
    type: 'finished',
    state: 'failed',
    reason: 'max_attempts',
    error: { code: 'cell_error', message: 'NameError: x', hint: '' },
    summary,
    answer: '',
    text: 'jupyter-ci: failed (the cell still failed at the last attempt)'
  }),
  valid('RunEvent', {
    ...base,
    type: 'finished',
    state: 'done',
    reason: 'answered',
    error: null,
    summary,
    answer: 'The mean is 5.8.',
    text: 'jupyter-ci: done — 1 cell, 1 attempt'
  }),

  // Call: each member.
  valid('Call', { ...call, method: 'read_cells' }),
  valid('Call', { ...call, method: 'read_cells', outputs: false }),
  valid('Call', {
    ...call,
    method: 'insert_cell',
    after_id: 'c1',
    source: '',
    metadata: { jupyter_ci: { run_id: 'r1' } }
  }),
  valid('Call', {
    ...call,
    method: 'append_source',
    cell_id: 'c2',
    text: 'import '
  }),
  valid('Call', {
    ...call,
    method: 'replace_source',
    cell_id: 'c2',
    source: 'print(1)'
  }),
  valid('Call', { ...call, method: 'run_cell', cell_id: 'c2' }),
  valid('Call', {
    ...call,
    method: 'run_cell',
    cell_id: 'c2',
    expression: 'len(globals())'
  }),
  valid('Call', { ...call, method: 'evaluate', expression: '1' }),
  valid('Call', { ...call, method: 'interrupt' }),
  valid('Call', { ...call, method: 'run_options' }),
  valid('Call', { ...call, method: 'save' }),
  valid('Call', {
    ...call,
    method: 'insert_cell',
    after_id: null,
    source: '## Notes',
    metadata: { jupyter_ci: { run_id: 'r1', agent: 'claude-code' } },
    cell_type: 'markdown'
  }),
  valid('Call', {
    ...call,
    method: 'replace_source',
    cell_id: 'c2',
    source: 'print(2)',
    undoable: true
  }),
  valid('Call', {
    ...call,
    method: 'restore_cells',
    cells: [
      { cell_id: 'c2', after_id: 'c1', source: 'x = 1', metadata: {} },
      { cell_id: 'c3', after_id: 'c2', source: 'print(x)', metadata: {} }
    ],
    streaming_cell_id: 'c3'
  }),
  valid('Call', {
    ...call,
    method: 'show_outputs',
    cell_id: 'c3',
    outputs: [{ output_type: 'stream', name: 'stdout', text: 'begun\n' }],
    execution_count: 7,
    running: true
  }),

  // CallReply: both members, and a progress note.
  valid('CallReply', {
    call_id: 'k3',
    ok: true,
    reply_status: 'ok',
    execution_count: 4,
    started_at: 1.0,
    truncated: false,
    outputs: [stream]
  }),
  valid('CallReply', {
    call_id: 'k4',
    ok: true,
    cells: [
      {
        id: 'c1',
        cell_type: 'code',
        source: 'x = 1',
        outputs: [],
        execution_count: null,
        metadata: {}
      }
    ]
  }),
  valid('CallReply', { call_id: 'k5', ok: true, text: '[]' }),
  valid('CallReply', {
    call_id: 'k6',
    ok: false,
    error: { code: 'cell_not_found', message: 'no cell c9' }
  }),
  valid('CallProgress', {
    call_id: 'k3',
    progress: 'started',
    started_at: 2.5
  }),
  valid('CallProgress', {
    call_id: 'k3',
    progress: 'started',
    started_at: 2.5,
    msg_id: 'a1b2c3'
  }),

  // ClientRequest: each member.
  valid('ClientRequest', {
    request: 'start_run',
    request_id: 'q1',
    notebook_path: 'a.ipynb',
    kernel_id: 'k-1',
    prompt: 'plot $x {y}',
    options: { max_attempts: 2 },
    anchor_cell_id: 'c0',
    handoff_nonce: null
  }),
  valid('ClientRequest', { request: 'stop_run', run_id: 'r1' }),
  valid('ClientRequest', {
    request: 'review',
    run_id: 'r1',
    cell_id: 'c2',
    decision: 'run',
    source: null
  }),
  valid('ClientRequest', { request: 'replay', run_id: 'r1', after_seq: 0 }),
  valid('ClientRequest', {
    request: 'start_run',
    notebook_path: 'a.ipynb',
    kernel_id: 'k-1',
    prompt: 'plot',
    options: {},
    anchor_cell_id: 'c0',
    handoff_nonce: '0123456789abcdef0123',
    origin: 'magic',
    regenerate: true,
    session_options: { max_attempts: 2 },
    user_options: { mode: 'review' }
  }),
  valid('HelloRequest', {
    request: 'hello',
    request_id: 'q0',
    client_id: 'tab-0123456789',
    protocol_version: 1,
    notebook_paths: ['a.ipynb']
  }),
  valid('SubscribeRequest', { request: 'subscribe', notebook_paths: [] }),
  valid('PreviewRequest', {
    request: 'preview',
    request_id: 'q5',
    notebook_path: 'a.ipynb',
    kernel_id: 'k-1',
    prompt: '',
    options: {},
    anchor_cell_id: null,
    fix_cell_id: 'c3',
    attachments: ['data/iris.csv']
  }),
  valid('ExpectHandoffRequest', {
    request: 'expect_handoff',
    request_id: 'q6',
    notebook_path: 'a.ipynb',
    kernel_id: 'k-1',
    cell_id: 'c2',
    code: '%%ci plot the iris data'
  }),
  valid('RequestAccepted', { reply_to: 'q6', ok: true, expected: true }),
  valid('Preview', {
    model: 'openai/scripted',
    messages: [{ role: 'system', content: 'You are jupyter-ci', tokens: 5 }],
    prompt_tokens: 5,
    context_tokens: 8000
  }),
  valid('ClientMessage', {
    request: 'subscribe',
    notebook_paths: ['a.ipynb']
  }),
  valid('ClientMessage', {
    call_id: 'k3',
    progress: 'started',
    started_at: 2.5
  }),

  // Replies and notices (server to tabs).
  valid('RunInfo', RUN_INFO),
  valid('RequestAccepted', {
    reply_to: 'q1',
    ok: true,
    run_id: 'r1',
    position: 0
  }),
  // start_run answered without a run: the last run's line, and why.
  valid('RequestAccepted', {
    reply_to: 'q2',
    ok: true,
    note: 'Not asked again: its cell is below (--regenerate to replace it)',
    status_line: 'jupyter-ci: done — 1 cell, 1 attempt, 1,204 tokens, 3.1 s'
  }),
  valid('RequestRefused', {
    reply_to: 'q1',
    ok: false,
    error: { code: 'kernel_busy', message: 'busy', hint: 'Stop it first.' },
    run_id: 'r0'
  }),
  valid('RequestReply', {
    reply_to: 'q0',
    ok: true,
    runs: [RUN_INFO],
    server_version: '0.1.0'
  }),
  valid('RunsNotice', { notice: 'runs', runs: [RUN_INFO] }),
  valid('ErrorNotice', {
    notice: 'error',
    error: { code: 'bad_message', message: 'not JSON' }
  }),
  valid('Notice', { notice: 'runs', runs: [] }),
  valid('ServerMessage', { notice: 'runs', runs: [] }),
  valid('Call', {
    call_id: 'k9',
    run_id: 'r',
    notebook_path: 'n',
    method: 'delete_cell',
    cell_id: 'c5'
  }),
  valid('ServerMessage', {
    call_id: 'k',
    run_id: 'r',
    notebook_path: 'n',
    method: 'read_cells'
  }),

  valid('Handoff', {
    version: 1,
    prompt: 'plot the iris data',
    options: {},
    cell_id: 'c0',
    nonce: '0123456789abcdef0123',
    jupyter_ci_version: '0.1.0',
    session_options: { max_attempts: 2 },
    regenerate: false,
    kernel_session: 'a1b2c3'
  })
];

/**
 * Messages the schema refuses.
 */
export const INVALID: ISample[] = [
  invalid('RunEvent', 'an unknown run state', {
    ...base,
    type: 'state',
    // @ts-expect-error -- not a RunState
    state: 'dancing',
    reason: ''
  }),
  // @ts-expect-error -- cell_id is required (it may be null)
  invalid('RunEvent', 'a token without cell_id', {
    ...base,
    type: 'token',
    text: 'x'
  }),
  invalid('RunEvent', 'seq starts at 1', {
    ...base,
    seq: 0,
    type: 'usage',
    usage
  }),
  invalid('RunEvent', 'a fractional seq', {
    ...base,
    seq: 1.5,
    type: 'usage',
    usage
  }),
  invalid('RunEvent', 'a property no event has', {
    ...base,
    type: 'usage',
    usage,
    // @ts-expect-error -- events are closed
    key: 'sk-1'
  }),
  invalid('RunEvent', 'finished with a state that is not final', {
    ...base,
    type: 'finished',
    // @ts-expect-error -- only done, failed or stopped
    state: 'executing',
    reason: '',
    error: null,
    summary
  }),
  // @ts-expect-error -- a call names its notebook
  invalid('Call', 'a call without notebook_path', {
    call_id: 'k',
    run_id: 'r',
    method: 'interrupt'
  }),
  invalid('Call', 'an unknown method', {
    ...call,
    // @ts-expect-error -- not a call method
    method: 'rm_rf'
  }),
  invalid('Call', 'a read_cells whose outputs is not a boolean', {
    ...call,
    method: 'read_cells',
    // @ts-expect-error -- outputs is a boolean
    outputs: 'no'
  }),
  // @ts-expect-error -- a failure carries its error
  invalid('CallReply', 'a failure without error', { call_id: 'k', ok: false }),
  invalid('CallReply', 'a result with a failure field', {
    call_id: 'k',
    ok: true,
    // @ts-expect-error -- results are closed
    error: { code: 'x', message: 'y' }
  }),
  // @ts-expect-error -- start_run names the kernel
  invalid('ClientRequest', 'a start_run without kernel_id', {
    request: 'start_run',
    notebook_path: 'a',
    prompt: 'p',
    options: {},
    anchor_cell_id: null,
    handoff_nonce: null
  }),
  // @ts-expect-error -- the kernel recognises the cell by its code
  invalid('ClientRequest', 'an expect_handoff without code', {
    request: 'expect_handoff',
    notebook_path: 'a',
    kernel_id: 'k',
    cell_id: 'c'
  }),
  invalid('HelloRequest', 'a short client id', {
    request: 'hello',
    client_id: 'short',
    protocol_version: 1,
    notebook_paths: []
  }),
  invalid('RunInfo', 'a negative queue position', {
    ...RUN_INFO,
    position: -1
  }),
  // @ts-expect-error -- a refusal carries its error
  invalid('RequestReply', 'a refusal without error', {
    reply_to: 'q',
    ok: false
  }),
  invalid('ClientRequest', 'an empty prompt', {
    request: 'start_run',
    notebook_path: 'a',
    kernel_id: 'k',
    prompt: '',
    options: {},
    anchor_cell_id: null,
    handoff_nonce: null
  }),
  invalid('ClientRequest', 'a property stop_run does not have', {
    request: 'stop_run',
    run_id: 'r1',
    // @ts-expect-error -- requests are closed
    reason: 'bored'
  }),
  invalid('ClientRequest', 'a negative after_seq', {
    request: 'replay',
    run_id: 'r1',
    after_seq: -1
  }),
  invalid('Handoff', 'another protocol version', {
    // @ts-expect-error -- version 1 only
    version: 2,
    prompt: 'p',
    options: {},
    cell_id: 'c',
    nonce: '0000000000000000',
    jupyter_ci_version: '9',
    session_options: {},
    regenerate: false,
    kernel_session: 's'
  }),
  invalid('Handoff', 'a short nonce', {
    version: 1,
    prompt: 'p',
    options: {},
    cell_id: 'c',
    nonce: 'abc',
    jupyter_ci_version: '9',
    session_options: {},
    regenerate: false,
    kernel_session: 's'
  }),
  invalid('CellInfo', 'an unknown cell type', {
    id: 'c1',
    // @ts-expect-error -- code, markdown or raw
    cell_type: 'sql',
    source: ''
  }),
  // @ts-expect-error -- cost is required (it may be null)
  invalid('Usage', 'usage without cost', {
    prompt_tokens: 1,
    completion_tokens: 1
  })
];
