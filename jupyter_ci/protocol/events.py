"""Run events: what the server tells every tab about a run (see :mod:`jupyter_ci.protocol`)."""

# No `from __future__ import annotations`: TypedDict reads NotRequired[...] at class creation.

from typing import Literal

from typing_extensions import NotRequired, TypedDict

from .records import (
    CellStatusName,
    ErrorInfo,
    RunStateName,
    RunSummary,
    TerminalRunStateName,
    Usage,
)


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
    attempt: NotRequired[int | None]
    max_attempts: NotRequired[int | None]


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
    cause: Literal[
        "streamed",
        "fix",
        "own_fix",
        "edited",
        "reproposed",
        "stopped",
        "restored",
        "kept",
        "agent",
    ]


class CellDeletedEvent(EventBase):
    """A generated cell the run deleted (begun, but empty, at Stop; or an unedited cell of the
    ``%%ci``'s earlier answer its first new cell replaces)."""

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
