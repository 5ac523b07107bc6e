"""The cells a run writes, and the event that says each change.

Every insert and every change of a cell's code goes through :class:`RunCells`, which acts on the
workspace and emits the fact (``cell_inserted``, ``cell_updated`` with its cause and diff): what
the run record keeps is what happened to the notebook.
"""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Callable, Mapping
from typing import Any

from .workspace import Workspace


def utf8(text: str) -> bytes:
    """``text`` as UTF-8; lone surrogates (from JSON such as "\\ud800") become U+FFFD, as the
    browser's TextEncoder does."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        fixed = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return fixed.encode("utf-8")


def source_hash(source: str) -> str:
    """The hash a generated cell's source is recorded with, and compared with to tell whether
    the user edited it since (the run record keeps it; see ``server/store``)."""
    return hashlib.sha256(utf8(source)).hexdigest()


def unified_diff(before: str, after: str) -> str:
    """The change from ``before`` to ``after`` as a unified diff ('' when they are the same)."""
    if before == after:
        return ""
    lines = difflib.unified_diff(
        before.splitlines(), after.splitlines(), "before", "after", lineterm=""
    )
    return "\n".join(lines)


#: The first line of a cell the model stopped writing (its code is commented out below it).
UNFINISHED_NOTE = (
    "# jupyter-ci: stopped before this cell was complete; it has not run. "
    "Uncomment it (select all, Ctrl+/) to use it."
)


def commented_out(code: str) -> str:
    """``code`` commented out line by line under :data:`UNFINISHED_NOTE`."""
    lines = [f"# {line}" if line.strip() else "#" for line in code.splitlines()]
    return "\n".join([UNFINISHED_NOTE, *lines])


class RunCells:
    """The cells one run inserted or changed, in that order (``ids``).

    A cell the run inserted is its own; a cell it changes without having inserted it (the
    user's, to fix: :meth:`adopt`) stays the user's: each change of its code goes into the
    cell's undo history, so one Ctrl+Z in its editor brings the user's code back.
    """

    def __init__(
        self,
        workspace: Workspace,
        run_id: str,
        origin_cell_id: str | None,
        emit: Callable[..., None],
        replaces: Mapping[str, str] | None = None,
        *,
        agent: str | None = None,
    ) -> None:
        self.workspace = workspace
        self.run_id = run_id
        self.origin_cell_id = origin_cell_id
        self._emit = emit
        #: The outside agent (an MCP client's name) whose cells these are; None: jupyter-ci's.
        self.agent = agent
        self.ids: list[str] = []
        #: Cells the run changes but did not insert (the user's).
        self.adopted: set[str] = set()
        self._replaces = dict(replaces or {})

    def metadata(self, step: int) -> dict[str, Any]:
        """The ``jupyter_ci`` metadata of a cell the run generates (a hint, not the record):
        the run, the cell it answers, its step, and the outside agent that wrote it, if any."""
        hint: dict[str, Any] = {
            "run_id": self.run_id,
            "origin_cell_id": self.origin_cell_id,
            "step": step,
        }
        if self.agent is not None:
            hint["agent"] = self.agent
        return {"jupyter_ci": hint}

    async def insert(
        self, after_id: str | None, source: str, step: int, *, metadata_step: int | None = None
    ) -> str:
        """Insert a generated cell after ``after_id`` and announce it; returns its id.

        The first one first deletes the cells of the earlier answer it replaces (see
        :meth:`replace_earlier`).
        """
        await self.replace_earlier()
        metadata = self.metadata(step if metadata_step is None else metadata_step)
        cell_id = await self.workspace.insert_cell(after_id, source, metadata)
        self.ids.append(cell_id)
        self._emit("cell_inserted", cell_id=cell_id, after_id=after_id, source=source, step=step)
        return cell_id

    async def delete(self, cell_id: str) -> None:
        """Delete a cell the run inserted, and say so (``cell_deleted``)."""
        await self.workspace.delete_cell(cell_id)
        if cell_id in self.ids:
            self.ids.remove(cell_id)
        self._emit("cell_deleted", cell_id=cell_id)

    async def leave_unfinished(self, cell_id: str, code: str) -> None:
        """The model stopped writing the cell: delete it when ``code`` is blank, else comment
        the code out under :data:`UNFINISHED_NOTE` (cause ``stopped``)."""
        if not code.strip():
            await self.delete(cell_id)
            return
        await self.rewrite(cell_id, code, commented_out(code), 1, cause="stopped")

    async def replace_earlier(self) -> None:
        """Delete the cells of an earlier answer this run replaces (the request's ``replaces``)
        whose source still has the hash the record holds; keep the ones the user edited, even
        while this run was asking the model. Once, before the run's first new cell; a notice
        says what was done."""
        if not self._replaces:
            return
        replaces, self._replaces = self._replaces, {}
        cells = await self.workspace.read_cells(outputs=False)
        sources = {cell.id: cell.source for cell in cells}
        present = [cell_id for cell_id in replaces if cell_id in sources]
        unedited = [c for c in present if source_hash(sources[c]) == replaces[c]]
        for cell_id in unedited:
            await self.workspace.delete_cell(cell_id)
            self._emit("cell_deleted", cell_id=cell_id)
        kept = len(present) - len(unedited)
        if not present:
            return
        if unedited:
            text = f"Replaced {_cells(len(unedited))} of the earlier answer"
            text += f"; kept {_cells(kept)} you edited meanwhile." if kept else "."
        else:
            text = f"Kept the {_cells(kept)} of the earlier answer: you edited it meanwhile."
            if kept != 1:
                text = text.replace("edited it", "edited them")
        self._emit("message", role="notice", text=text)

    def adopt(self, cell_id: str) -> None:
        """Count a cell the run changes without having inserted it (the user's, to fix)."""
        self.adopted.add(cell_id)
        if cell_id not in self.ids:
            self.ids.append(cell_id)

    async def rewrite(
        self, cell_id: str, before: str, after: str, attempt: int, *, cause: str
    ) -> None:
        """The cell's code is now ``after``: write it if it changed, and say so with the diff.

        ``cause`` is why (the protocol's CellUpdatedEvent): ``streamed`` (the streamed code is
        complete), ``fix``, ``own_fix``, ``edited`` (the user's edit in review), ``reproposed``,
        ``stopped``, ``restored`` (the user's code put back into their cell).
        """
        if after != before:
            # The user's cell keeps its undo history; the user's own edit (in review) is
            # already in the cell, as they typed it.
            undoable = cell_id in self.adopted and cause != "edited"
            await self.workspace.replace_source(cell_id, after, undoable=undoable)
        diff = unified_diff(before, after)
        self._emit(
            "cell_updated", cell_id=cell_id, source=after, diff=diff, attempt=attempt, cause=cause
        )


def _cells(count: int) -> str:
    return "1 cell" if count == 1 else f"{count} cells"
