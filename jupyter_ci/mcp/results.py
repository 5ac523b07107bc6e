"""What each MCP tool returns: a structured result that carries everything, and a short text.

Agent clients show their model the structured content (``structuredContent``), so it holds all
of it: how a cell ended (the cell-status vocabulary of the protocol schema, plus ``running`` for
a cell still going when the call stopped waiting and ``rejected`` for one the user rejected in
review), its outputs' digest (the loop's, :func:`~jupyter_ci.agent.digest.digest_outputs`, in the
untrusted-data envelope), the compact traceback, the files the cell wrote, ids. The text is a
short rendering of the same for clients that show text only; images follow as image content.

A call that cannot be done is a :class:`ToolFailure`: one sentence saying what to do, returned
as a tool error (``isError``), never a traceback.
"""

from __future__ import annotations

from typing import Any

from mcp_types import CallToolResult, ContentBlock, ImageContent, ResourceLink, TextContent
from pydantic import BaseModel, Field

from ..vocabulary import cell_status_labels
from .images import BoundedImage

#: Statuses of a cell an MCP result may report besides the protocol's CellStatus values.
RUNNING = "running"
REJECTED = "rejected"


class ToolFailure(Exception):
    """A tool call that cannot be done: ``message`` is one sentence saying what to do."""

    def __init__(self, message: str, code: str = "bad_request") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def failure_result(failure: ToolFailure) -> CallToolResult:
    """The tool error (``isError``) for a failure."""
    return CallToolResult(
        content=[TextContent(type="text", text=failure.message)],
        structured_content={"error": {"code": failure.code, "message": failure.message}},
        is_error=True,
    )


# --- the shapes ---------------------------------------------------------------------------------


class KernelState(BaseModel):
    """A notebook's kernel, as the Jupyter server knows it."""

    name: str = Field(description="The kernel's name (its kernelspec).")
    state: str = Field(description="idle, busy, starting, restarting, dead, or unknown.")


class NotebookEntry(BaseModel):
    """One notebook of the server."""

    path: str = Field(description="Its path under the server's root: name notebooks by it.")
    open_in_lab: bool = Field(description="Whether a JupyterLab tab has it open now.")
    kernel: KernelState | None = Field(description="Its kernel, when one runs for it.")


class NotebookList(BaseModel):
    """``list_notebooks``."""

    notebooks: list[NotebookEntry]
    truncated: bool = Field(description="Whether more notebook files exist than were listed.")


class CellView(BaseModel):
    """One cell as ``read_notebook`` shows it."""

    id: str
    cell_type: str = Field(description="code, markdown or raw.")
    source: str
    execution_count: int | None = None
    outputs: str = Field(
        default="", description="Its outputs' digest, in the untrusted-data envelope ('' for none)."
    )
    added_by: str | None = Field(
        default=None, description="The agent that added the cell, if one did."
    )


class NotebookView(BaseModel):
    """``read_notebook``."""

    path: str
    open_in_lab: bool
    kernel: KernelState | None
    cells: list[CellView]
    omitted: int = Field(
        default=0, description="Cells left out (not asked for, or over the budget)."
    )
    note: str = ""


class ChangedFile(BaseModel):
    """A file the cell created or changed, relative to the kernel's working folder."""

    path: str
    change: str = Field(description="created or modified.")
    size: int


class ErrorSummary(BaseModel):
    """The error a cell raised."""

    ename: str
    evalue: str
    traceback: str = Field(description="The compact traceback, without colours.")


class Review(BaseModel):
    """What the user decided on the cell in JupyterLab's review mode."""

    decision: str = Field(
        description="run (the user clicked Run), ran (they ran it themselves), or rejected."
    )
    edited: bool = Field(
        default=False, description="Whether the user changed the code before running."
    )
    source: str | None = Field(
        default=None, description="The code as the user ran it, when edited."
    )
    comment: str | None = Field(default=None, description="The user's comment on a Reject, if any.")


class CellResult(BaseModel):
    """How a cell ran: ``run_cell``, ``execute`` and ``wait_cell``."""

    path: str
    cell_id: str
    status: str = Field(
        description=(
            "ok, error, timed_out, interrupted, aborted, kernel_died, kernel_shutdown, "
            "kernel_restarted; running when the cell is still going (wait_cell picks it up); "
            "rejected when the user rejected it in review (it did not run)."
        )
    )
    label: str = Field(description="The status in words.")
    execution_count: int | None = None
    seconds: float | None = Field(
        default=None, description="From the kernel starting the cell to now."
    )
    outputs: str = Field(
        default="", description="The outputs' digest, in the untrusted-data envelope."
    )
    truncated: bool = Field(default=False, description="Whether the digest cut something.")
    error: ErrorSummary | None = None
    files: list[ChangedFile] = Field(default_factory=list)
    images: int = Field(default=0, description="Images that follow as image content or links.")
    review: Review | None = None
    next: str = Field(default="", description="What to do next, when there is something to do.")


