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

Outputs are captured while they are shown: ``sys.stdout``/``sys.stderr`` are teed, the display
publisher is wrapped, the execute result is formatted with the shell's display formatter, and
tracebacks are taken over (``shell._showtraceback``, where both ``showtraceback`` and
``showsyntaxerror`` end) so a failed attempt becomes an ``error`` output for the model but is
shown to the user only as a line of text: papermill and nbclient do not fail a notebook whose fix
succeeded.

The per-block timeout sends SIGINT to the kernel's own process (``interrupt_main`` does not break
``time.sleep``); the timer only fires while that block is still running.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import os
import queue
import signal
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..agent.loop import AgentRun, RunOutcome, RunRequest
from ..agent.variables import INSPECT_SOURCE, parse_variables
from ..agent.workspace import Cell, Execution, Variable
from ..errors import CellNotFound, StoppedByUser
from ..execution.status import CellStatus
from ..models.base import Model
from .inkernel_progress import ProgressView, TextProgress, make_view

T = TypeVar("T")

#: Characters of one stream kept per execution (the digest for the model cuts far shorter).
STREAM_LIMIT = 200_000
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


class _LoopThread:
    """One asyncio event loop on a daemon thread, shared by every run in this process.

    Reused rather than made per run: HTTP clients cached by litellm are bound to the loop they
    were made on.
    """

    _lock = threading.Lock()
    _instance: _LoopThread | None = None

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._main, name="jupyter-ci-loop", daemon=True)
        self.thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    @classmethod
    def get(cls) -> _LoopThread:
        with cls._lock:
            if cls._instance is None or not cls._instance.thread.is_alive():
                cls._instance = cls()
            return cls._instance


# --- output capture ------------------------------------------------------------------------


class _Tee:
    """A text stream that records what is written and passes it on."""

    def __init__(self, stream: Any, name: str, sink: Callable[[str, str], None]) -> None:
        self._stream = stream
        self._name = name
        self._sink = sink

    def write(self, text: str) -> int:
        if isinstance(text, str) and text:
            self._sink(self._name, text)
        result: int = self._stream.write(text)
        return result

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _json_data(data: Mapping[str, Any]) -> dict[str, Any]:
    """A mime bundle with bytes made base64 text, as nbformat stores them."""
    return {
        mime: base64.b64encode(value).decode("ascii") if isinstance(value, bytes) else value
        for mime, value in data.items()
    }


_MISSING = object()


