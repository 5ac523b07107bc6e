"""Python types of jupyter-ci's protocol, and validation against its JSON Schema.

The schema (``jupyter_ci/schema/protocol.schema.json``) is the source of truth. The TypedDicts here
mirror its definitions one to one (``tests/test_protocol.py`` fails when they drift apart); the
TypeScript types in ``labextension/src/protocol.ts`` are generated from the same file.
"""

# No `from __future__ import annotations`: TypedDict reads NotRequired[...] at class creation.

import json
from functools import cache
from importlib import resources
from typing import Any, Literal

from typing_extensions import NotRequired, TypedDict

from .vocabulary import constant

PROTOCOL_VERSION: int = constant("ProtocolVersion")
#: The mime type of the ``%%ci`` handoff output.
HANDOFF_MIME: str = constant("HandoffMime")

RunStateName = Literal[
    "queued", "generating", "awaiting_approval", "executing", "fixing", "done", "failed", "stopped"
]
CellStatusName = Literal[
    "ok",
    "error",
    "timed_out",
    "interrupted",
    "aborted",
    "kernel_died",
    "kernel_shutdown",
    "kernel_restarted",
]
TerminalRunStateName = Literal["done", "failed", "stopped"]
ReplyStatusName = Literal["ok", "error", "aborted"]


class ErrorInfo(TypedDict):
    """An error as users and programs see it."""

    code: str
    message: str
    hint: NotRequired[str]


class Usage(TypedDict):
    """Tokens and cost so far; ``cost`` is None when the price is unknown."""

    prompt_tokens: int
    completion_tokens: int
    cost: float | None


class CellInfo(TypedDict):
    """A notebook cell as read from the browser."""

    id: str
    cell_type: Literal["code", "markdown", "raw"]
    source: str
    outputs: NotRequired[list[dict[str, Any]]]
    execution_count: NotRequired[int | None]
    metadata: NotRequired[dict[str, Any]]


class VariableInfo(TypedDict):
    """A variable in the kernel, summarised cheaply."""

    name: str
    type: str
    summary: NotRequired[str]
    shape: NotRequired[list[int] | None]
    columns: NotRequired[list[str] | None]
    dtypes: NotRequired[list[str] | None]


class RunSummary(TypedDict):
    """The numbers of a finished run's status line."""

    cells: int
    attempts: int
    usage: Usage
    seconds: float


# --- run events (server → clients) -------------------------------------------------------------


class EventBase(TypedDict):
    """Fields every run event carries."""

    run_id: str
    seq: int
    time: float


class StateEvent(EventBase):
    """The run changed state; ``text`` is its status line (composed by the server)."""

    type: Literal["state"]
    state: RunStateName
    reason: str
    text: str


class TokenEvent(EventBase):
    """Text streamed from the model."""

    type: Literal["token"]
    text: str
    cell_id: str | None
    part: Literal["prose", "code"]


class CellInsertedEvent(EventBase):
    """A generated cell was inserted."""

    type: Literal["cell_inserted"]
    cell_id: str
    after_id: str | None
    source: str
    step: int


class CellUpdatedEvent(EventBase):
    """A generated cell's source changed (``cause`` says why); ``diff`` from the one before."""

    type: Literal["cell_updated"]
    cell_id: str
    source: str
    diff: str
    attempt: int
    cause: Literal["streamed", "fix", "edited", "reproposed", "stopped"]


class CellDeletedEvent(EventBase):
    """A cell the run had inserted is gone again (begun, but empty, at Stop)."""

    type: Literal["cell_deleted"]
    cell_id: str


class ExecutionStartedEvent(EventBase):
    """A cell began running."""

    type: Literal["execution_started"]
    cell_id: str
    attempt: int


class ExecutionFinishedEvent(EventBase):
    """A cell finished running."""

    type: Literal["execution_finished"]
    cell_id: str
    status: CellStatusName
    execution_count: int | None
    digest: str
    duration: float | None


class AttemptEvent(EventBase):
    """A new try of a cell begins."""

    type: Literal["attempt"]
    cell_id: str
    attempt: int
    max_attempts: int


class MessageEvent(EventBase):
    """A complete conversation message."""

    type: Literal["message"]
    role: Literal["user", "assistant", "notice"]
    text: str


class UsageEvent(EventBase):
    """Tokens and cost so far."""

    type: Literal["usage"]
    usage: Usage


class ChangedFile(TypedDict):
    """A file a run's cells created or changed."""

    path: str
    change: Literal["created", "modified"]
    size: int


class FilesEvent(EventBase):
    """The files the run's cells created or changed so far."""

    type: Literal["files"]
    files: list[ChangedFile]


class FinishedEvent(EventBase):
    """The run is over."""

    type: Literal["finished"]
    state: TerminalRunStateName
    reason: str
    error: ErrorInfo | None
    summary: RunSummary
    answer: str
    text: str


