"""The names and small records that the protocol's messages share (see
:mod:`jupyter_ci.protocol`)."""

# No `from __future__ import annotations`: TypedDict reads NotRequired[...] at class creation.

from typing import Any, Literal

from typing_extensions import NotRequired, TypedDict

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
