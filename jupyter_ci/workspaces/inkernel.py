"""The in-kernel workspace: ``%%ci`` running the agent loop inside the user's own kernel.

Where no jupyter-ci frontend is attached (VS Code, papermill/nbclient, terminal IPython), the
``%%ci`` magic runs the loop here. Threads:

- The **loop** (async) runs on a long-lived worker thread with its own asyncio event loop: the
  kernel's loop is already running on the main thread and is blocked by the magic call anyway.
  The worker never prints; every run's coroutine is scheduled from the magic's thread, so its
  context (the cell the output belongs to) is the magic cell's.
- The **main thread** stays inside the magic call and serves the worker's requests from a queue
  (:class:`MainThreadBridge`) until the run ends: run this code, inspect the variables, print
  this progress line. Code therefore runs where the user's code always runs, through
  ``shell.run_cell(..., store_history=False)``: variables land in ``user_ns`` and displays appear
  under the magic cell. What the user sees of the run's progress (lines of text or a widget)
  is :mod:`jupyter_ci.workspaces.inkernel_progress`.

Cells are virtual: the notebook the loop sees is the kernel's input history (as code cells,
without outputs, ``%%ci`` cells left out) followed by the generated code blocks, which live only
in this workspace; the magic offers them as the next cell when the run ends.

Outputs are captured while they are shown, and a block is interrupted at its timeout or for Stop
(:mod:`jupyter_ci.workspaces.inkernel_capture`); the outputs are built by the one normaliser and
how a block ended is decided by :func:`~jupyter_ci.execution.status.classify`, as in every
workspace.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import queue
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..agent.figures import figures_here
from ..agent.files import SNAPSHOT_SOURCE, Snapshot, parse_snapshot, snapshot_scope
from ..agent.fix_context import fix_context_here
from ..agent.loop import AgentRun, RunOutcome, RunRequest
from ..agent.variables import INSPECT_SOURCE, parse_variables
from ..agent.workspace import Cell, Execution, Variable
from ..errors import CellNotFound, StoppedByUser
from ..execution.outputs import NotebookOutputs
from ..execution.status import CellStatus, classify
from ..loop_thread import BackgroundLoop
from ..models.base import Model
from ..vocabulary import is_ci_cell
from .inkernel_capture import Interrupter, OutputCapture
from .inkernel_progress import ProgressView, TextProgress, make_view
from .notebook_file import new_code_cell

T = TypeVar("T")

#: Input-history entries shown to the model as cells, newest kept.
HISTORY_CELLS = 200
#: How long the magic waits for a run to end after the user interrupted it (seconds).
STOP_GRACE = 15.0
#: How often the main thread looks up from the queue (seconds).
POLL = 0.05


# --- the bridge between the loop's thread and the main thread ---------------------------------


class _Done:
    """Marker put on the queue when the run has ended."""


_DONE = _Done()


class MainThreadBridge:
    """A queue of jobs the worker posts and the main thread (inside the magic) runs."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Callable[[], None] | _Done] = queue.SimpleQueue()

    def post(self, job: Callable[[], None]) -> None:
        """Run ``job`` on the main thread soon (fire and forget; used for progress).

        A failing job is dropped: showing progress must never end the magic while its run goes
        on without it.
        """

        def guarded() -> None:
            with contextlib.suppress(Exception):
                job()

        self._queue.put(guarded)

    def finish(self) -> None:
        """Tell :meth:`serve` that the run has ended."""
        self._queue.put(_DONE)

    async def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the main thread and await its result (from the worker's loop)."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def job() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn())
            except KeyboardInterrupt:
                future.set_exception(StoppedByUser())
                raise
            except BaseException as exc:  # handed to the awaiting coroutine
                future.set_exception(exc)

        self._queue.put(job)
        return await asyncio.wrap_future(future)

    def serve(
        self,
        on_interrupt: Callable[[], None],
        *,
        grace: float = STOP_GRACE,
        on_idle: Callable[[], None] | None = None,
    ) -> bool:
        """Run posted jobs until :meth:`finish`; returns False if the run was abandoned.

        A ``KeyboardInterrupt`` (the Jupyter interrupt button, Ctrl-C) calls ``on_interrupt``
        once per interrupt; if the run has not ended ``grace`` seconds after the first one, the
        magic stops waiting for it. ``on_idle`` is called whenever no job came for ``POLL``
        seconds (a progress view's clock).
        """
        stop_deadline: float | None = None
        while True:
            try:
                try:
                    job = self._queue.get(timeout=POLL)
                except queue.Empty:
                    if stop_deadline is not None and time.monotonic() > stop_deadline:
                        return False
                    if on_idle is not None:
                        with contextlib.suppress(Exception):
                            on_idle()
                    continue
                if isinstance(job, _Done):
                    return True
                job()
            except KeyboardInterrupt:
                if stop_deadline is None:
                    stop_deadline = time.monotonic() + grace
                on_interrupt()


# --- the workspace -------------------------------------------------------------------------


@dataclass
class _Block:
    id: str
    source: str
    generated: bool
    metadata: dict[str, Any] = field(default_factory=dict)


def _inputs(shell: Any) -> list[Any]:
    manager = getattr(shell, "history_manager", None)
    raw = getattr(manager, "input_hist_raw", None)
    if isinstance(raw, list) and raw:
        return raw
    entries = shell.user_ns.get("In", [])
    return entries if isinstance(entries, list) else []


def current_input_number(shell: Any) -> int | None:
    """The input number of the ``%%ci`` cell running now (None when it is not in the history)."""
    entries = _inputs(shell)
    if entries and isinstance(entries[-1], str) and is_ci_cell(entries[-1]):
        return len(entries) - 1
    return None


def history_cells(
    shell: Any, earlier: Mapping[int, str] | None = None, limit: int = HISTORY_CELLS
) -> list[_Block]:
    """The kernel's input history as code cells: ``%%ci`` cells and empty inputs left out.

    ``earlier`` maps the input number of an earlier ``%%ci`` cell to the code its run generated
    (which ran, but is not in the history): that code stands in for the ``%%ci`` cell.
    """
    entries = _inputs(shell)
    earlier = earlier or {}
    blocks: list[_Block] = []
    for number, source in enumerate(entries):
        if not isinstance(source, str) or not source.strip():
            continue
        text = source.strip()
        if is_ci_cell(text):
            if earlier.get(number):
                blocks.append(_Block(f"generated-{number}", earlier[number], generated=False))
            continue
        blocks.append(_Block(f"history-{number}", text, generated=False))
    return blocks[-limit:]


class InKernelWorkspace:
    """The :class:`~jupyter_ci.agent.workspace.Workspace` of a run inside the user's kernel.

    Every method is awaited on the loop's thread; whatever touches the shell is done on the
    main thread through the bridge.
    """

    def __init__(
        self, shell: Any, bridge: MainThreadBridge, earlier: Mapping[int, str] | None = None
    ) -> None:
        self.shell = shell
        self.bridge = bridge
        self._blocks = history_cells(shell, earlier)
        #: The last error output of each block (for progress lines).
        self.last_error: dict[str, dict[str, Any]] = {}
        #: Set when the user interrupted: no further block runs.
        self.stopped = False
        # The blocks' outputs, one cell each (in the order they ran) of a notebook of its own.
        self._outputs = NotebookOutputs()
        self._interrupter = Interrupter()

    # the generated blocks, for the magic

    def generated(self) -> list[Cell]:
        """The generated code blocks, in notebook order."""
        return [_cell(block) for block in self._blocks if block.generated]

    def generated_code(self) -> str:
        """All generated blocks joined, as the code to offer as the next cell."""
        sources = [cell.source.strip("\n") for cell in self.generated()]
        return "\n\n".join(source for source in sources if source.strip())

    # the Workspace protocol

    async def read_cells(self, *, outputs: bool = True) -> list[Cell]:
        return [_cell(block) for block in self._blocks]

    async def insert_cell(
        self,
        after_id: str | None,
        source: str = "",
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        index = 0 if after_id is None else self._index(after_id) + 1
        block = _Block(uuid.uuid4().hex, source, generated=True, metadata=dict(metadata or {}))
        self._blocks.insert(index, block)
        return block.id

    async def append_source(self, cell_id: str, text: str) -> None:
        block = self._blocks[self._index(cell_id)]
        block.source += text

    async def replace_source(self, cell_id: str, source: str, *, undoable: bool = False) -> None:
        """Replace a block's code (no frontend here keeps an undo history)."""
        self._blocks[self._index(cell_id)].source = source

    async def delete_cell(self, cell_id: str) -> None:
        del self._blocks[self._index(cell_id)]

    async def run_cell(
        self, cell_id: str, timeout: float, expression: str | None = None
    ) -> Execution:
        block = self._blocks[self._index(cell_id)]
        source = block.source
        execution = await self.bridge.call(lambda: self.execute(cell_id, source, timeout))
        if execution.error is not None:
            self.last_error[cell_id] = execution.error
        return execution

    async def inspect_variables(self) -> list[Variable]:
        return await self.bridge.call(self.variables)

    async def snapshot_files(self, root: str | None) -> Snapshot | None:
        return await asyncio.to_thread(_snapshot, root)

    async def fix_context(self, ename: str, evalue: str, code: str) -> list[str]:
        namespace = self.shell.user_ns
        return await self.bridge.call(lambda: fix_context_here(namespace, ename, evalue, code))

    async def figure_notes(self, read: bool) -> list[str]:
        shell = self.shell
        return await self.bridge.call(lambda: figures_here(shell, read))

    async def interrupt(self) -> None:
        """Stop: the block running now is interrupted (it ends ``interrupted``); no other runs.

        The user's own interrupt (SIGINT) has already reached the code it stopped by the time
        the loop asks; a block is interrupted here only if one is still running.
        """
        self.stopped = True
        self._interrupter.stop()

    # main-thread work

    def variables(self) -> list[Variable]:
        """The user's variables, read in-process without touching ``In``/``Out`` or history."""
        scope: dict[str, Any] = {"ns": self.shell.user_ns}
        exec(INSPECT_SOURCE, scope)  # noqa: S102 - our own, fixed source
        return parse_variables(repr(scope["result"]))

    def execute(self, cell_id: str, source: str, timeout: float) -> Execution:
        """Run ``source`` through the shell on this (the main) thread, capturing its outputs."""
        if self.stopped:
            return Execution(cell_id, CellStatus.ABORTED, [])
        cells = self._outputs.nb.cells
        cells.append(new_code_cell(source, {}))
        capture = OutputCapture(self.shell, self._outputs, len(cells) - 1)
        result: Any = None
        started = time.monotonic()
        try:
            with capture:
                self._interrupter.start(timeout)
                try:
                    result = self.shell.run_cell(source, store_history=False, silent=False)
                finally:
                    self._interrupter.finish()
        except KeyboardInterrupt as exc:  # arrived outside the user's code
            capture.add_exception(exc)
        duration = time.monotonic() - started
        if result is not None:
            failure = result.error_before_exec or result.error_in_exec
            if failure is not None:
                capture.add_exception(failure)
            elif result.result is not None:
                capture.add_result(result.result)
        outputs = self._outputs.finish(cells[-1].outputs)
        status = classify(
            "error" if capture.error_name else "ok",
            capture.error_name,
            timed_out=self._interrupter.timed_out,
            interrupted=self._interrupter.stopped,
        )
        if status.stopped:
            self.stopped = True
        return Execution(cell_id, status, list(outputs), None, duration)

    def _index(self, cell_id: str) -> int:
        for index, block in enumerate(self._blocks):
            if block.id == cell_id:
                return index
        raise CellNotFound(cell_id, "this kernel's run")


def _cell(block: _Block) -> Cell:
    return Cell(block.id, "code", block.source, metadata=dict(block.metadata))


# --- one run -------------------------------------------------------------------------------


@dataclass
class InKernelResult:
    """What :func:`run_in_kernel` returns to the magic."""

    outcome: RunOutcome | None
    code: str
    error: BaseException | None = None
    abandoned: bool = False


def run_in_kernel(
    shell: Any,
    request: RunRequest,
    model: Model,
    *,
    progress: str = "text",
    listener: Callable[[Mapping[str, Any]], None] | None = None,
    model_name: str = "",
    earlier: Mapping[int, str] | None = None,
) -> InKernelResult:
    """Run the loop for ``request`` in this kernel; blocks (serving the loop) until it ends.

    Must be called on the main thread (the shell's thread). ``progress`` is the view shown
    under the cell: ``"text"`` (:class:`TextProgress`, a line for each interesting event) or
    ``"widgets"`` (a widget box, falling back to text when widgets cannot be made); it is
    closed when the run ends. ``listener``, if given, also receives every event on the main
    thread (benchmarks, tests). ``earlier`` is the code earlier runs generated, by the input
    number of their ``%%ci`` cell.
    """
    bridge = MainThreadBridge()
    workspace = InKernelWorkspace(shell, bridge, earlier)
    name = model_name or getattr(model, "name", "the model")
    view: ProgressView = make_view(
        progress, workspace.last_error, name, max_attempts=request.settings.max_attempts
    )

    def show(event: Mapping[str, Any]) -> None:
        view(event)
        if listener is not None:
            listener(event)

    def on_event(event: dict[str, Any]) -> None:
        bridge.post(lambda: show(event))

    run = AgentRun(request, workspace, model, on_event=on_event)
    worker = BackgroundLoop.shared()

    async def main() -> RunOutcome:
        try:
            return await run.run()
        finally:
            bridge.finish()

    future = asyncio.run_coroutine_threadsafe(main(), worker.loop)

    def on_interrupt() -> None:
        workspace.stopped = True
        with contextlib.suppress(RuntimeError):
            worker.loop.call_soon_threadsafe(run.stop)

    try:
        finished = bridge.serve(on_interrupt, on_idle=view.tick)
    finally:
        view.close()
    if not finished:
        future.cancel()
        return InKernelResult(None, workspace.generated_code(), abandoned=True)
    try:
        outcome = future.result(timeout=STOP_GRACE)
    except BaseException as exc:  # a bug of ours, reported by the magic
        return InKernelResult(None, workspace.generated_code(), error=exc)
    return InKernelResult(outcome, workspace.generated_code())


__all__ = [
    "InKernelResult",
    "InKernelWorkspace",
    "MainThreadBridge",
    "OutputCapture",
    "TextProgress",
    "current_input_number",
    "history_cells",
    "run_in_kernel",
]


def _snapshot(root: str | None) -> Snapshot | None:
    """The files of this process's working folder, read here as a kernel reads them."""
    scope = snapshot_scope(root)
    exec(SNAPSHOT_SOURCE, scope)  # noqa: S102 - our own, fixed source
    return parse_snapshot(repr(scope["result"]))
