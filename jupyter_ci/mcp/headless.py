"""The headless hands: a notebook file no JupyterLab tab has open, and the server's kernel for it.

The file is read and written through the Jupyter contents manager (the server's own, or a local
one for ``jupyter ci mcp`` without a server), so the server's root, its hidden-file rules and
its atomic writes apply, and every change is on disk at once: each change reads the file as it
is now, changes the one cell it is about (by id), and writes it back (under a lock per path),
so whatever else changed the file meanwhile is kept (merge on write, cell by cell).

The kernel is the one of the notebook's session on the server (its session and kernel managers):
a user who then opens the notebook in JupyterLab finds the same kernel, with the same variables.
Cells run in it through a :class:`~jupyter_ci.workspaces.kernel.KernelWorkspace` (nbclient, the
timeout counted from ``execute_input``, the output caps), one per kernel: requests to a kernel
are serialised, one at a time. A cell's outputs are written into the file when it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import os
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar, cast

import nbformat
from jupyter_core.utils import ensure_async
from tornado.web import HTTPError

from ..agent.files import Snapshot
from ..agent.workspace import Cell, Execution, Variable
from ..errors import BadNotebookFile, JupyterCIError, KernelDied, NotebookUnavailable
from ..execution.status import CellStatus
from ..workspaces.kernel import KernelWorkspace
from ..workspaces.notebook_file import new_cell_id, with_cell_ids

log = logging.getLogger("jupyter_ci.mcp")

T = TypeVar("T")

#: Seconds a cell's outputs wait before they are written into the file, so that the outputs of
#: several calls in a row are one write (reads of outputs wait for it).
WRITE_BEHIND = 0.2
#: Seconds a kernel may take to answer its first ``kernel_info`` before it counts as dead.
KERNEL_READY_TIMEOUT = 60.0


class UnknownCell(NotebookUnavailable):
    """No cell has this id in the notebook (an agent's mistake, or deleted meanwhile)."""

    code = "cell_not_found"

    def __init__(self, path: str, cell_id: str) -> None:
        super().__init__(
            f"There is no cell {cell_id!r} in {path}.",
            hint="read_notebook lists its cells with their ids.",
        )
        self.cell_id = cell_id


def _cell(node: Any) -> Cell:
    outputs = node.get("outputs")
    return Cell(
        id=str(node.get("id", "")),
        cell_type=str(node.get("cell_type", "code")),
        source=str(node.get("source", "")),
        outputs=copy.deepcopy(list(outputs)) if outputs else [],
        execution_count=node.get("execution_count"),
        metadata=copy.deepcopy(dict(node.get("metadata", {}))),
    )


def find_index(notebook: Any, path: str, cell_id: str) -> int:
    """The index of the cell ``cell_id``; :class:`UnknownCell` when there is none."""
    for index, cell in enumerate(notebook.cells):
        if cell.get("id") == cell_id:
            return index
    raise UnknownCell(path, cell_id)


@dataclass
class FileState:
    """What the MCP layer keeps of one notebook file between calls."""

    #: Writes of the file, one at a time (read, change by cell id, write back).
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    #: The notebook as last read or written, with the file's version then (modification time
    #: and size): read again only when the version changed.
    parsed: tuple[tuple[Any, Any], Any] | None = None
    #: Changes made after their calls returned (cells' outputs), not yet written: written
    #: together, in order, by one task (``writing``) while there are any.
    queued: list[Callable[[Any], None]] = field(default_factory=list)
    writing: asyncio.Future[None] | None = None


class NotebookFile:
    """A notebook through the contents manager: read as it is now, changed cell by cell."""

    def __init__(self, contents: Any, path: str, state: FileState | None = None) -> None:
        self.contents = contents
        self.path = path
        self._state = state if state is not None else FileState()

    async def model(self, *, content: bool) -> dict[str, Any]:
        """The contents manager's model of the notebook; :class:`BadNotebookFile` when there is
        no notebook there (or it is not one)."""
        if not self.path.endswith(".ipynb"):
            raise BadNotebookFile(
                self.path,
                "is not a notebook (.ipynb)",
                hint="Name a notebook file; list_notebooks lists them.",
            )
        try:
            model = await ensure_async(self.contents.get(self.path, content=content))
        except HTTPError as err:
            raise _bad_file(self.path, err) from None
        if model.get("type") != "notebook":
            raise BadNotebookFile(self.path, "is not a notebook", hint="list_notebooks lists them.")
        return cast(dict[str, Any], model)

    async def load(self, *, outputs: bool = True) -> Any:
        """The notebook (nbformat 4.5, every cell with an id) as the file has it now, once the
        outputs still being written are (without ``outputs``: not waiting for them, the cells
        and their sources being as they are). Parsed again only when the file changed since it
        was last read or written; the caller must not change it (:meth:`change` does)."""
        if outputs:
            await self._settled()
        elif self._state.parsed is not None and self._writing():
            # Outputs are being written: the cells and sources are as last read or written
            # (and the file is not read while it is written).
            return self._state.parsed[1]
        async with self._state.lock:  # never read while it is written
            return await self._load()

    def _writing(self) -> bool:
        writing = self._state.writing
        return self._state.lock.locked() or (writing is not None and not writing.done())

    async def _load(self) -> Any:
        version = _version(await self.model(content=False))
        known = self._state.parsed
        if known is not None and known[0] == version:
            return known[1]
        model = await self.model(content=True)
        notebook = model["content"]
        with_cell_ids(notebook)
        self._state.parsed = (_version(model), notebook)
        return notebook

    async def _settled(self) -> None:
        writing = self._state.writing
        if writing is not None and not writing.done():
            await asyncio.wait({writing})

    async def writable(self) -> None:
        """:class:`BadNotebookFile` unless the notebook may be written."""
        self._check_writable(await self.model(content=False))

    def _check_writable(self, model: dict[str, Any]) -> None:
        """Read-only when the contents manager says so, or when the file's permissions do
        (even to a user who could write it anyway, such as root: its owner marked it so)."""
        writable = bool(model.get("writable", True))
        os_path = getattr(self.contents, "_get_os_path", None)
        if writable and os_path is not None:
            with contextlib.suppress(OSError, HTTPError):
                writable = bool(os.stat(os_path(self.path)).st_mode & 0o222)
        if not writable:
            raise BadNotebookFile(
                self.path,
                "is read-only; nothing was changed",
                hint="Make it writable (chmod u+w), or work in a copy of it.",
            )

    async def change(self, edit: Callable[[Any], T]) -> T:
        """Read the file, apply ``edit`` to its notebook, write it back; returns ``edit``'s
        value. Only what ``edit`` changed differs from what was on disk a moment before."""
        await self._settled()
        return await self._change(edit)

    def change_soon(self, edit: Callable[[Any], None]) -> None:
        """:meth:`change`, written after the caller goes on (with the other changes queued
        meanwhile: one write for all of them); reads of outputs wait for it. A failure is logged
        (a file that became read-only meanwhile, say)."""
        state = self._state
        state.queued.append(edit)
        if state.writing is None or state.writing.done():
            state.writing = asyncio.ensure_future(self._write_queued())

    async def _write_queued(self) -> None:
        state = self._state
        # A moment for the next calls' changes to join this write (a save holds the server).
        await asyncio.sleep(WRITE_BEHIND)
        while state.queued:
            edits, state.queued = state.queued, []

            def apply(notebook: Any, edits: list[Callable[[Any], None]] = edits) -> None:
                for edit in edits:
                    edit(notebook)

            try:
                await self._change(apply)
            except JupyterCIError as err:
                log.warning("jupyter-ci: %s", err)

    async def _change(self, edit: Callable[[Any], T]) -> T:
        async with self._state.lock:
            self._check_writable(await self.model(content=False))
            notebook = copy.deepcopy(await self._load())
            value = edit(notebook)
            saved = {"type": "notebook", "format": "json", "content": notebook}
            try:
                written = await ensure_async(self.contents.save(saved, self.path))
            except HTTPError as err:
                self._state.parsed = None
                raise _bad_file(self.path, err) from None
            self._state.parsed = (_version(written), notebook)
            return value


def _version(model: dict[str, Any]) -> tuple[Any, Any]:
    """A contents model's version of its file: modification time and size."""
    return (model.get("last_modified"), model.get("size"))


def _bad_file(path: str, err: HTTPError) -> BadNotebookFile:
    """What a contents manager's refusal means for an agent, in one sentence."""
    reason = str(err.log_message or err.reason or "")
    if err.status_code == 404:
        return BadNotebookFile(
            path,
            "does not exist under the server's root",
            hint="Give a path relative to the root; list_notebooks lists the notebooks.",
        )
    if err.status_code == 403:
        return BadNotebookFile(path, "cannot be written (permission denied)")
    first = reason.splitlines()[0][:200] if reason else f"HTTP {err.status_code}"
    return BadNotebookFile(path, f"is not a valid notebook ({first})")


class KernelPool:
    """The server's kernels as headless notebooks use them: the session's kernel for a path,
    and one :class:`KernelWorkspace` per kernel to run cells in it."""

    def __init__(self, sessions: Any, kernels: Any, contents: Any) -> None:
        self.sessions = sessions
        self.kernels = kernels
        self.contents = contents
        self._runners: dict[str, KernelWorkspace] = {}
        self._starting: dict[str, asyncio.Lock] = {}
        self._making: dict[str, asyncio.Lock] = {}
        #: Runners of kernels restarted through a tool: a cell of theirs that was running then
        #: ended because of the restart, not because the kernel died.
        self._restarted: weakref.WeakSet[KernelWorkspace] = weakref.WeakSet()
        self._tasks: set[asyncio.Future[None]] = set()

    async def kernel_of(self, path: str) -> str | None:
        """The id of the kernel the notebook's session has, if any."""
        try:
            session = await ensure_async(self.sessions.get_session(path=path))
        except HTTPError:
            return None
        kernel = (session or {}).get("kernel") or {}
        kernel_id = kernel.get("id")
        return str(kernel_id) if kernel_id and kernel_id in self.kernels else None

    async def ensure_kernel(self, path: str, kernel_name: str | None) -> str:
        """The notebook's session kernel, started (with a session, as JupyterLab starts one)
        when it has none."""
        lock = self._starting.setdefault(path, asyncio.Lock())
        async with lock:
            kernel_id = await self.kernel_of(path)
            if kernel_id is not None:
                return kernel_id
            try:
                session = await self.sessions.create_session(
                    path=path,
                    name=path.rsplit("/", 1)[-1],
                    type="notebook",
                    kernel_name=kernel_name or None,
                )
            except Exception as err:  # jupyter_client's NoSuchKernel, a failed start...
                raise KernelDied(f"No kernel could be started for {path}: {err}") from None
            return str(session["kernel"]["id"])

    async def runner(self, kernel_id: str) -> KernelWorkspace:
        """The workspace that runs cells in the kernel (made once per kernel, by one call at a
        time: the others wait for it)."""
        runner = self._runners.get(kernel_id)
        if runner is not None:
            return runner
        async with self._making.setdefault(kernel_id, asyncio.Lock()):
            runner = self._runners.get(kernel_id)
            if runner is not None:
                return runner
            manager = self.kernels.get_kernel(kernel_id)
            client = manager.client()
            client.allow_stdin = False
            client.start_channels()
            try:
                await client.wait_for_ready(timeout=KERNEL_READY_TIMEOUT)
            except Exception:
                client.stop_channels()
                raise KernelDied("The notebook's kernel does not answer.") from None
            notebook = nbformat.v4.new_notebook()  # type: ignore[no-untyped-call]
            runner = KernelWorkspace(Path(kernel_id), notebook, manager, client)
            self._runners[kernel_id] = runner
            return runner

    async def alive(self, kernel_id: str) -> bool:
        """Whether the kernel runs (still on the server, and its process alive)."""
        if kernel_id not in self.kernels:
            return False
        return bool(await ensure_async(self.kernels.get_kernel(kernel_id).is_alive()))

    def state(self, kernel_id: str) -> tuple[str, str]:
        """The kernel's name and execution state (``unknown`` when the server does not say)."""
        if kernel_id not in self.kernels:
            return "", "dead"
        manager = self.kernels.get_kernel(kernel_id)
        return str(manager.kernel_name), str(getattr(manager, "execution_state", "") or "unknown")

    async def restart(self, kernel_id: str) -> None:
        """Restart the kernel through the server (as JupyterLab's restart does); the next cell
        runs through a new runner."""
        runner = self._runners.get(kernel_id)
        if runner is not None:
            self._restarted.add(runner)
        await ensure_async(self.kernels.restart_kernel(kernel_id))
        self.forget(kernel_id)

    def was_restarted(self, runner: KernelWorkspace) -> bool:
        """Whether the runner's kernel was restarted through a tool."""
        return runner in self._restarted

    def forget(self, kernel_id: str) -> None:
        """The kernel is gone or restarted: stop using its runner (its channels close once the
        request it may be waiting for has ended)."""
        runner = self._runners.pop(kernel_id, None)
        if runner is not None:
            task = asyncio.ensure_future(_release(runner))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def close(self) -> None:
        """Stop every runner's channels (the kernels stay: they are the server's)."""
        for runner in self._runners.values():
            runner.kernel_client.stop_channels()
        self._runners.clear()


async def _release(runner: KernelWorkspace) -> None:
    """Close a runner's channels once no request of it is in the kernel."""
    await runner.idle()
    runner.kernel_client.stop_channels()


class FileWorkspace:
    """The :class:`~jupyter_ci.agent.workspace.Workspace` of a notebook no tab has open: its
    file (through the contents manager) and its session's kernel on the server."""

    def __init__(self, file: NotebookFile, pool: KernelPool) -> None:
        self.file = file
        self.pool = pool
        self.path = file.path
        self._appended: dict[str, str] = {}
        #: Called when the kernel begins a cell this workspace runs.
        self.on_cell_started: Callable[[], None] | None = None

    # --- the file ---------------------------------------------------------------------------

    async def read_cells(self, *, outputs: bool = True) -> list[Cell]:
        """Every cell as the file has it now (without ``outputs``: not waiting for outputs
        still being written, for a caller that needs the cells' ids and sources)."""
        await self._flush()
        return [_cell(node) for node in (await self.file.load(outputs=outputs)).cells]

    async def insert_cell(
        self,
        after_id: str | None,
        source: str = "",
        metadata: Mapping[str, Any] | None = None,
        *,
        cell_type: str = "code",
    ) -> str:
        """Insert a cell after ``after_id`` (at the top when None) and write the file."""
        await self._flush()

        def insert(notebook: Any) -> str:
            index = 0 if after_id is None else find_index(notebook, self.path, after_id) + 1
            node = _new_cell(cell_type, source, dict(copy.deepcopy(metadata or {})))
            taken = {cell.get("id") for cell in notebook.cells}
            while node["id"] in taken:
                node["id"] = new_cell_id()
            notebook.cells.insert(index, node)
            return str(node["id"])

        return await self.file.change(insert)

    async def append_source(self, cell_id: str, text: str) -> None:
        """Streamed code: kept until the next change, then written with it (not a file write
        per piece)."""
        self._appended[cell_id] = self._appended.get(cell_id, "") + text

    async def replace_source(self, cell_id: str, source: str, *, undoable: bool = False) -> None:
        """Replace the cell's source and write the file (a file has no undo history:
        ``undoable`` changes nothing; the change's diff is in the call's result)."""
        self._appended.pop(cell_id, None)
        await self._flush()

        def replace(notebook: Any) -> None:
            notebook.cells[find_index(notebook, self.path, cell_id)]["source"] = source

        await self.file.change(replace)

    async def delete_cell(self, cell_id: str) -> None:
        """Delete the cell and write the file."""
        self._appended.pop(cell_id, None)
        await self._flush()

        def delete(notebook: Any) -> None:
            del notebook.cells[find_index(notebook, self.path, cell_id)]

        await self.file.change(delete)

    async def _flush(self) -> None:
        if not self._appended:
            return
        appended, self._appended = self._appended, {}

        def append(notebook: Any) -> None:
            for cell_id, text in appended.items():
                node = notebook.cells[find_index(notebook, self.path, cell_id)]
                node["source"] = str(node.get("source", "")) + text

        await self.file.change(append)

    # --- the kernel -------------------------------------------------------------------------

    async def kernel(self) -> KernelWorkspace:
        """The runner of the notebook's kernel (the kernel started when it has none)."""
        spec = (await self.file.load(outputs=False)).get("metadata", {}).get("kernelspec") or {}
        kernel_id = await self.pool.ensure_kernel(self.path, spec.get("name"))
        if not await self.pool.alive(kernel_id):
            self.pool.forget(kernel_id)
            dead = KernelDied(f"The kernel of {self.path} is dead.")
            dead.hint = "Call restart_kernel to start it again (its variables are gone)."
            raise dead
        return await self.pool.runner(kernel_id)

    async def run_cell(
        self,
        cell_id: str,
        timeout: float,
        expression: str | None = None,
    ) -> Execution:
        """Run the cell's code as the file has it now; write its outputs and execution count
        into the file when it ends (into that cell, wherever it is by then)."""
        await self._flush()
        notebook = await self.file.load(outputs=False)
        node = notebook.cells[find_index(notebook, self.path, cell_id)]
        if node.get("cell_type") != "code":
            raise BadNotebookFile(
                self.path,
                f"cell {cell_id} is a {node.get('cell_type')} cell; only code cells run",
            )
        runner = await self.kernel()
        execution = await runner.run_source(
            str(node.get("source", "")),
            timeout,
            cell_id=cell_id,
            on_started=self.on_cell_started,
            expression=expression,
        )
        if execution.status is CellStatus.KERNEL_DIED and self.pool.was_restarted(runner):
            execution = replace(execution, status=CellStatus.KERNEL_RESTARTED)

        def store(notebook: Any) -> None:
            try:
                index = find_index(notebook, self.path, cell_id)
            except UnknownCell:
                return  # deleted while it ran: nothing to write it into
            notebook.cells[index]["outputs"] = [
                nbformat.from_dict(output)  # type: ignore[no-untyped-call]
                for output in execution.outputs
            ]
            notebook.cells[index]["execution_count"] = execution.execution_count

        # Written as soon as can be, the call not waiting for the disk (the next read waits).
        self.file.change_soon(store)
        return execution

    async def inspect_variables(self) -> list[Variable]:
        """The kernel's variables (a silent request; nothing changes in the kernel)."""
        return await (await self.kernel()).inspect_variables()

    async def snapshot_files(self, root: str | None) -> Snapshot | None:
        """The kernel's working folder's files."""
        return await (await self.kernel()).snapshot_files(root)

    async def fix_context(self, ename: str, evalue: str, code: str) -> list[str]:
        """What a failure is about, read from the kernel."""
        return await (await self.kernel()).fix_context(ename, evalue, code)

    async def figure_notes(self, read: bool) -> list[str]:
        """The figures the kernel displayed, in words (for ``ask`` with a text-only model)."""
        return await (await self.kernel()).figure_notes(read)

    async def interrupt(self) -> None:
        """Interrupt the kernel (the cell it runs ends ``interrupted``)."""
        kernel_id = await self.pool.kernel_of(self.path)
        if kernel_id is not None:
            await (await self.pool.runner(kernel_id)).interrupt()


def _new_cell(cell_type: str, source: str, metadata: dict[str, Any]) -> Any:
    """A new nbformat 4.5 cell of the type with an id."""
    v4 = nbformat.v4
    if cell_type == "markdown":
        return v4.new_markdown_cell(source=source, metadata=metadata)  # type: ignore[no-untyped-call]
    if cell_type == "raw":
        return v4.new_raw_cell(source=source, metadata=metadata)  # type: ignore[no-untyped-call]
    return v4.new_code_cell(source=source, metadata=metadata)  # type: ignore[no-untyped-call]
