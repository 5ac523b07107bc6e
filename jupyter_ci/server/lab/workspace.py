"""The Lab workspace: the loop's hands in JupyterLab are the browser tab that owns the run.

Every method is a call to the tab over the server's websocket (see
:mod:`jupyter_ci.server.lab.calls`), naming the notebook by path and cells by id. The tab inserts
cells through the notebook's shared model and runs them in the notebook's kernel with the cell's
output area attached, so outputs, widgets and execution counts behave as if the user ran the cell.

Timers live here, on the server (browsers throttle hidden tabs): a cell's ``timeout`` starts when
the tab reports that the kernel began the cell (its ``execute_input``); on expiry the kernel is
interrupted, if that cell is still running, and the execution is reported ``timed_out``.
Interrupts go through the server's kernel manager when it has the kernel (the same as the
interrupt button), else through the tab.

A page reloaded while a cell runs takes the cell's outputs and reply with it; the kernel goes on
with the cell. The server hears the cell on the kernel's output channel too (:attr:`watch`, see
:mod:`.iopub`), so the run follows it there: it shows the reloaded page the cell's outputs as
they come (``show_outputs``) and reads how the cell ended from what it heard.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from ...agent.figures import figures_expression, parse_figures
from ...agent.files import Snapshot, parse_snapshot, snapshot_expression
from ...agent.fix_context import fix_context_expression, parse_fix_context
from ...agent.variables import inspection_expression, parse_variables
from ...agent.workspace import Cell, Execution, Variable
from ...errors import InternalError, JupyterCIError, KernelDied, NotebookUnavailable
from ...execution.status import KernelFate, classify
from .calls import PAGE_RELOADED, CallFailed, ProgressCallback
from .iopub import HeardCell, IOPubWatch

log = logging.getLogger("jupyter_ci.server")

#: Seconds to wait for the tab to answer a call other than ``run_cell``.
CALL_TIMEOUT = 120.0
#: Seconds to wait for a cell interrupted at its timeout to end before giving up on it.
INTERRUPT_GRACE = 15.0
#: Seconds between two ``show_outputs`` calls of a cell followed after a reload (each carries
#: all its outputs: a cell that prints without pause must not flood the page).
SHOW_EVERY = 0.25

#: ``CallFailure`` codes that mean the notebook or a cell is gone.
NOTEBOOK_GONE = frozenset({"notebook_not_open", "cell_not_found", "notebook_closed"})
#: ``CallFailure`` codes that mean the kernel is gone or was replaced.
KERNEL_GONE = frozenset({"kernel_unavailable", "kernel_restarted", "kernel_dead"})


class Caller(Protocol):
    """What the workspace needs of the channel to the tab."""

    async def call(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        on_progress: ProgressCallback | None = None,
    ) -> dict[str, Any]:
        """Send a call and await its result."""
        ...


class LabWorkspace:
    """The :class:`~jupyter_ci.agent.workspace.Workspace` of a run in JupyterLab."""

    def __init__(
        self,
        caller: Caller,
        *,
        interrupt_kernel: Callable[[], Awaitable[None]] | None = None,
        kernel_alive: Callable[[], bool] | None = None,
        call_timeout: float = CALL_TIMEOUT,
        interrupt_grace: float = INTERRUPT_GRACE,
    ) -> None:
        self.caller = caller
        self._interrupt_kernel = interrupt_kernel
        self._kernel_alive = kernel_alive
        self.call_timeout = call_timeout
        self.interrupt_grace = interrupt_grace
        self._interrupts = 0
        #: The cells this run inserted, as it wrote them (for a reloaded page to put back).
        self._written: dict[str, dict[str, Any]] = {}
        #: The cell code streams into now (its source is the run's until the stream ends).
        self._streaming: str | None = None
        self._lost: JupyterCIError | None = None
        self._lost_fate: KernelFate | None = None
        self._stuck = False
        #: Called when the kernel begins a cell this workspace runs (its ``execute_input``).
        self.on_cell_started: Callable[[], None] | None = None
        #: The run's ear on its kernel's output channel (set by the run manager while the run
        #: is active; None where the server cannot listen to the kernel).
        self.watch: IOPubWatch | None = None

    # --- the Workspace protocol -----------------------------------------------------------

    async def read_cells(self, *, outputs: bool = True) -> list[Cell]:
        """All cells of the notebook, as the tab has them now (code cells without their outputs
        unless ``outputs``: the reply then stays small, whatever the outputs)."""
        reply = await self._call("read_cells", None if outputs else {"outputs": False})
        return [_cell(raw) for raw in reply.get("cells") or []]

    async def insert_cell(
        self,
        after_id: str | None,
        source: str = "",
        metadata: Mapping[str, Any] | None = None,
        *,
        cell_type: str = "code",
    ) -> str:
        """Insert a cell (code, unless ``cell_type`` says otherwise) after ``after_id`` (at
        the top when None); return its id."""
        params: dict[str, Any] = {
            "after_id": after_id,
            "source": source,
            "metadata": dict(metadata or {}),
        }
        if cell_type != "code":
            params["cell_type"] = cell_type
        reply = await self._call("insert_cell", params)
        cell_id = reply.get("cell_id")
        if not isinstance(cell_id, str) or not cell_id:
            raise InternalError("The browser inserted a cell but did not say its id.")
        self._written[cell_id] = {
            "cell_id": cell_id,
            "after_id": after_id,
            "source": source,
            "metadata": dict(metadata or {}),
        }
        if cell_type != "code":
            self._written[cell_id]["cell_type"] = cell_type
        if not source:
            self._streaming = cell_id
        return cell_id

    async def append_source(self, cell_id: str, text: str) -> None:
        """Append streamed code to the cell."""
        await self._call("append_source", {"cell_id": cell_id, "text": text})
        if cell_id in self._written:
            self._written[cell_id]["source"] += text

    async def replace_source(self, cell_id: str, source: str, *, undoable: bool = False) -> None:
        """Replace the cell's source (a fix, or the user's edit in review); ``undoable``: in the
        cell's undo history (the user's cell: Ctrl+Z in its editor brings their code back)."""
        fields: dict[str, Any] = {"cell_id": cell_id, "source": source}
        if undoable:
            fields["undoable"] = True
        await self._call("replace_source", fields)
        self.settled(cell_id)
        if cell_id in self._written:
            self._written[cell_id]["source"] = source

    async def delete_cell(self, cell_id: str) -> None:
        """Delete a generated cell the user did not edit (a ``%%ci``'s earlier answer replaced;
        a cell begun, but empty, at Stop)."""
        await self._call("delete_cell", {"cell_id": cell_id})
        self.settled(cell_id)
        self._written.pop(cell_id, None)

    async def run_cell(
        self, cell_id: str, timeout: float, expression: str | None = None
    ) -> Execution:
        """Run the cell in the notebook's kernel; ``timeout`` counts from the kernel's start.

        The tab reports the kernel's reply as it came; how the cell ended is decided here, by
        :func:`~jupyter_ci.execution.status.classify`, as in every workspace. ``expression``
        goes with the cell's own execute request (no second call for the files snapshot).
        """
        if self._lost_fate is not None:
            return Execution(cell_id, classify(None, kernel=self._lost_fate), [])
        self._check()
        self.settled(cell_id)
        if self._kernel_alive is not None and not self._kernel_alive():
            # Kernels leave the server only when shut down (by the user, or culled when idle).
            return Execution(cell_id, classify(None, kernel=KernelFate.SHUTDOWN), [])
        if self._stuck:
            raise KernelDied(
                "The kernel is still busy with a cell that did not stop when it was interrupted "
                "at its timeout; interrupt or restart the kernel."
            )
        started = asyncio.Event()
        started_at: list[float] = []
        watch = self.watch
        if watch is not None:
            watch.expect()

        def on_progress(progress: Mapping[str, Any]) -> None:
            if progress.get("progress") == "started" and not started.is_set():
                value = progress.get("started_at")
                started_at.append(float(value) if isinstance(value, (int, float)) else time.time())
                started.set()
                if self.on_cell_started is not None:
                    self.on_cell_started()
                msg_id = progress.get("msg_id")
                if watch is not None and isinstance(msg_id, str) and msg_id:
                    watch.attach(msg_id)

        interrupts = self._interrupts
        params: dict[str, Any] = {"cell_id": cell_id}
        if expression is not None:
            params["expression"] = expression
        call = asyncio.ensure_future(self._reply(cell_id, params, on_progress, watch))
        timed_out = False
        try:
            if timeout and timeout > 0:
                timed_out = await self._wait_with_timeout(call, started, timeout)
            reply = await call
        except CallFailed as failure:
            if failure.error_code == "too_large":
                # The cell ran, but its outputs cannot travel: the model is told, and may print
                # less in its fix.
                error = {
                    "output_type": "error",
                    "ename": "OutputTooLarge",
                    "evalue": failure.message,
                    "traceback": [],
                }
                return Execution(cell_id, classify("error", "OutputTooLarge"), [error])
            fate = self._fate_of(failure.error_code)
            if fate is None:
                raise self._translate(failure) from None
            return Execution(cell_id, classify(None, kernel=fate), [], None, _since(started_at))
        except KernelDied:
            if self._lost_fate is None:
                raise
            # The run manager was told the kernel restarted or was shut down: what was asked.
            status = classify(None, kernel=self._lost_fate)
            return Execution(cell_id, status, [], None, _since(started_at))
        finally:
            if not call.done():
                call.cancel()
        return self._execution(cell_id, reply, timed_out, self._interrupts > interrupts, started_at)

    async def _reply(
        self,
        cell_id: str,
        params: Mapping[str, Any],
        on_progress: ProgressCallback,
        watch: IOPubWatch | None,
    ) -> dict[str, Any]:
        """The ``run_cell`` call's reply; after a reload of the page that received it, the cell
        as the kernel's output channel told it (when its request is known: the tab said
        ``started`` with its msg_id)."""
        try:
            return await self.caller.call("run_cell", params, on_progress=on_progress)
        except CallFailed as failure:
            heard = watch.heard if watch is not None else None
            if failure.error_code != PAGE_RELOADED or heard is None:
                raise
        return await self._follow(cell_id, heard)

    async def _follow(self, cell_id: str, heard: HeardCell) -> dict[str, Any]:
        """Follow a running cell whose page was reloaded: show the reloaded page its outputs as
        they come (at most every ``SHOW_EVERY`` seconds), and once the kernel is done with it
        answer as the tab would have, with the kernel's facts (no ``execute_reply``: it went to
        the page that sent the request; an ``error`` output means the cell failed)."""
        shown: int | None = None
        showing = True
        last = float("-inf")
        while True:
            version = heard.version
            if showing and version != shown:
                pause = last + SHOW_EVERY - time.monotonic()
                if pause > 0 and not heard.ended:
                    await asyncio.sleep(pause)
                    continue
                shown, last = version, time.monotonic()
                showing = await self._show(cell_id, heard)
                continue
            if heard.ended:
                break
            await heard.changed(version)
        if heard.fate is not None:
            code = "kernel_restarted" if heard.fate is KernelFate.RESTARTED else "kernel_dead"
            raise CallFailed("run_cell", {"code": code, "message": "The kernel went away."})
        return {
            "reply_status": "error" if heard.errored else "ok",
            "outputs": [dict(output) for output in heard.outputs],
            "execution_count": heard.execution_count,
            "started_at": heard.started_at,
        }

    async def _show(self, cell_id: str, heard: HeardCell) -> bool:
        """Show the reloaded page the cell's outputs as heard; False when it cannot (then the
        run still follows the cell to its end)."""
        try:
            await self._call(
                "show_outputs",
                {
                    "cell_id": cell_id,
                    "outputs": heard.outputs,
                    "execution_count": heard.execution_count,
                    "running": not heard.ended,
                },
            )
        except JupyterCIError as error:
            log.info("jupyter-ci: the reloaded page does not show cell %s: %s", cell_id, error)
            return False
        return True

    async def inspect_variables(self) -> list[Variable]:
        """The user's variables, from a silent request the tab sends to the kernel."""
        text = await self._evaluate(inspection_expression())
        if not text:
            return []
        try:
            return parse_variables(text)
        except ValueError:
            return []

    async def snapshot_files(self, root: str | None) -> Snapshot | None:
        """The kernel's working folder's files, from a silent request the tab sends."""
        return parse_snapshot(await self._evaluate(snapshot_expression(root)))

    async def fix_context(self, ename: str, evalue: str, code: str) -> list[str]:
        """What the failure is about, from a silent request the tab sends."""
        return parse_fix_context(await self._evaluate(fix_context_expression(ename, evalue, code)))

    async def figure_notes(self, read: bool) -> list[str]:
        """The figures the kernel displayed, in words, from a silent request the tab sends."""
        return parse_figures(await self._evaluate(figures_expression(read)))

    async def _evaluate(self, expression: str) -> str:
        """The text/plain value of ``expression`` in the kernel ('' when it could not be had)."""
        try:
            reply = await self._call("evaluate", {"expression": expression})
        except (NotebookUnavailable, KernelDied):
            raise
        except JupyterCIError:
            return ""
        text = reply.get("text")
        return text if isinstance(text, str) else ""

    async def interrupt(self) -> None:
        """Interrupt the kernel (Stop): through the server's kernel manager when it can."""
        self._interrupts += 1
        await self._interrupt()

    # --- what an outside agent's run also asks of the tab -----------------------------------

    async def run_options(self) -> dict[str, Any]:
        """The user's run options in the tab (their JupyterLab settings for jupyter-ci)."""
        reply = await self._call("run_options")
        options = reply.get("options")
        return dict(options) if isinstance(options, Mapping) else {}

    async def save(self) -> None:
        """Save the notebook in the tab (as the user's Save does)."""
        await self._call("save")

    # --- what the run manager tells it -----------------------------------------------------

    def settled(self, cell_id: str) -> None:
        """The cell's code is complete (no longer streaming): the user may edit it now."""
        if self._streaming == cell_id:
            self._streaming = None

    def restore_params(self) -> dict[str, Any]:
        """The ``restore_cells`` call's parameters: the run's cells as it wrote them, in the
        order it inserted them, and the cell being streamed into (if any)."""
        return {
            "cells": [dict(cell) for cell in self._written.values()],
            "streaming_cell_id": self._streaming,
        }

    def lost(self, error: JupyterCIError, fate: KernelFate | None = None) -> None:
        """The kernel or the tab is gone for good: every later call raises ``error``.

        ``fate`` says what became of the kernel when that is why (it was restarted or shut
        down): a cell running then ends with the status that says so.
        """
        self._lost = error
        self._lost_fate = fate
        if self.watch is not None and fate is not None:
            self.watch.end(fate)  # a cell followed after a reload ends with the kernel

    # --- internals --------------------------------------------------------------------------

    def _check(self) -> None:
        if self._lost is not None:
            raise self._lost

    async def _interrupt(self) -> None:
        if self._interrupt_kernel is not None:
            await self._interrupt_kernel()
            return
        await self._call("interrupt")

    async def _call(self, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        self._check()
        try:
            return await asyncio.wait_for(self.caller.call(method, params), self.call_timeout)
        except CallFailed as failure:
            raise self._translate(failure) from None
        except asyncio.TimeoutError:
            raise NotebookUnavailable(
                f"The browser did not answer ({method}) within {self.call_timeout:g} s.",
                hint="Reload the JupyterLab tab and ask again.",
            ) from None

    async def _wait_with_timeout(
        self, call: asyncio.Future[dict[str, Any]], started: asyncio.Event, timeout: float
    ) -> bool:
        """Wait for the cell to start, then up to ``timeout``; interrupt it if still running.

        Returns whether the cell timed out. Waiting for the start has no limit: a cell queued
        behind another execution has not begun yet.
        """
        begun: asyncio.Future[Any] = asyncio.ensure_future(started.wait())
        watched: set[asyncio.Future[Any]] = {call, begun}
        try:
            await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
        finally:
            begun.cancel()
        if call.done():
            return False
        done, _ = await asyncio.wait({call}, timeout=timeout)
        if done:
            return False
        await self._interrupt()
        done, _ = await asyncio.wait({call}, timeout=self.interrupt_grace)
        if not done:
            self._stuck = True
            raise KernelDied(
                f"A cell that ran past its {timeout:g} s timeout did not stop when interrupted."
            )
        return True

    def _fate_of(self, code: str) -> KernelFate | None:
        """What a tab's failure code says became of the kernel (None: not the kernel)."""
        if code not in KERNEL_GONE:
            return None
        if self._kernel_alive is not None and not self._kernel_alive():
            return KernelFate.SHUTDOWN
        if code == "kernel_restarted":
            return KernelFate.RESTARTED
        if code == "kernel_dead":
            return KernelFate.DIED
        return KernelFate.SHUTDOWN  # kernel_unavailable: the notebook's kernel went away

    def _translate(self, failure: CallFailed) -> JupyterCIError:
        if failure.error_code == PAGE_RELOADED:
            return NotebookUnavailable(failure.message, hint=failure.hint)
        if failure.error_code in NOTEBOOK_GONE:
            return NotebookUnavailable(failure.message)
        if failure.error_code in KERNEL_GONE:
            return KernelDied(failure.message)
        return InternalError(f"The browser could not {failure.method}: {failure.message}")

    @staticmethod
    def _execution(
        cell_id: str,
        reply: Mapping[str, Any],
        timed_out: bool,
        interrupted: bool,
        started_at: list[float],
    ) -> Execution:
        outputs = [dict(out) for out in reply.get("outputs") or [] if isinstance(out, Mapping)]
        error_name = next(
            (out.get("ename") for out in outputs if out.get("output_type") == "error"), None
        )
        reply_status = reply.get("reply_status")
        status = classify(
            reply_status if isinstance(reply_status, str) else None,
            str(error_name) if error_name is not None else None,
            timed_out=timed_out,
            interrupted=interrupted,
        )
        begun = reply.get("started_at")
        start = [float(begun)] if isinstance(begun, (int, float)) else started_at
        count = reply.get("execution_count")
        text = reply.get("text")
        return Execution(
            cell_id,
            status,
            outputs,
            count if isinstance(count, int) else None,
            _since(start),
            text if isinstance(text, str) else None,
        )


def _since(started_at: list[float]) -> float | None:
    """Seconds since the kernel began the cell (None if it never did)."""
    return max(0.0, time.time() - started_at[0]) if started_at else None


def _cell(raw: Mapping[str, Any]) -> Cell:
    cell_type = str(raw.get("cell_type", "code"))
    outputs = [dict(out) for out in raw.get("outputs") or [] if isinstance(out, Mapping)]
    count = raw.get("execution_count")
    return Cell(
        str(raw.get("id", "")),
        cell_type,
        str(raw.get("source", "")),
        outputs,
        count if isinstance(count, int) else None,
        dict(raw.get("metadata") or {}),
    )