RunEvent = (
    StateEvent
    | TokenEvent
    | CellInsertedEvent
    | CellUpdatedEvent
    | CellDeletedEvent
    | ExecutionStartedEvent
    | ExecutionFinishedEvent
    | AttemptEvent
    | MessageEvent
    | UsageEvent
    | FilesEvent
    | FinishedEvent
)


# --- calls (server → the browser that owns the run) and replies -------------------------------


class CallBase(TypedDict):
    """Fields every call carries: it names the notebook, never "the active one"."""

    call_id: str
    run_id: str
    notebook_path: str


class ReadCellsCall(CallBase):
    """Read all cells."""

    method: Literal["read_cells"]


class InsertCellCall(CallBase):
    """Insert a code cell after a cell id."""

    method: Literal["insert_cell"]
    after_id: str | None
    source: str
    metadata: dict[str, Any]


class AppendSourceCall(CallBase):
    """Append streamed text to a cell."""

    method: Literal["append_source"]
    cell_id: str
    text: str


class ReplaceSourceCall(CallBase):
    """Replace a cell's source."""

    method: Literal["replace_source"]
    cell_id: str
    source: str


class DeleteCellCall(CallBase):
    """Delete an unedited generated cell (``--regenerate``)."""

    method: Literal["delete_cell"]
    cell_id: str


class RunCellCall(CallBase):
    """Run a cell in the notebook's kernel."""

    method: Literal["run_cell"]
    cell_id: str


class EvaluateCall(CallBase):
    """Evaluate jupyter-ci's inspection expression in the kernel; the reply's ``text`` is JSON."""

    method: Literal["evaluate"]
    expression: str


class InterruptCall(CallBase):
    """Interrupt the notebook's kernel."""

    method: Literal["interrupt"]


Call = (
    ReadCellsCall
    | InsertCellCall
    | AppendSourceCall
    | ReplaceSourceCall
    | DeleteCellCall
    | RunCellCall
    | EvaluateCall
    | InterruptCall
)


class CallResult(TypedDict):
    """A successful reply; which fields are set depends on the call's method."""

    call_id: str
    ok: Literal[True]
    cell_id: NotRequired[str]
    cells: NotRequired[list[CellInfo]]
    reply_status: NotRequired[ReplyStatusName | None]
    outputs: NotRequired[list[dict[str, Any]]]
    execution_count: NotRequired[int | None]
    started_at: NotRequired[float | None]
    truncated: NotRequired[bool]
    text: NotRequired[str]


class CallFailure(TypedDict):
    """The browser could not do what the call asked."""

    call_id: str
    ok: Literal[False]
    error: ErrorInfo


class CallProgress(TypedDict):
    """The kernel began the cell of a ``run_cell`` call."""

    call_id: str
    progress: Literal["started"]
    started_at: float


# --- client requests (browser → server) --------------------------------------------------------


class HelloRequest(TypedDict):
    """The first message of a connection: the tab's id and the notebooks it has open."""

    request: Literal["hello"]
    request_id: NotRequired[str]
    client_id: str
    protocol_version: Literal[1]
    notebook_paths: list[str]
    client_secret: NotRequired[str]


class SubscribeRequest(TypedDict):
    """The notebooks the tab has open now (it receives their runs' events)."""

    request: Literal["subscribe"]
    request_id: NotRequired[str]
    notebook_paths: list[str]


class StartRunRequest(TypedDict):
    """Start a run."""

    request: Literal["start_run"]
    request_id: NotRequired[str]
    notebook_path: str
    kernel_id: str
    prompt: str
    options: dict[str, Any]
    anchor_cell_id: str | None
    handoff_nonce: str | None
    origin: NotRequired[Literal["panel", "magic"]]
    regenerate: NotRequired[bool]
    session_options: NotRequired[dict[str, Any]]
    user_options: NotRequired[dict[str, Any]]
    fix_cell_id: NotRequired[str | None]
    attachments: NotRequired[list[str]]
    attached_cell_ids: NotRequired[list[str]]


class StopRunRequest(TypedDict):
    """Stop a run."""

    request: Literal["stop_run"]
    request_id: NotRequired[str]
    run_id: str


class ReviewRequest(TypedDict):
    """Answer a cell awaiting approval."""

    request: Literal["review"]
    request_id: NotRequired[str]
    run_id: str
    cell_id: str
    decision: Literal["run", "reject", "ran"]
    source: str | None


class ReplayRequest(TypedDict):
    """Ask for a run's events after a sequence number."""

    request: Literal["replay"]
    request_id: NotRequired[str]
    run_id: str
    after_seq: int


class PreviewRequest(TypedDict):
    """What a request would send to the model, without sending it."""

    request: Literal["preview"]
    request_id: NotRequired[str]
    notebook_path: str
    kernel_id: str
    prompt: str
    options: dict[str, Any]
    anchor_cell_id: str | None
    fix_cell_id: NotRequired[str | None]
    attachments: NotRequired[list[str]]
    attached_cell_ids: NotRequired[list[str]]
    session_options: NotRequired[dict[str, Any]]
    user_options: NotRequired[dict[str, Any]]


