"""The headless workspace: a real kernel plus an in-memory notebook loaded from an ``.ipynb``.

``jupyter ci run NOTEBOOK "prompt"`` and the Python API act through it. The kernel is started with
jupyter_client (the notebook's kernelspec, else ``python3``; the notebook's folder as working
directory, as in JupyterLab), the notebook is an nbformat v4.5 node whose cells all have ids, and
nothing is written to disk until :meth:`KernelWorkspace.save`, which replaces the file atomically.

Running a cell is nbclient's ``NotebookClient.async_execute_cell`` with the workspace's own kernel
manager and client (``store_history=True``, ``stop_on_error=False``, no stdin), its outputs built
by the one normaliser (:class:`~jupyter_ci.execution.outputs.NotebookOutputs`). What nbclient does
not do is the thin layer here: the timeout counts from the kernel's ``execute_input`` for the
cell, not from sending (a cell queued behind another client's is not timed yet); on expiry the
kernel is interrupted if that cell is still the one running, and the cell ends ``timed_out``. A
kernel that dies (nbclient notices within about a second) ends the cell ``kernel_died``; Stop's
interrupts are counted, so a cell they end is ``interrupted``; how a cell ended is decided by
:func:`~jupyter_ci.execution.status.classify`.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import nbformat
from jupyter_client.manager import AsyncKernelManager
from nbclient.exceptions import DeadKernelError

from ..agent.figures import figures_expression, parse_figures
from ..agent.files import Snapshot, parse_snapshot, snapshot_expression
from ..agent.fix_context import fix_context_expression, parse_fix_context
from ..agent.variables import inspection_expression, parse_variables
from ..agent.workspace import Cell, Execution, Variable
from ..errors import CellNotFound, InternalError, KernelDied
from ..execution.outputs import NotebookOutputs
from ..execution.status import CellStatus, KernelFate, classify
from ..vocabulary import constant, is_ci_cell
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
#: How long to wait for the end of a cell interrupted at its timeout before giving up on it
#: (seconds): code that ignores the interrupt must not hold the run forever.
INTERRUPT_GRACE = 10.0
#: How long to wait for the reply once the kernel is idle again (seconds): an interrupt that
#: lands in the kernel's request handler, outside the cell's code, ends the request without one.
#: The labextension waits as long (the schema's ``ReplyGraceSeconds``).
END_GRACE = float(constant("ReplyGraceSeconds"))
#: Timeout of the silent request that inspects variables (seconds).
INSPECT_TIMEOUT = 30.0
#: Timeout of the ``kernel_info`` request that describes a new notebook's language (seconds).
INFO_TIMEOUT = 10.0


def channel_encryption() -> dict[str, str]:
    """The kernel manager's settings that encrypt a kernel's channels where it can.

    ipykernel 7 encrypts its channels with CurveZMQ keys its manager provisions, and declares it
    in its kernelspec (``metadata.supported_encryption``); jupyter_client 8.10 provisions them
    with ``transport_encryption="auto"`` (for kernels that declare it, others are started as
    before). Without them ipykernel 7 warns on stderr that it runs unencrypted, once per kernel:
    98 times in a bench. Older jupyter_client (no such setting) and pyzmq builds without CurveZMQ
    get nothing.
    """
    import zmq

    if "transport_encryption" not in AsyncKernelManager.class_trait_names() or not zmq.has("curve"):
        return {}
    return {"transport_encryption": "auto"}


def skip_ci_cells(cell: Cell) -> bool:
    """Whether :meth:`KernelWorkspace.restore` skips a cell by default: ``%%ci`` magic cells."""
    return is_ci_cell(cell.source)


class _CellClient(NotebookOutputs):
    """nbclient running one cell at a time in the workspace's kernel, with the facts we need.

    It notes when the kernel begins the cell (its ``busy`` status or ``execute_input``, whichever
    comes first, as the labextension does) and when it is idle again, and keeps the
    ``execute_reply`` (nbclient's ``on_cell_executed`` hook). nbclient's own timeout is off: ours
    counts from the start.
    """

    def __init__(self, nb: nbformat.NotebookNode, km: AsyncKernelManager, kc: Any) -> None:
        # No tag makes nbclient skip a cell here: the workspace runs the cells it is asked to.
        super().__init__(nb, km, timeout=None, skip_cells_with_tag="")
        self.kc = kc
        self.on_cell_executed = self._keep_reply
        self.began = asyncio.Event()
        self.idle = asyncio.Event()
        self.started_at: float | None = None
        self.reply: dict[str, Any] | None = None
        #: Whether we gave up on the execution (see :meth:`give_up`).
        self.given_up = False
        #: Called once when the kernel begins the cell (see KernelWorkspace.run_source).
        self.on_started: Callable[[], None] | None = None
        self._alive_poller: asyncio.Task[Any] | None = None

    def track(self) -> None:
        """Start afresh for the next cell."""
        self.began = asyncio.Event()
        self.idle = asyncio.Event()
        self.started_at = None
        self.reply = None
        self.given_up = False

    def process_message(self, msg: dict[str, Any], cell: Any, cell_index: int) -> Any:
        """nbclient's handling, after noting the start and the end of our request."""
        msg_type = msg["msg_type"]
        state = msg["content"].get("execution_state") if msg_type == "status" else None
        if self.started_at is None and (msg_type == "execute_input" or state == "busy"):
            self.started_at = time.monotonic()
            self.began.set()
            if self.on_started is not None:
                self.on_started()
        if state == "idle":
            self.idle.set()
        return super().process_message(msg, cell, cell_index)

    async def _async_poll_kernel_alive(self) -> None:
        # nbclient stops this poller only when the reply comes; remembered so that a cell we
        # give up on (see give_up) does not leave it polling until the kernel dies.
        self._alive_poller = asyncio.current_task()
        await super()._async_poll_kernel_alive()

    def give_up(self, execution: asyncio.Future[Any]) -> None:
        """Abandon an execution whose reply will not come (the cell ignored the interrupt)."""
        self.given_up = True
        execution.cancel()
        if self._alive_poller is not None:
            self._alive_poller.cancel()

    def _keep_reply(self, cell: Any, cell_index: int, execute_reply: dict[str, Any]) -> None:
        self.reply = execute_reply.get("content") or {}


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
        # The notebook's cells run through this client; restore() runs copies through the other,
        # so that the notebook's outputs stay as they are.
        self._client = _CellClient(notebook, kernel_manager, kernel_client)
        self._scratch = _CellClient(
            nbformat.v4.new_notebook(),  # type: ignore[no-untyped-call]
            kernel_manager,
            kernel_client,
        )
        self._lock = asyncio.Lock()
        self._interrupts = 0
        self._closed = False

    @property
    def busy(self) -> bool:
        """Whether a request of the workspace is in the kernel now (a cell runs)."""
        return self._lock.locked()

    async def idle(self) -> None:
        """Wait until no request of the workspace is in the kernel."""
        async with self._lock:
            pass

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
        km = AsyncKernelManager(kernel_name=name, **channel_encryption())
        await km.start_kernel(cwd=str(cwd or path.absolute().parent), env=env)
        kc = None
        try:
            kc = km.client()
            kc.allow_stdin = False
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
            execution = await self.run_source(cell.source, timeout, cell_id=cell.id)
            executions.append(execution)
            if stop_on_error and execution.status is not CellStatus.OK:
                break
        return executions

    async def run_source(
        self,
        source: str,
        timeout: float,
        *,
        cell_id: str = "",
        on_started: Callable[[], None] | None = None,
        expression: str | None = None,
    ) -> Execution:
        """Run ``source`` in the kernel as a cell outside the notebook: its outputs are
        returned (as an :class:`Execution` named ``cell_id``), the notebook is not changed.

        Serialised with every other request of the workspace; ``on_started`` is called when
        the kernel begins it (after the requests before it ended). ``timeout`` as in
        :meth:`run_cell`.
        """
        scratch = new_code_cell(source, {})
        async with self._lock:
            self._scratch.nb.cells = [scratch]
            self._scratch.on_started = on_started
            try:
                return await self._run(self._scratch, scratch, 0, cell_id, timeout, expression)
            finally:
                self._scratch.on_started = None

    # --- the Workspace protocol -------------------------------------------------------------

    async def read_cells(self, *, outputs: bool = True) -> list[Cell]:
        """All cells, in order, as copies (changing them does not change the notebook)."""
        return [_cell(node) for node in self.notebook.cells]

    async def insert_cell(
        self,
        after_id: str | None,
        source: str = "",
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        """Insert a code cell after ``after_id`` (at the top when None); return its new id."""
        # nbclient addresses cells by index (its display ids, the cell it writes back at the
        # end of an execution): no cell moves while one runs, and the display ids move along.
        async with self._lock:
            index = 0 if after_id is None else self._index(after_id) + 1
            node = new_code_cell(source, copy.deepcopy(dict(metadata or {})))
            taken = {cell.get("id") for cell in self.notebook.cells}
            while node.id in taken:
                node.id = new_cell_id()
            self.notebook.cells.insert(index, node)
            self._client.cell_inserted(index)
        return str(node.id)

    async def append_source(self, cell_id: str, text: str) -> None:
        """Append streamed text to the cell's source."""
        node = self.notebook.cells[self._index(cell_id)]
        node.source = node.source + text

    async def replace_source(self, cell_id: str, source: str, *, undoable: bool = False) -> None:
        """Replace the cell's source; its outputs stay until it runs again (a file has no undo
        history: ``undoable`` changes nothing here)."""
        self.notebook.cells[self._index(cell_id)].source = source

    async def delete_cell(self, cell_id: str) -> None:
        """Delete the cell (under the lock: no cell moves while one runs)."""
        async with self._lock:
            index = self._index(cell_id)
            del self.notebook.cells[index]
            self._client.cell_deleted(index)

    async def run_cell(
        self, cell_id: str, timeout: float, expression: str | None = None
    ) -> Execution:
        """Run the code cell and store its outputs and execution count in the notebook.

        ``timeout`` seconds (0 = none) count from when the kernel begins the cell. A kernel
        that dies meanwhile (or is dead already) ends the cell ``kernel_died``; the outputs so
        far are kept. ``expression`` (the files snapshot) is a user expression of the cell's own
        request: its value is the execution's ``expression_value`` (kernels evaluate it only
        after a cell that ended well).
        """
        async with self._lock:
            index = self._index(cell_id)
            node = self.notebook.cells[index]
            if node.cell_type != "code":
                raise InternalError(f"Cell {cell_id!r} is a {node.cell_type} cell; only code runs.")
            return await self._run(self._client, node, index, cell_id, timeout, expression)

    async def inspect_variables(self) -> list[Variable]:
        """The user's variables, from a silent request that leaves no trace in the kernel.

        A kernel that cannot evaluate the expression (not a Python kernel) gives no variables,
        with a warning in the log. Raises :class:`KernelDied` if the kernel is gone.
        """
        text = await self._evaluate(inspection_expression(), "list its variables")
        if text is None:
            return []
        try:
            return parse_variables(text)
        except ValueError as error:
            log.warning("%s", error)
            return []

    async def snapshot_files(self, root: str | None) -> Snapshot | None:
        """The kernel's working folder's files (see :mod:`jupyter_ci.agent.files`)."""
        text = await self._evaluate(snapshot_expression(root), "list its files")
        return None if text is None else parse_snapshot(text)

    async def fix_context(self, ename: str, evalue: str, code: str) -> list[str]:
        """What the failure is about (see :mod:`jupyter_ci.agent.fix_context`)."""
        expression = fix_context_expression(ename, evalue, code)
        text = await self._evaluate(expression, "read what the failure is about")
        return [] if text is None else parse_fix_context(text)

    async def figure_notes(self, read: bool) -> list[str]:
        """The figures it displayed, in words (see :mod:`jupyter_ci.agent.figures`)."""
        return parse_figures(await self._evaluate(figures_expression(read), "note its figures"))

    async def _evaluate(self, expression: str, what: str) -> str | None:
        """The text/plain value of ``expression``, from a silent request that leaves no trace
        in the kernel; None (and a warning saying it could not ``what``) when it raised."""
        async with self._lock:
            await self._check_alive()
            msg_id = self.kernel_client.execute(
                "",
                silent=True,
                store_history=False,
                user_expressions={"value": expression},
                stop_on_error=False,
            )
            reply = await self._reply(msg_id, INSPECT_TIMEOUT)
        content = (reply or {}).get("content") or {}
        result = (content.get("user_expressions") or {}).get("value") or {}
        if content.get("status") != "ok" or result.get("status") != "ok":
            reason = result.get("ename") or content.get("ename") or "no reply"
            log.warning("The kernel could not %s (%s).", what, reason)
            return None
        return str(result.get("data", {}).get("text/plain", ""))

    async def interrupt(self) -> None:
        """Interrupt the kernel (Stop): a cell it stops ends ``interrupted``."""
        self._interrupts += 1
        await self.kernel_manager.interrupt_kernel()

    # --- internals --------------------------------------------------------------------------

    def _index(self, cell_id: str) -> int:
        for index, cell in enumerate(self.notebook.cells):
            if cell.get("id") == cell_id:
                return index
        raise CellNotFound(cell_id)

    async def _check_alive(self) -> None:
        if self._closed:
            raise InternalError("The workspace is closed.")
        if not await self.kernel_manager.is_alive():
            raise KernelDied("The kernel process has exited.")

    async def _run(
        self,
        client: _CellClient,
        node: Any,
        index: int,
        cell_id: str,
        timeout: float,
        expression: str | None = None,
    ) -> Execution:
        """Run ``node`` (at ``index`` of ``client``'s notebook) and classify how it ended;
        ``expression`` goes with it, as a user expression of its own execute request."""
        if self._closed:
            raise InternalError("The workspace is closed.")
        if not await self.kernel_manager.is_alive():
            return Execution(cell_id, classify(None, kernel=KernelFate.DIED), [])
        node.outputs = []
        node.execution_count = None
        if not node.source.strip():
            # nbclient does not send empty cells to the kernel, nor does JupyterLab.
            return Execution(cell_id, CellStatus.OK, [], None, 0.0)
        client.track()
        client.begin(index)
        interrupts = self._interrupts
        execute = self.kernel_client.execute
        if expression is not None:
            # nbclient sends the cell with the client's execute: the expression rides along
            # (requests are one at a time here, so nothing else sends meanwhile).
            self.kernel_client.execute = functools.partial(
                execute, user_expressions={"value": expression}
            )
        execution = asyncio.ensure_future(client.async_execute_cell(node, index))
        timed_out, fate = False, KernelFate.ALIVE
        try:
            timed_out = await self._wait(client, execution, timeout)
            await execution
        except DeadKernelError:
            # nbclient says so for an execution we cancelled too.
            if not client.given_up:
                fate = KernelFate.DIED
        except asyncio.CancelledError:
            if not client.given_up:
                raise  # our caller was cancelled, not a cell we gave up on
        finally:
            self.kernel_client.execute = execute
            if not execution.done():
                client.give_up(execution)
        started = client.started_at
        duration = None if started is None else max(0.0, time.monotonic() - started)
        outputs = client.finish(node.outputs, client.reply)
        reply = client.reply or {}
        error_name = next(
            (out.get("ename") for out in outputs if out.get("output_type") == "error"),
            reply.get("ename"),
        )
        status = classify(
            reply.get("status"),
            error_name,
            timed_out=timed_out,
            interrupted=self._interrupts > interrupts,
            kernel=fate,
        )
        # The notebook keeps the very output dicts (display updates rewrite them later); the
        # execution gets a copy.
        kept: list[dict[str, Any]] = list(outputs)
        return Execution(
            cell_id,
            status,
            copy.deepcopy(kept),
            node.execution_count,
            duration,
            expression_value(reply) if expression is not None else None,
        )

    async def _wait(
        self, client: _CellClient, execution: asyncio.Future[Any], timeout: float
    ) -> bool:
        """Wait for the cell to end; return whether it timed out.

        ``timeout`` (0: none) counts from the cell's start; on expiry the kernel is interrupted
        if the cell is still running, and the cell gets ``INTERRUPT_GRACE`` seconds to end. Once
        the kernel is idle again, the reply gets ``END_GRACE`` seconds. An execution that ends in
        neither is given up on.
        """
        timed_out = False
        if timeout > 0:
            await _first(execution, client.began)
            started = client.started_at if client.started_at is not None else time.monotonic()
            await _first(execution, client.idle, max(0.0, started + timeout - time.monotonic()))
            if not execution.done() and not client.idle.is_set():
                timed_out = True
                await self.kernel_manager.interrupt_kernel()
                await _first(execution, client.idle, INTERRUPT_GRACE)
                if not execution.done() and not client.idle.is_set():
                    log.warning("A cell interrupted at its timeout did not stop; giving up on it.")
                    client.give_up(execution)
                    return timed_out
        await _first(execution, client.idle)
        if not execution.done():
            await _first(execution, None, END_GRACE)
        if not execution.done():
            log.warning("The kernel ended a cell without replying; going on without the reply.")
            client.give_up(execution)
        return timed_out

    async def _reply(self, msg_id: str, timeout: float) -> dict[str, Any] | None:
        """The shell reply to ``msg_id`` (None if none came in time); KernelDied if it died."""
        try:
            return await asyncio.wait_for(self._client.async_wait_for_reply(msg_id), timeout)
        except asyncio.TimeoutError:
            return None
        except DeadKernelError:
            raise KernelDied("The kernel process has exited.") from None

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
        reply = await self._reply(self.kernel_client.kernel_info(), INFO_TIMEOUT)
        info = ((reply or {}).get("content") or {}).get("language_info")
        if isinstance(info, dict) and info.get("name"):
            metadata["language_info"] = info


async def _first(
    execution: asyncio.Future[Any], event: asyncio.Event | None, timeout: float | None = None
) -> None:
    """Wait until ``execution`` is done, or ``event`` is set, or ``timeout`` seconds passed."""
    waiting: set[asyncio.Future[Any]] = {execution}
    if event is not None:
        waiting.add(asyncio.ensure_future(event.wait()))
    try:
        await asyncio.wait(waiting, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiting - {execution}:
            waiter.cancel()


def expression_value(reply: Mapping[str, Any]) -> str | None:
    """The text/plain value of an execute reply's user expression (``value``); None when it was
    not evaluated or raised."""
    value = (reply.get("user_expressions") or {}).get("value") or {}
    if value.get("status") != "ok":
        return None
    text = (value.get("data") or {}).get("text/plain")
    return text if isinstance(text, str) else None


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
