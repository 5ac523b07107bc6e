"""Calls: what the server asks of the tab that owns a run, and the tab's replies (see
:mod:`jupyter_ci.protocol`)."""

# No `from __future__ import annotations`: TypedDict reads NotRequired[...] at class creation.

from typing import Any, Literal

from typing_extensions import NotRequired, TypedDict

from .records import CellInfo, ErrorInfo, ReplyStatusName


class CallBase(TypedDict):
    """Fields every call carries: it names the notebook, never "the active one"."""

    call_id: str
    run_id: str
    notebook_path: str


class ReadCellsCall(CallBase):
    """Read all cells (code cells without their outputs when ``outputs`` is False)."""

    method: Literal["read_cells"]
    outputs: NotRequired[bool]


class InsertCellCall(CallBase):
    """Insert a code cell after a cell id."""

    method: Literal["insert_cell"]
    after_id: str | None
    source: str
    metadata: dict[str, Any]
    cell_type: NotRequired[Literal["code", "markdown", "raw"]]


class RestoredCell(TypedDict):
    """A cell of a run, as the run wrote it (for ``restore_cells``)."""

    cell_id: str
    after_id: str | None
    source: str
    metadata: dict[str, Any]
    cell_type: NotRequired[Literal["markdown", "raw"]]


class RestoreCellsCall(CallBase):
    """After a reload: put back the run's cells the notebook lacks."""

    method: Literal["restore_cells"]
    cells: list[RestoredCell]
    streaming_cell_id: str | None


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
    undoable: NotRequired[bool]


class DeleteCellCall(CallBase):
    """Delete an unedited generated cell (an earlier answer replaced; begun, but empty, at
    Stop)."""

    method: Literal["delete_cell"]
    cell_id: str


class RunCellCall(CallBase):
    """Run a cell in the notebook's kernel (and ``expression`` with it, when given)."""

    method: Literal["run_cell"]
    cell_id: str
    expression: NotRequired[str]


class EvaluateCall(CallBase):
    """Evaluate jupyter-ci's inspection expression in the kernel; the reply's ``text`` is JSON."""

    method: Literal["evaluate"]
    expression: str


class InterruptCall(CallBase):
    """Interrupt the notebook's kernel."""

    method: Literal["interrupt"]


class RunOptionsCall(CallBase):
    """The user's run options in the tab (their JupyterLab settings for jupyter-ci)."""

    method: Literal["run_options"]


class SaveCall(CallBase):
    """Save the notebook, as the user's Save does."""

    method: Literal["save"]


class ShowOutputsCall(CallBase):
    """After a reload: show a running cell's outputs as the server heard them."""

    method: Literal["show_outputs"]
    cell_id: str
    outputs: list[dict[str, Any]]
    execution_count: int | None
    running: bool


Call = (
    ReadCellsCall
    | InsertCellCall
    | AppendSourceCall
    | ReplaceSourceCall
    | DeleteCellCall
    | RunCellCall
    | EvaluateCall
    | InterruptCall
    | RunOptionsCall
    | SaveCall
    | RestoreCellsCall
    | ShowOutputsCall
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
    restored: NotRequired[list[str]]
    text: NotRequired[str]
    options: NotRequired[dict[str, Any]]


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
    msg_id: NotRequired[str]


CallReply = CallResult | CallFailure