class ExpectHandoffRequest(TypedDict):
    """The tab scheduled this ``%%ci`` cell (for a server-side executor's request)."""

    request: Literal["expect_handoff"]
    request_id: NotRequired[str]
    notebook_path: str
    kernel_id: str
    cell_id: str
    code: str


# --- replies and notices (server → clients) ----------------------------------------------------


class RunInfo(TypedDict):
    """A run the server knows of (active or queued), as every tab sees it."""

    run_id: str
    notebook_path: str
    kernel_id: str
    owner: str
    origin: Literal["panel", "magic"]
    state: RunStateName
    prompt: str
    anchor_cell_id: str | None
    position: int
    last_seq: int


class PreviewMessage(TypedDict):
    """One message of a preview."""

    role: str
    content: str


class Preview(TypedDict):
    """The messages a request would send and their token count."""

    model: str
    messages: list[PreviewMessage]
    prompt_tokens: int
    context_tokens: int


class RequestAccepted(TypedDict):
    """The server did what a client request asked."""

    reply_to: str
    ok: Literal[True]
    run_id: NotRequired[str]
    position: NotRequired[int]
    runs: NotRequired[list[RunInfo]]
    server_version: NotRequired[str]
    client_secret: NotRequired[str]
    note: NotRequired[str]
    preview: NotRequired[Preview]
    expected: NotRequired[bool]


class RequestRefused(TypedDict):
    """The server refused a client request, saying why."""

    reply_to: str
    ok: Literal[False]
    error: ErrorInfo
    run_id: NotRequired[str]


class RunsNotice(TypedDict):
    """The runs now active or queued (sent to every tab when they change)."""

    notice: Literal["runs"]
    runs: list[RunInfo]


class ErrorNotice(TypedDict):
    """A client message could not be handled; the connection stays open."""

    notice: Literal["error"]
    error: ErrorInfo


CallReply = CallResult | CallFailure
ClientRequest = (
    HelloRequest
    | SubscribeRequest
    | StartRunRequest
    | StopRunRequest
    | ReviewRequest
    | ReplayRequest
    | PreviewRequest
    | ExpectHandoffRequest
)
RequestReply = RequestAccepted | RequestRefused
Notice = RunsNotice | ErrorNotice
#: Anything the server sends on the websocket (schema: ServerMessage).
ServerMessage = RunEvent | Call | RequestReply | Notice
#: Anything a tab sends on the websocket (schema: ClientMessage).
ClientMessage = ClientRequest | CallReply | CallProgress


class Handoff(TypedDict):
    """The ``%%ci`` handoff payload (:data:`HANDOFF_MIME`)."""

    version: Literal[1]
    prompt: str
    options: dict[str, Any]
    cell_id: str
    nonce: str
    jupyter_ci_version: str
    session_options: dict[str, Any]
    regenerate: bool
    kernel_session: str


#: Each TypedDict above, by the name of its definition in the schema.
TYPES: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        ErrorInfo,
        Usage,
        CellInfo,
        VariableInfo,
        RunSummary,
        EventBase,
        StateEvent,
        TokenEvent,
        CellInsertedEvent,
        CellUpdatedEvent,
        ExecutionStartedEvent,
        ExecutionFinishedEvent,
        AttemptEvent,
        MessageEvent,
        UsageEvent,
        ChangedFile,
        FilesEvent,
        CellDeletedEvent,
        FinishedEvent,
        CallBase,
        ReadCellsCall,
        InsertCellCall,
        AppendSourceCall,
        ReplaceSourceCall,
        DeleteCellCall,
        RunCellCall,
        EvaluateCall,
        InterruptCall,
        CallResult,
        CallFailure,
        CallProgress,
        HelloRequest,
        SubscribeRequest,
        StartRunRequest,
        StopRunRequest,
        ReviewRequest,
        ReplayRequest,
        PreviewRequest,
        ExpectHandoffRequest,
        RunInfo,
        Preview,
        RequestAccepted,
        RequestRefused,
        RunsNotice,
        ErrorNotice,
        Handoff,
    )
}


@cache
def schema() -> dict[str, Any]:
    """The protocol's JSON Schema, as shipped in the package."""
    text = resources.files("jupyter_ci").joinpath("schema/protocol.schema.json").read_text()
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def validate(definition: str, message: Any) -> None:
    """Check ``message`` against the schema's ``definition``; ``ValueError`` says what is wrong.

    Used at the edges (websocket, handoff); jsonschema is imported only here.
    """
    import jsonschema

    validator = _validator(definition)
    error = jsonschema.exceptions.best_match(validator.iter_errors(message))
    if error is not None:
        where = "/".join(str(part) for part in error.absolute_path) or "the message"
        raise ValueError(f"invalid {definition}: {where}: {error.message}")


@cache
def _validator(definition: str) -> Any:
    """A validator for one definition, made once (making one costs far more than using it)."""
    import jsonschema

    root = schema()
    if definition not in root["$defs"]:
        raise KeyError(f"no definition {definition!r} in the protocol schema")
    return jsonschema.Draft202012Validator({"$ref": f"#/$defs/{definition}", **root})
