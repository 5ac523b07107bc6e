"""What a tab asks of the server, what the server answers and tells every tab, and the ``%%ci``
handoff payload (see :mod:`jupyter_ci.protocol`)."""

# No `from __future__ import annotations`: TypedDict reads NotRequired[...] at class creation.

from typing import Any, Literal

from typing_extensions import NotRequired, TypedDict

from .records import ErrorInfo, RunStateName


class HelloRequest(TypedDict):
    """The first message of a connection: the tab's id and the notebooks it has open."""

    request: Literal["hello"]
    request_id: NotRequired[str]
    client_id: str
    protocol_version: Literal[1]
    notebook_paths: list[str]
    client_secret: NotRequired[str]
    page_start: NotRequired[bool]


class SubscribeRequest(TypedDict):
    """The notebooks the tab has open now (it receives their runs' events)."""

    request: Literal["subscribe"]
    request_id: NotRequired[str]
    notebook_paths: list[str]


class RunRequestBase(TypedDict):
    """What a request for a run says, the same in start_run and preview."""

    request_id: NotRequired[str]
    notebook_path: str
    kernel_id: str
    options: dict[str, Any]
    anchor_cell_id: str | None
    session_options: NotRequired[dict[str, Any]]
    user_options: NotRequired[dict[str, Any]]
    fix_cell_id: NotRequired[str | None]
    attachments: NotRequired[list[str]]
    attached_cell_ids: NotRequired[list[str]]


class StartRunRequest(RunRequestBase):
    """Start a run."""

    request: Literal["start_run"]
    prompt: str
    handoff_nonce: str | None
    handoff_request_id: NotRequired[str | None]
    origin: NotRequired[Literal["panel", "magic"]]
    regenerate: NotRequired[bool]


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
    comment: NotRequired[str | None]


class ReplayRequest(TypedDict):
    """Ask for a run's events after a sequence number."""

    request: Literal["replay"]
    request_id: NotRequired[str]
    run_id: str
    after_seq: int


class PreviewRequest(RunRequestBase):
    """What a request would send to the model, without sending it."""

    request: Literal["preview"]
    prompt: str


class ExpectHandoffRequest(TypedDict):
    """The tab scheduled this ``%%ci`` cell (for a server-side executor's request)."""

    request: Literal["expect_handoff"]
    request_id: NotRequired[str]
    notebook_path: str
    kernel_id: str
    cell_id: str
    code: str


class RunInfo(TypedDict):
    """A run the server knows of (active or queued), as every tab sees it."""

    run_id: str
    notebook_path: str
    kernel_id: str
    owner: str
    origin: Literal["panel", "magic", "mcp"]
    agent: NotRequired[str]
    state: RunStateName
    prompt: str
    anchor_cell_id: str | None
    position: int
    last_seq: int


class PreviewMessage(TypedDict):
    """One message of a preview."""

    role: str
    content: str
    tokens: int


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
    status_line: NotRequired[str]
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
