"""What each MCP tool does: checks, the call's run, and its result.

Each method is one tool, given its checked arguments and the caller (:class:`Caller`: the agent's
name from the MCP client's ``clientInfo`` and its session). Bad input is a
:class:`~jupyter_ci.mcp.results.ToolFailure` (one sentence saying what to do); what the loop's
workspaces raise (:class:`~jupyter_ci.errors.JupyterCIError`) says it too, through
:func:`failure_of`.

Cells run without a timeout of their own: ``timeout`` is how long the call waits. When it passes
the cell keeps running (long training is not killed by a client's patience) and the result says
``running``; ``wait_cell`` picks it up. With ``interrupt_on_timeout`` the timeout is the cell's
(counted from its start in the kernel, as the loop counts it) and the cell ends ``timed_out``.
While a call waits it sends a progress notification at least every second.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..agent.digest import digest_error, digest_outputs, new_nonce, wrap_untrusted
from ..agent.workspace import Cell
from ..errors import JupyterCIError
from ..server.store.records import source_hash
from .activity import CallOutcome, McpRun
from .images import MAX_IMAGES, BoundedImage, ImageStore, bound_image
from .notebooks import Notebooks
from .results import (
    RUNNING,
    CellChange,
    CellResult,
    ChangedFile,
    ErrorSummary,
    Review,
    ToolFailure,
    status_label,
)

#: The longest source a tool takes for one cell (characters).
MAX_SOURCE_CHARS = 100_000
#: Characters of a run result's outputs digest.
DIGEST_CHARS = 6000
#: Seconds between progress notifications while a call waits (at least one a second).
PROGRESS_EVERY = 0.5

#: Sends one progress notification: seconds waited so far, and what is going on.
ReportProgress = Callable[[float, str], Awaitable[None]]


@dataclass(frozen=True)
class Caller:
    """Who calls: the agent's name (the MCP client's), its session, and how to tell progress."""

    agent: str
    session: str
    progress: ReportProgress


def failure_of(error: JupyterCIError) -> ToolFailure:
    """The tool error for something a workspace or the run manager refused."""
    return ToolFailure(str(error), code=str(error.to_dict().get("code", "error")))


def check_source(source: str, what: str = "source") -> None:
    """Refuse a cell source over :data:`MAX_SOURCE_CHARS`."""
    if len(source) > MAX_SOURCE_CHARS:
        raise ToolFailure(
            f"The {what} is {len(source):,} characters long and a cell takes at most "
            f"{MAX_SOURCE_CHARS:,}: split it into several cells, or read the data from a file."
        )


def find(cells: list[Cell], path: str, cell_id: str) -> Cell:
    """The cell, or the tool error saying there is none."""
    for cell in cells:
        if cell.id == cell_id:
            return cell
    raise ToolFailure(
        f"There is no cell {cell_id!r} in {path}; read_notebook lists its cells with their ids.",
        code="cell_not_found",
    )


async def wait_reporting(
    future: asyncio.Future[Any], timeout: float, caller: Caller, describe: Callable[[], str]
) -> bool:
    """Wait up to ``timeout`` seconds for ``future``, telling progress every
    :data:`PROGRESS_EVERY` seconds meanwhile; returns whether it is done. Never cancels it."""
    start = time.monotonic()
    deadline = start + timeout
    reporting = True
    while not future.done():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        await asyncio.wait({future}, timeout=min(PROGRESS_EVERY, remaining))
        if future.done() or not reporting:
            continue
        try:
            await caller.progress(time.monotonic() - start, describe())
        except Exception:  # the client went away: the call's end will say so, not this
            reporting = False
    return future.done()


class CellResults:
    """Turns how a cell ran into a tool's result, its images bounded."""

    def __init__(self, images: ImageStore) -> None:
        self.images = images

    def of(self, path: str, outcome: CallOutcome) -> tuple[CellResult, list[BoundedImage]]:
        """The result of a call whose cell ended (or was rejected in review)."""
        review = _review_of(outcome)
        execution = outcome.execution
        if execution is None:
            return (
                CellResult(
                    path=path,
                    cell_id=outcome.cell_id,
                    status="rejected",
                    label=status_label("rejected"),
                    review=review,
                    next=(
                        "The user rejected the cell in review and it did not run: propose "
                        "another version with edit_cell (then run_cell), or delete_cell it."
                    ),
                ),
                [],
            )
        digest = digest_outputs(
            execution.outputs,
            max_chars=DIGEST_CHARS,
            vision=True,
            max_images=MAX_IMAGES,
            max_image_bytes=1 << 40,  # every image is bounded below instead (downscaled)
        )
        images = [
            bounded
            for part in digest.images
            if (bounded := bound_image(part.mime, part.data, self.images)) is not None
        ]
        outputs = (
            wrap_untrusted(digest.text, new_nonce(), "kernel output") if execution.outputs else ""
        )
        error = execution.error
        summary = None
        if error is not None:
            traceback = error.get("traceback")
            text, _ = digest_error(
                str(error.get("ename", "Error")),
                str(error.get("evalue", "")),
                [str(line) for line in traceback] if isinstance(traceback, list) else [],
            )
            summary = ErrorSummary(
                ename=str(error.get("ename", "Error")),
                evalue=str(error.get("evalue", "")),
                traceback=text,
            )
        status = execution.status.value
        return (
            CellResult(
                path=path,
                cell_id=outcome.cell_id,
                status=status,
                label=status_label(status),
                execution_count=execution.execution_count,
                seconds=round(execution.duration, 3) if execution.duration is not None else None,
                outputs=outputs,
                truncated=digest.truncated,
                error=summary,
                files=[ChangedFile(**entry) for entry in outcome.files],
                images=len(images),
                review=review,
                next=_next_step(status),
            ),
            images,
        )

    @staticmethod
    def running(path: str, run: McpRun) -> CellResult:
        """The result of a call that stopped waiting while its cell goes on."""
        cell_id = run.cell_id or ""
        seconds = None if run.began is None else round(time.monotonic() - run.began, 3)
        return CellResult(
            path=path,
            cell_id=cell_id,
            status=RUNNING,
            label=status_label(RUNNING),
            seconds=seconds,
            next=(
                f"The cell is still going ({run.activity}); it was not interrupted. Call "
                f"wait_cell(path, cell_id={cell_id!r}) to wait for its end, or interrupt(path) "
                "to stop it."
            ),
        )