class OutputCapture:
    """Record nbformat-like outputs of code run through the shell while the user sees them.

    Failed runs are recorded as an ``error`` output but not shown (the progress line says what
    happened in one line of text).
    """

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self.outputs: list[dict[str, Any]] = []
        self.error: dict[str, Any] | None = None
        self._saved: list[tuple[Any, str, Any]] = []

    # the hooks

    def _stream(self, name: str, text: str) -> None:
        last = self.outputs[-1] if self.outputs else None
        if last is not None and last["output_type"] == "stream" and last["name"] == name:
            if len(last["text"]) < STREAM_LIMIT:
                last["text"] = (last["text"] + text)[:STREAM_LIMIT]
            return
        self.outputs.append({"output_type": "stream", "name": name, "text": text[:STREAM_LIMIT]})

    def _publish(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def publish(data: Any, metadata: Any = None, *args: Any, **kwargs: Any) -> Any:
            if isinstance(data, Mapping) and not kwargs.get("update"):
                with contextlib.suppress(Exception):
                    self.outputs.append(
                        {
                            "output_type": "display_data",
                            "data": _json_data(data),
                            "metadata": dict(metadata or {}),
                        }
                    )
            return original(data, metadata, *args, **kwargs)

        return publish

    def _showtraceback(self, etype: Any, evalue: Any, stb: Any) -> None:
        self.error = {
            "output_type": "error",
            "ename": getattr(etype, "__name__", str(etype)),
            "evalue": str(evalue),
            "traceback": [str(line) for line in stb] if isinstance(stb, list) else [str(stb)],
        }

    # installing and removing them

    def _set(self, owner: Any, name: str, value: Any) -> None:
        self._saved.append((owner, name, owner.__dict__.get(name, _MISSING)))
        setattr(owner, name, value)

    def __enter__(self) -> OutputCapture:
        self._saved_streams = (sys.stdout, sys.stderr)
        sys.stdout = _Tee(sys.stdout, "stdout", self._stream)
        sys.stderr = _Tee(sys.stderr, "stderr", self._stream)
        display_pub = getattr(self.shell, "display_pub", None)
        if display_pub is not None:
            self._set(display_pub, "publish", self._publish(display_pub.publish))
        self._set(self.shell, "_showtraceback", self._showtraceback)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.stdout, sys.stderr = self._saved_streams
        for owner, name, before in reversed(self._saved):
            if before is _MISSING:
                with contextlib.suppress(AttributeError):
                    delattr(owner, name)
            else:
                setattr(owner, name, before)
        self._saved.clear()

    def add_result(self, value: Any) -> None:
        """Record the cell's result (already shown by the display hook) as an execute_result."""
        try:
            data, metadata = self.shell.display_formatter.format(value)
        except Exception:
            data, metadata = {"text/plain": repr(value)}, {}
        self.outputs.append(
            {
                "output_type": "execute_result",
                "data": _json_data(data),
                "metadata": dict(metadata or {}),
                "execution_count": None,
            }
        )

    def add_exception(self, exc: BaseException) -> None:
        """Record an exception the shell did not show through ``_showtraceback``."""
        if self.error is None:
            self.error = {
                "output_type": "error",
                "ename": type(exc).__name__,
                "evalue": str(exc),
                "traceback": traceback.format_exception(type(exc), exc, exc.__traceback__),
            }


class _TimeoutGuard:
    """Send SIGINT to this process if the block is still running when ``timeout`` expires."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.fired = False
        self._running = False
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None

    def start(self) -> None:
        self._running = True
        if self.timeout and self.timeout > 0:
            self._timer = threading.Timer(self.timeout, self._fire)
            self._timer.daemon = True
            self._timer.start()

    def _fire(self) -> None:
        with self._lock:
            if self._running:
                self.fired = True
                os.kill(os.getpid(), signal.SIGINT)

    def finish(self) -> None:
        with self._lock:
            self._running = False
        if self._timer is not None:
            self._timer.cancel()


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


def _is_ci_cell(text: str) -> bool:
    return text.startswith("%%ci") or "run_cell_magic('ci'" in text


def current_input_number(shell: Any) -> int | None:
    """The input number of the ``%%ci`` cell running now (None when it is not in the history)."""
    entries = _inputs(shell)
    if entries and isinstance(entries[-1], str) and _is_ci_cell(entries[-1].strip()):
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
        if _is_ci_cell(text):
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
        self._guard: _TimeoutGuard | None = None
        self._running = False

    # the generated blocks, for the magic

    def generated(self) -> list[Cell]:
        """The generated code blocks, in notebook order."""
        return [_cell(block) for block in self._blocks if block.generated]

    def generated_code(self) -> str:
        """All generated blocks joined, as the code to offer as the next cell."""
        sources = [cell.source.strip("\n") for cell in self.generated()]
        return "\n\n".join(source for source in sources if source.strip())

    # the Workspace protocol

    async def read_cells(self) -> list[Cell]:
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

    async def replace_source(self, cell_id: str, source: str) -> None:
        self._blocks[self._index(cell_id)].source = source

    async def run_cell(self, cell_id: str, timeout: float) -> Execution:
        block = self._blocks[self._index(cell_id)]
        source = block.source
        execution = await self.bridge.call(lambda: self.execute(cell_id, source, timeout))
        if execution.error is not None:
            self.last_error[cell_id] = execution.error
        return execution

    async def inspect_variables(self) -> list[Variable]:
        return await self.bridge.call(self.variables)

    async def interrupt(self) -> None:
        """Stop: no further block runs.

        In the kernel the only Stop is the user's own interrupt (SIGINT), which has already
        reached the running code by the time the loop asks, so no second signal is sent.
        """
        self.stopped = True

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
        capture = OutputCapture(self.shell)
        guard = _TimeoutGuard(timeout)
        result: Any = None
        interrupted = False
        started = time.monotonic()
        try:
            with capture:
                self._running = True
                guard.start()
                try:
                    result = self.shell.run_cell(source, store_history=False, silent=False)
                finally:
                    self._running = False
                    guard.finish()
        except KeyboardInterrupt as exc:  # arrived outside the user's code
            interrupted = True
            capture.add_exception(exc)
        duration = time.monotonic() - started
        if result is not None:
            failure = result.error_before_exec or result.error_in_exec
            if failure is not None:
                capture.add_exception(failure)
            elif result.result is not None:
                capture.add_result(result.result)
        outputs = list(capture.outputs)
        if capture.error is not None:
            outputs.append(capture.error)
        ename = capture.error["ename"] if capture.error is not None else None
        if guard.fired:
            status = CellStatus.TIMED_OUT
        elif interrupted or ename == "KeyboardInterrupt":
            status = CellStatus.ABORTED
            self.stopped = True
        elif capture.error is not None:
            status = CellStatus.ERROR
        else:
            status = CellStatus.OK
        return Execution(cell_id, status, outputs, None, duration)

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
    worker = _LoopThread.get()

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
