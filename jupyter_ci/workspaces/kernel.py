"""The headless workspace: a real kernel plus an in-memory notebook loaded from an ``.ipynb``.

``jupyter ci run NOTEBOOK "prompt"`` and the Python API act through it. The kernel is started with
jupyter_client (the notebook's kernelspec, else ``python3``; the notebook's folder as working
directory, as in JupyterLab), the notebook is an nbformat v4.5 node whose cells all have ids, and
nothing is written to disk until :meth:`KernelWorkspace.save`, which replaces the file atomically.

Running a cell: the cell's source is sent with ``store_history=True``, ``allow_stdin=False`` and
``stop_on_error=False``; kernel messages become outputs through
:class:`~jupyter_ci.workspaces.kernel_exec.ExecutionCollector`. The timeout counts from the moment
the kernel begins the cell; on expiry the kernel is interrupted if that cell is still the one
running, and the result is ``timed_out``. A kernel that dies raises
:class:`~jupyter_ci.errors.KernelDied` within about a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import nbformat
from jupyter_client.manager import AsyncKernelManager

from ..agent.variables import inspection_expression, parse_variables
from ..agent.workspace import Cell, Execution, Variable
from ..errors import CellNotFound, InternalError, KernelDied
from ..execution.status import CellStatus
from .kernel_exec import DisplayRegistry, ExecutionCollector
from .notebook_file import (
    load_notebook,
    new_cell_id,
    new_code_cell,
    notebook_text,
    write_atomically,
)

log = logging.getLogger(__name__)

#: Environment variables removed from the kernel's environment by default: jupyter-ci's own key.
DEFAULT_DROP_ENV = ("JUPYTER_CI_API_KEY",)
#: How often a waiting workspace checks that the kernel process is alive (seconds).
ALIVE_POLL = 0.25
#: How long to wait for the reply of a cell interrupted at its timeout (seconds).
INTERRUPT_GRACE = 10.0
#: How long to wait for the ``idle`` status once the reply came, or the reply once idle (seconds).
END_GRACE = 3.0
#: Timeout of the silent request that inspects variables (seconds).
INSPECT_TIMEOUT = 30.0


def skip_ci_cells(cell: Cell) -> bool:
    """Whether :meth:`KernelWorkspace.restore` skips a cell by default: ``%%ci`` magic cells."""
    return cell.source.lstrip().startswith("%%ci")


class KernelWorkspace:
    """The :class:`~jupyter_ci.agent.workspace.Workspace` over a kernel and a notebook file.

    Create one with :meth:`open` (it starts the kernel) and end it with :meth:`close`, or use it
    as an async context manager: ``async with await KernelWorkspace.open(path) as ws: ...``.
    Calls that talk to the kernel are serialised; :meth:`interrupt` is not (it is the Stop).
    """

    def __init__(
        self,
        path: Path,
        notebook: nbformat.NotebookNode,
        kernel_manager: AsyncKernelManager,
        kernel_client: Any,
    ) -> None:
        self.path = path
        #: The notebook (an nbformat v4 node), kept in memory; :meth:`save` writes it.
        self.notebook = notebook
        self.kernel_manager = kernel_manager
        self.kernel_client = kernel_client
        self._lock = asyncio.Lock()
        self._displays = DisplayRegistry()
        self._interrupts = 0
        self._closed = False

    # --- life cycle -------------------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        path: Path,
        *,
        kernel_name: str | None = None,
        cwd: Path | None = None,
        drop_env: Iterable[str] = DEFAULT_DROP_ENV,
        startup_timeout: float = 60.0,
    ) -> KernelWorkspace:
        """Load the notebook at ``path`` (an empty one if there is no file) and start its kernel.

        ``kernel_name`` overrides the notebook's kernelspec (default ``python3``); ``cwd`` is the
        kernel's working directory (default: the notebook's folder); ``drop_env`` names
        environment variables the kernel must not inherit (the key variable).
        """
        path = Path(path)
        notebook = await asyncio.to_thread(load_notebook, path)
        spec = notebook.metadata.get("kernelspec") or {}
        name = kernel_name or spec.get("name") or "python3"
        env = dict(os.environ)
        for variable in drop_env:
            env.pop(variable, None)
        env["JPY_SESSION_NAME"] = str(path.absolute())
        km = AsyncKernelManager(kernel_name=name)
        await km.start_kernel(cwd=str(cwd or path.absolute().parent), env=env)
        kc = None
        try:
            kc = km.client()
            kc.start_channels()
            await kc.wait_for_ready(timeout=startup_timeout)
            workspace = cls(path, notebook, km, kc)
            await workspace._describe_kernel()
        except BaseException:
            if kc is not None:
                kc.stop_channels()
            await km.shutdown_kernel(now=True)
            raise
        return workspace

    async def close(self) -> None:
        """Shut the kernel down. The notebook is not saved (call :meth:`save` first)."""
        if self._closed:
            return
        self._closed = True
        self.kernel_client.stop_channels()
        try:
            await self.kernel_manager.shutdown_kernel(now=not await self.kernel_manager.is_alive())
        except Exception:  # a kernel that is already gone cannot be shut down more
            log.debug("shutting the kernel down failed", exc_info=True)

    async def __aenter__(self) -> KernelWorkspace:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def save(self, path: Path | None = None) -> None:
        """Write the notebook to ``path`` (default: where it was opened) atomically.

        The notebook is validated and serialised first, then written to a temporary file in the
        same folder and moved over the target with :func:`os.replace`: the target is either the
        old file or the complete new one, never a half-written file. The file's permissions are
        kept; a symbolic link is followed, not replaced.
        """
        text = notebook_text(self.notebook)
        target = path if path is not None else self.path
        await asyncio.to_thread(lambda: write_atomically(Path(os.path.realpath(target)), text))

    async def restore(
        self,
        skip: Callable[[Cell], bool] | None = skip_ci_cells,
        *,
        timeout: float = 0,
        stop_on_error: bool = True,
    ) -> list[Execution]:
        """Re-run the notebook's code cells in order, to rebuild the kernel's state.

        Only the kernel changes: the cells' stored outputs and execution counts are left as they
        are in the file. Cells for which ``skip`` is true (default: ``%%ci`` cells, which would
        start a run of their own) and empty cells are not run. With ``stop_on_error`` the first
        cell that does not end ``ok`` is the last one run. Returns one :class:`Execution` per
        cell run.
        """
        executions: list[Execution] = []
        for cell in await self.read_cells():
            if cell.cell_type != "code" or not cell.source.strip():
                continue
            if skip is not None and skip(cell):
                continue
            async with self._lock:
                collector, status = await self._execute(cell.source, timeout, DisplayRegistry())
            executions.append(_execution(cell.id, collector, status))
            if stop_on_error and status is not CellStatus.OK:
                break
        return executions

    # --- the Workspace protocol -------------------------------------------------------------

    async def read_cells(self) -> list[Cell]:
        """All cells, in order, as copies (changing them does not change the notebook)."""
        return [_cell(node) for node in self.notebook.cells]

    async def insert_cell(
        self,
        after_id: str | None,
        source: str = "",
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        """Insert a code cell after ``after_id`` (at the top when None); return its new id."""
        index = 0 if after_id is None else self._index(after_id) + 1
        node = new_code_cell(source, copy.deepcopy(dict(metadata or {})))
        taken = {cell.get("id") for cell in self.notebook.cells}
        while node.id in taken:
            node.id = new_cell_id()
        self.notebook.cells.insert(index, node)
        return str(node.id)

    async def append_source(self, cell_id: str, text: str) -> None:
        """Append streamed text to the cell's source."""
        node = self.notebook.cells[self._index(cell_id)]
        node.source = node.source + text

    async def replace_source(self, cell_id: str, source: str) -> None:
        """Replace the cell's source; its outputs stay until it runs again."""
        self.notebook.cells[self._index(cell_id)].source = source

    async def run_cell(self, cell_id: str, timeout: float) -> Execution:
        """Run the code cell and store its outputs and execution count in the notebook.

        ``timeout`` seconds (0 = none) count from when the kernel begins the cell. Raises
        :class:`KernelDied` if the kernel dies meanwhile (the outputs so far are kept).
        """
        node = self.notebook.cells[self._index(cell_id)]
        if node.cell_type != "code":
            raise InternalError(f"Cell {cell_id!r} is a {node.cell_type} cell; only code runs.")
        async with self._lock:
            self._displays.forget(node.outputs)
            node.outputs = []
            node.execution_count = None
            collector, interrupts = await self._send(node.source, self._displays)
            try:
                timed_out = await self._wait(collector, timeout)
            finally:
                # The very output dicts: the display registry updates them in place later.
                node.outputs = collector.outputs()
                node.execution_count = collector.execution_count
            interrupted = self._interrupts > interrupts
            status = collector.status(timed_out=timed_out, interrupted=interrupted)
        return _execution(cell_id, collector, status, outputs=node.outputs)

    async def inspect_variables(self) -> list[Variable]:
        """The user's variables, from a silent request that leaves no trace in the kernel.

        A kernel that cannot evaluate the expression (not a Python kernel) gives no variables,
        with a warning in the log.
        """
        expressions = {"variables": inspection_expression()}
        async with self._lock:
            collector, status = await self._execute(
                "", INSPECT_TIMEOUT, DisplayRegistry(), silent=True, user_expressions=expressions
            )
        result = ((collector.reply or {}).get("user_expressions") or {}).get("variables") or {}
        if status is not CellStatus.OK or result.get("status") != "ok":
            log.warning(
                "The kernel could not list its variables (%s).",
                result.get("ename") or status.value,
            )
            return []
        try:
            return parse_variables(str(result.get("data", {}).get("text/plain", "")))
        except ValueError as error:
            log.warning("%s", error)
            return []

    async def interrupt(self) -> None:
        """Interrupt the kernel (Stop). A cell it stops ends ``aborted``, not ``error``."""
        self._interrupts += 1
        await self.kernel_manager.interrupt_kernel()

    # --- internals --------------------------------------------------------------------------

    def _index(self, cell_id: str) -> int:
        for index, cell in enumerate(self.notebook.cells):
            if cell.get("id") == cell_id:
                return index
        raise CellNotFound(cell_id)

    async def _check_alive(self) -> None:
        if not await self.kernel_manager.is_alive():
            raise KernelDied("The kernel process has exited.")

    async def _send(
        self,
        code: str,
        displays: DisplayRegistry,
        *,
        silent: bool = False,
        user_expressions: dict[str, str] | None = None,
    ) -> tuple[ExecutionCollector, int]:
        """Send one execute request; return its collector and the interrupt count at sending."""
        if self._closed:
            raise InternalError("The workspace is closed.")
        await self._check_alive()
        interrupts = self._interrupts
        msg_id = self.kernel_client.execute(
            code,
            silent=silent,
            store_history=not silent,
            user_expressions=user_expressions,
            allow_stdin=False,
            stop_on_error=False,
        )
        return ExecutionCollector(msg_id, displays=displays), interrupts

    async def _execute(
        self,
        code: str,
        timeout: float,
        displays: DisplayRegistry,
        *,
        silent: bool = False,
        user_expressions: dict[str, str] | None = None,
    ) -> tuple[ExecutionCollector, CellStatus]:
        """Send one execute request and wait for it; the caller holds the lock."""
        collector, interrupts = await self._send(
            code, displays, silent=silent, user_expressions=user_expressions
        )
        timed_out = await self._wait(collector, timeout)
        status = collector.status(timed_out=timed_out, interrupted=self._interrupts > interrupts)
        return collector, status

    async def _wait(self, collector: ExecutionCollector, timeout: float) -> bool:
        """Feed kernel messages to ``collector`` until it is done; return whether it timed out.

        Interrupts the kernel when the timeout (counted from the kernel beginning the request)
        expires while the request is still running; then waits at most ``INTERRUPT_GRACE`` for
        its reply. Checks every ``ALIVE_POLL`` seconds that the kernel lives.
        """
        timed_out = False
        give_up_at: float | None = None
        next_alive_check = time.monotonic() + ALIVE_POLL
        readers: dict[str, asyncio.Future[Any]] = {}
        try:
            while not collector.done:
                now = time.monotonic()
                if not timed_out and collector.expired(timeout, now):
                    timed_out = True
                    await self.kernel_manager.interrupt_kernel()
                    give_up_at = time.monotonic() + INTERRUPT_GRACE
                    continue
                running = not timed_out and collector.running
                deadline = collector.deadline(timeout) if running else None
                if (collector.replied or collector.idle) and give_up_at is None:
                    # The other half (idle, or the reply) follows at once; do not hang if not.
                    give_up_at = now + END_GRACE
                if give_up_at is not None and now >= give_up_at:
                    break
                if now >= next_alive_check:
                    await self._check_alive()
                    next_alive_check = time.monotonic() + ALIVE_POLL
                wake = min(t for t in (deadline, give_up_at, next_alive_check) if t is not None)
                await self._read(readers, collector, max(0.0, wake - time.monotonic()))
        finally:
            for reader in readers.values():
                reader.cancel()
        return timed_out

    async def _read(
        self, readers: dict[str, asyncio.Future[Any]], collector: ExecutionCollector, wait: float
    ) -> None:
        """Wait up to ``wait`` seconds for iopub or shell messages and feed what came."""
        if "iopub" not in readers:
            readers["iopub"] = asyncio.ensure_future(self.kernel_client.get_iopub_msg())
        if "shell" not in readers:
            readers["shell"] = asyncio.ensure_future(self.kernel_client.get_shell_msg())
        done, _ = await asyncio.wait(
            readers.values(), timeout=wait, return_when=asyncio.FIRST_COMPLETED
        )
        # iopub first: outputs that came with the reply belong before the end.
        for channel in ("iopub", "shell"):
            if readers[channel] in done:
                msg = readers.pop(channel).result()
                if channel == "iopub":
                    collector.feed_iopub(msg)
                else:
                    collector.feed_shell(msg)

    async def _describe_kernel(self) -> None:
        """Fill the notebook's kernelspec and language_info metadata where they are missing."""
        metadata = self.notebook.metadata
        spec = self.kernel_manager.kernel_spec
        if not metadata.get("kernelspec") and spec is not None:
            metadata["kernelspec"] = {
                "name": self.kernel_manager.kernel_name,
                "display_name": spec.display_name,
                "language": spec.language,
            }
        if metadata.get("language_info"):
            return
        msg_id = self.kernel_client.kernel_info()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                reply = await self.kernel_client.get_shell_msg(timeout=1)
                if (reply.get("parent_header") or {}).get("msg_id") == msg_id:
                    info = reply.get("content", {}).get("language_info")
                    if isinstance(info, dict) and info.get("name"):
                        metadata["language_info"] = info
                    return


def _cell(node: nbformat.NotebookNode) -> Cell:
    outputs = node.get("outputs")
    return Cell(
        id=str(node.get("id", "")),
        cell_type=str(node.cell_type),
        source=str(node.source),
        outputs=copy.deepcopy(list(outputs)) if outputs else [],
        execution_count=node.get("execution_count"),
        metadata=copy.deepcopy(dict(node.get("metadata", {}))),
    )


def _execution(
    cell_id: str,
    collector: ExecutionCollector,
    status: CellStatus,
    *,
    outputs: list[dict[str, Any]] | None = None,
) -> Execution:
    return Execution(
        cell_id=cell_id,
        status=status,
        outputs=copy.deepcopy(outputs if outputs is not None else collector.outputs()),
        execution_count=collector.execution_count,
        duration=collector.duration,
    )