def _review_of(outcome: CallOutcome) -> Review | None:
    if outcome.decision is None:
        return None
    return Review(
        decision=outcome.decision,
        edited=outcome.edited_source is not None,
        source=outcome.edited_source,
        comment=outcome.comment,
    )


def _next_step(status: str) -> str:
    if status == "error":
        return "The cell raised: fix it with edit_cell, then run_cell it again."
    if status == "timed_out":
        return "The cell ran past the timeout and was interrupted (interrupt_on_timeout)."
    if status in ("kernel_died", "kernel_restarted", "kernel_shutdown"):
        return "The kernel's variables are gone: run the cells you need again."
    return ""


class CellChanges:
    """The checks of an agent's insert, edit and delete, and what they return."""

    def __init__(self, notebooks: Notebooks) -> None:
        self.notebooks = notebooks

    def may_delete(self, path: str, cell: Cell, agent: str) -> None:
        """Refuse unless the agent inserted the cell and nobody changed it since."""
        author = self.notebooks.author_of(path, cell.id)
        if author is None or author[0] != agent:
            raise ToolFailure(
                f"Cell {cell.id} was not inserted by {agent}, so it was not deleted: an agent "
                "may delete only the cells it inserted (ask the user to delete this one).",
                code="not_yours",
            )
        if author[1] != source_hash(cell.source):
            raise ToolFailure(
                f"Cell {cell.id} was changed since {agent} wrote it, so it was not deleted "
                "(nothing of the user's is lost); ask the user whether to delete it.",
                code="changed_since",
            )

    @staticmethod
    def change(path: str, cell_id: str, diff: str = "", next_step: str = "") -> CellChange:
        """The result of an insert, edit or delete."""
        return CellChange(path=path, cell_id=cell_id, diff=diff, next=next_step)