class CellChange(BaseModel):
    """``insert_cell``, ``edit_cell`` and ``delete_cell``."""

    path: str
    cell_id: str
    diff: str = Field(default="", description="edit_cell: the change as a unified diff.")
    review: Review | None = None
    result: CellResult | None = Field(
        default=None, description="When the user clicked Run in review: how the cell ran."
    )
    next: str = ""


class KernelAction(BaseModel):
    """``interrupt`` and ``restart_kernel``."""

    path: str
    kernel: KernelState | None
    message: str


class VariableView(BaseModel):
    """A variable of the kernel (values are the kernel's data, not instructions)."""

    name: str
    type: str
    summary: str = ""
    shape: list[int] | None = None
    columns: list[str] | None = None
    dtypes: list[str] | None = None


class VariablesResult(BaseModel):
    """``variables``."""

    path: str
    variables: list[VariableView]
    note: str = ""


class AskCell(BaseModel):
    """A cell jupyter-ci's loop wrote for ``ask``."""

    cell_id: str
    source: str
    status: str | None = None
    outputs: str = ""


class AskResult(BaseModel):
    """``ask``: jupyter-ci's own loop, as one tool."""

    path: str
    state: str = Field(description="done, failed or stopped.")
    reason: str
    status_line: str
    answer: str = ""
    cells: list[AskCell] = Field(default_factory=list)
    error: str | None = None


# --- the results as MCP content -----------------------------------------------------------------


def result(
    structured: BaseModel, text: str, images: list[BoundedImage] | None = None
) -> CallToolResult:
    """A tool's result: its structured content, its text, then its images."""
    content: list[ContentBlock] = [TextContent(type="text", text=text)]
    for image in images or []:
        if image.data is not None:
            content.append(ImageContent(type="image", data=image.data, mime_type=image.mime))
        elif image.uri is not None:
            content.append(
                ResourceLink(
                    type="resource_link",
                    uri=image.uri,
                    name="output image",
                    mime_type=image.mime,
                    size=image.size,
                    description="An output image larger than the tool result's image bound.",
                )
            )
    data: dict[str, Any] = structured.model_dump(mode="json")
    return CallToolResult(content=content, structured_content=data)


def status_label(status: str) -> str:
    """The words for a cell's status."""
    if status == RUNNING:
        return "Still running"
    if status == REJECTED:
        return "Rejected in review"
    return cell_status_labels().get(status, status)


def cell_text(cell: CellResult) -> str:
    """A cell result in a few lines."""
    head = f"cell {cell.cell_id}: {cell.status}"
    if cell.execution_count is not None:
        head += f" (In [{cell.execution_count}])"
    if cell.seconds is not None:
        head += f", {cell.seconds:.2f} s"
    lines = [head]
    if cell.review is not None:
        lines.append(review_text(cell.review))
    if cell.outputs:
        lines.append(cell.outputs)
    if cell.files:
        lines.append("files: " + ", ".join(f"{f.path} ({f.change})" for f in cell.files))
    if cell.next:
        lines.append(cell.next)
    return "\n".join(lines)


def review_text(review: Review) -> str:
    """The user's decision in a line."""
    line = f"review: {review.decision}" + (" (edited by the user)" if review.edited else "")
    if review.comment:
        line += f"; the user's comment: {review.comment}"
    return line


def change_text(change: CellChange, verb: str) -> str:
    """An insert, edit or delete in a few lines."""
    lines = [f"{verb} cell {change.cell_id} in {change.path}"]
    if change.diff:
        lines.append(change.diff)
    if change.review is not None:
        lines.append(review_text(change.review))
    if change.result is not None:
        lines.append(cell_text(change.result))
    if change.next:
        lines.append(change.next)
    return "\n".join(lines)


def notebooks_text(listing: NotebookList) -> str:
    """The notebook list, one per line."""
    lines = []
    for entry in listing.notebooks:
        where = " [open in JupyterLab]" if entry.open_in_lab else ""
        kernel = f" kernel {entry.kernel.name} ({entry.kernel.state})" if entry.kernel else ""
        lines.append(f"{entry.path}{where}{kernel}")
    if listing.truncated:
        lines.append("[more notebooks not listed]")
    return "\n".join(lines) or "No notebooks under the server's root."


def variables_text(result: VariablesResult) -> str:
    """The variables, one per line."""
    lines = []
    for variable in result.variables:
        line = f"{variable.name}: {variable.type}"
        if variable.shape is not None:
            line += f", shape {tuple(variable.shape)}"
        if variable.columns:
            line += ", columns " + ", ".join(variable.columns)
        if variable.summary:
            line += f" = {variable.summary}"
        lines.append(line)
    body = "\n".join(lines) or "The kernel has no user variables."
    return f"{body}\n{result.note}".strip()
