"""The agent loop: generate → insert → run → read back → fix, written once.

It acts only through a :class:`~jupyter_ci.agent.workspace.Workspace` and a
:class:`~jupyter_ci.models.base.Model`, and ends in exactly one of done, failed or stopped, with
a reason. ``max_attempts`` counts every try of a cell, ``max_steps`` counts generated cells, the
token and cost caps cover the whole run.

The loop is the only producer of a run's facts (ARCHITECTURE.md, "The run record"): it emits a
protocol event (``jupyter_ci/schema/protocol.schema.json``) for every change to a generated
cell's source (the streamed code once complete, a fix, the user's edit in review, the model's
other proposal after a Reject), every rejection (as the user's message), every execution and
how it ended, and the outcome with the answer and the status line. Whoever records or shows a
run reads these events and rebuilds nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..errors import (
    BadCodeBlock,
    BudgetExceeded,
    CellError,
    CellTimeout,
    ConfigError,
    Disconnected,
    InternalError,
    JupyterCIError,
    KernelDied,
    ModelError,
    NotebookUnavailable,
    StoppedByUser,
)
from ..execution.status import CellStatus, classify
from ..models.base import Model, ModelReply
from ..settings import Settings
from .cells import RunCells
from .digest import Digest, digest_outputs, new_nonce
from .extract import extract_code
from .files import FileWatch
from .messages import Conversation, text_of
from .model_calls import ModelCalls, code_of
from .outcome import RunOutcome, live_line, rejection_text
from .packages import missing_package
from .prompts import render
from .states import RunState, RunStateMachine
from .streaming import FenceStream, Piece, code_pieces
from .workspace import Execution, Workspace

#: Receives each run event (a dict matching the protocol's RunEvent).
EventCallback = Callable[[dict[str, Any]], None]

#: Characters of one execution's digest shown to the model.
DIGEST_CHARS = 4000
#: After Stop, the kernel is interrupted again every this many seconds while the cell still
#: runs (an interrupt that reached the kernel before the cell's code, or code that catches
#: KeyboardInterrupt), at most :data:`STOP_INTERRUPTS` times in all; a cell still running after
#: that (or a request the kernel dropped: an interrupt that lands before the cell's code starts
#: can end ipykernel's handling of it with no reply) is left, and the run ends stopped.
STOP_INTERRUPT_EVERY = 2.0
STOP_INTERRUPTS = 5
#: How long tidying a half-written cell may take after Stop or a cut stream (seconds).
UNFINISHED_TIMEOUT = 10.0
#: What the run record says of a cell the run stopped waiting for.
ABANDONED = "[the cell did not end after Stop interrupted it; the run stopped without waiting]"


@dataclass(frozen=True)
class ReviewDecision:
    """The user's answer to a cell awaiting approval: ``run`` (maybe edited) or ``reject``."""

    decision: str
    source: str | None = None


#: Asked, in review mode, for each new or fixed cell: (cell id, source, diff) → decision.
Approver = Callable[[str, str, str], Awaitable[ReviewDecision]]


@dataclass(frozen=True)
class RunRequest:
    """What to do: the request, its settings, and where in the notebook."""

    prompt: str
    settings: Settings
    #: Generated cells go after this cell (the ``%%ci`` cell); None: at the end of the notebook.
    anchor_id: str | None = None
    #: Earlier messages of this notebook's conversation (user/assistant turns).
    history: Sequence[dict[str, Any]] = ()
    #: "Fix with jupyter-ci": the cell whose code the run fixes in place (no new cells).
    fix_cell_id: str | None = None
    #: More context the user attached (files they picked), shown to the model as data.
    attachments: str = ""
    #: Cells the user attached (by id): their code and outputs go with the request.
    attached_cells: tuple[str, ...] = ()
    #: Notices the notebook's conversation already holds: said once, not again every run.
    said: frozenset[str] = frozenset()


class _NoStream:
    """Marker: this model call must not stream code into a new cell (fixes replace a cell)."""


NO_STREAM = _NoStream()


class _Finish(Exception):
    """Internal: end the run now with this state and reason."""

    def __init__(
        self,
        state: RunState,
        reason: str,
        error: JupyterCIError | None = None,
        answer: str = "",
    ) -> None:
        super().__init__(reason)
        self.state = state
        self.reason = reason
        self.error = error
        self.answer = answer


class _Rejected(Exception):
    """Internal: the user rejected the cell awaiting approval."""


#: How a run ends when a cell ends with the kernel gone and nobody asked for it.
_KERNEL_ENDS: dict[CellStatus, tuple[RunState, str, str]] = {
    CellStatus.KERNEL_DIED: (RunState.FAILED, "kernel_died", "The kernel died while the cell ran."),
    CellStatus.KERNEL_SHUTDOWN: (
        RunState.STOPPED,
        "kernel_shutdown",
        "The kernel was shut down while the cell ran.",
    ),
    CellStatus.KERNEL_RESTARTED: (
        RunState.STOPPED,
        "kernel_restarted",
        "The kernel restarted while the cell ran.",
    ),
}


class AgentRun:
    """One run of the loop. Create it, ``await run()``; ``stop()`` ends it from outside."""

    def __init__(
        self,
        request: RunRequest,
        workspace: Workspace,
        model: Model,
        *,
        run_id: str | None = None,
        on_event: EventCallback | None = None,
        approve: Approver | None = None,
        use_tools: bool = False,
    ) -> None:
        self.request = request
        self.settings = request.settings
        self.workspace = workspace
        self.model = model
        self.run_id = run_id or uuid.uuid4().hex
        self.on_event = on_event
        self.approve = approve
        self.machine = RunStateMachine()
        self.nonce = new_nonce()
        self.conversation = Conversation(
            model,
            self.settings,
            self.nonce,
            request.prompt,
            tuple(dict(m) for m in request.history),
            request.attachments,
            request.attached_cells,
        )
        self.calls = ModelCalls(
            model,
            self.settings,
            self.conversation,
            use_tools=use_tools,
            emit=self.emit,
            notice=self._notice,
        )
        self.cells = RunCells(workspace, self.run_id, request.anchor_id, self.emit)
        self.files = FileWatch(workspace, self.emit)
        self.attempts = 0
        self.notices: list[str] = []
        self._seq = 0
        self._stopping = False
        self._stop_reason = "user"
        self._stop_error: JupyterCIError | None = None
        self._executing = False
        self._cell_task: asyncio.Future[Execution] | None = None
        self._interrupt_task: asyncio.Future[None] | None = None
        self._attempt: int | None = None
        self._started = time.monotonic()

    # --- control ------------------------------------------------------------------------------

    def stop(self, reason: str = "user", error: JupyterCIError | None = None) -> None:
        """Stop the run: abort the model stream and interrupt the kernel if a cell is running.

        ``reason`` is what was asked, and the stopped run's reason: ``user`` (Stop, an
        interrupt), ``disconnected``, ``kernel_restarted``, ``kernel_shutdown`` or
        ``server_shutdown``. A run stopped before it started ends at once when :meth:`run` is
        called. ``error`` says what happened (default: stopped by the user).
        """
        if self.machine.terminal or self._stopping:
            return
        self._stopping = True
        self._stop_reason = reason
        self._stop_error = error
        self.calls.cancel()
        if self._executing:
            self._interrupt_task = asyncio.ensure_future(self._interrupt_until_stopped())

    async def _interrupt_until_stopped(self) -> None:
        """Interrupt the running cell, again while it keeps running (see STOP_INTERRUPT_EVERY)."""
        for _ in range(STOP_INTERRUPTS):
            await self.workspace.interrupt()
            await asyncio.sleep(STOP_INTERRUPT_EVERY)
            if not self._executing:
                return
        if self._cell_task is not None:
            self._cell_task.cancel()  # stop waiting: the run ends stopped (see _execute)

    # --- events -------------------------------------------------------------------------------

    def emit(self, event_type: str, **fields: Any) -> None:
        """Send one run event (with run id, sequence number and time) to the listener."""
        self._seq += 1
        event = {"run_id": self.run_id, "seq": self._seq, "time": time.time(), "type": event_type}
        event.update(fields)
        if self.on_event is not None:
            self.on_event(event)

    def _move(self, state: RunState, reason: str = "") -> None:
        if self.machine.state is state:
            return
        self.machine.advance(state, reason)
        attempt = self._attempt
        if state is RunState.FIXING and attempt is not None:
            attempt += 1  # the attempt being written
        if state is RunState.GENERATING:
            attempt = None
        max_attempts = self.settings.max_attempts if attempt is not None else None
        text = live_line(state, attempt, max_attempts, reason)
        self.emit("state", state=state.value, reason=reason, text=text)

    def _notice(self, text: str) -> None:
        if text in self.request.said or text in self.notices:
            return  # said once per conversation is enough
        self.notices.append(text)
        self.emit("message", role="notice", text=text)

    # --- the loop -----------------------------------------------------------------------------

    async def run(self) -> RunOutcome:
        """Run to the end; never raises for the run's own failures (they are in the outcome)."""
        self._started = time.monotonic()
        answer = ""
        try:
            if self._stopping:
                raise StoppedByUser()
            self._check_mode()
            self._move(RunState.GENERATING)
            if self.request.fix_cell_id is not None:
                answer = await self._fix(self.request.fix_cell_id)
                raise _Finish(RunState.DONE, "fixed")
            messages = await self.conversation.opening(self.workspace, self.request.anchor_id)
            after_id = await self._insertion_point()
            step = 0
            while True:
                reply, code, cell_id = await self._generate(messages, stream_after=after_id)
                messages.append({"role": "assistant", "content": reply.text or code or ""})
                if code is None:
                    raise self._answered(reply, "answered")
                step += 1
                if cell_id is None:
                    cell_id = await self._insert(after_id, code, step)
                after_id = cell_id
                if self.settings.mode == "insert":
                    raise _Finish(RunState.DONE, "inserted")
                _, digest = await self._run_until_fixed(cell_id, code, messages)
                if step >= self.settings.max_steps:
                    raise _Finish(RunState.DONE, "max_steps")
                messages.append(
                    self.conversation.user_message(
                        render(
                            "cell_succeeded",
                            step=step,
                            max_steps=self.settings.max_steps,
                            digest=self.conversation.wrap(digest.text),
                        ),
                        digest,
                    )
                )
                self._move(RunState.GENERATING)
        except _Finish as finish:
            return self._end(finish.state, finish.reason, finish.error, finish.answer or answer)
        except asyncio.CancelledError:
            if not self._stopping:
                raise
            return self._end_stopped(answer)
        except StoppedByUser as err:
            return self._end_stopped(answer, err)
        except KernelDied as err:
            if self._stopping:
                return self._end_stopped(answer, err)
            return self._end(RunState.FAILED, "kernel_died", err, answer)
        except Disconnected as err:
            return self._end(RunState.STOPPED, "disconnected", err, answer)
        except NotebookUnavailable as err:
            return self._end(RunState.FAILED, "notebook_unavailable", err, answer)
        except BudgetExceeded as err:
            return self._end(RunState.FAILED, "budget_exceeded", err, answer)
        except ModelError as err:
            return self._end(RunState.FAILED, "model_error", err, answer)
        except ConfigError as err:
            return self._end(RunState.FAILED, "config_error", err, answer)
        except BadCodeBlock as err:
            return self._end(RunState.FAILED, "bad_code_block", err, answer)
        except Exception as exc:  # a bug of ours: reported, never hidden
            error = InternalError(f"{type(exc).__name__}: {exc}")
            return self._end(RunState.FAILED, "internal_error", error, answer)

    def _check_mode(self) -> None:
        if self.settings.mode == "review" and self.approve is None:
            raise ConfigError(
                "Review mode needs a frontend to approve cells (the JupyterLab panel).",
                hint="Use --mode auto or --no-run here.",
                option="mode",
            )

    async def _insertion_point(self) -> str | None:
        if self.request.anchor_id is not None:
            return self.request.anchor_id
        cells = await self.workspace.read_cells()
        return cells[-1].id if cells else None

    async def opening_messages(self) -> list[dict[str, Any]]:
        """The messages of the run's first model call (what a preview shows the user)."""
        if self.request.fix_cell_id is not None:
            messages, _ = await self.conversation.fix_opening(
                self.workspace, self.request.fix_cell_id, self._digest
            )
            return messages
        return await self.conversation.opening(self.workspace, self.request.anchor_id)

    async def _fix(self, cell_id: str) -> str:
        """Fix one existing cell in place: the model sees its code and outputs, the fix
        replaces its source (the diff is shown) and it runs, within ``max_attempts``.

        Returns the model's prose, if it wrote any.
        """
        messages, target = await self.conversation.fix_opening(
            self.workspace, cell_id, self._digest
        )
        self._move(RunState.FIXING)
        reply, fixed, _ = await self._generate(messages, stream_after=NO_STREAM)
        messages.append({"role": "assistant", "content": reply.text or fixed or ""})
        if fixed is None:
            raise BadCodeBlock("The model answered without a fix for the cell.", reply.text)
        self.cells.adopt(cell_id)
        await self.cells.rewrite(cell_id, target.source, fixed, 1, cause="fix")
        if self.settings.mode != "insert":
            await self._run_until_fixed(cell_id, fixed, messages)
        return _prose(reply.text)

    async def _run_until_fixed(
        self, cell_id: str, code: str, messages: list[dict[str, Any]]
    ) -> tuple[Execution, Digest]:
        """Run the cell; on failure ask for fixes until it succeeds or attempts run out."""
        attempt = 1
        source = code
        rejections = 0
        installed: set[str] = set()
        approved = False
        while True:
            ran = False
            if self.settings.mode == "review" and not approved:
                try:
                    source, ran = await self._review(cell_id, source, attempt)
                except _Rejected:
                    rejections += 1
                    source = await self._propose_instead(
                        cell_id, source, messages, rejections, attempt
                    )
                    continue
            approved = False
            if ran:
                execution, digest = await self._taken_from_notebook(cell_id, attempt)
            else:
                execution, digest = await self._execute(cell_id, attempt)
            if execution.status is CellStatus.OK:
                return execution, digest
            missing = missing_package(execution)
            if missing is not None and missing not in installed:
                await self._install(missing, cell_id)
                installed.add(missing)
                approved = True  # the same code again, now that the package is there
                continue
            if attempt >= self.settings.max_attempts:
                raise _Finish(RunState.FAILED, "max_attempts", self._error_of(execution))
            self._move(RunState.FIXING)
            template = (
                "cell_timed_out" if execution.status is CellStatus.TIMED_OUT else "cell_failed"
            )
            extra = (
                {"seconds": f"{self.settings.timeout:g}"} if template == "cell_timed_out" else {}
            )
            prompt = render(
                template,
                attempt=attempt,
                max_attempts=self.settings.max_attempts,
                digest=self.conversation.wrap(digest.text),
                **extra,
            )
            messages.append(self.conversation.user_message(prompt, digest))
            reply, fixed, _ = await self._generate(messages, stream_after=NO_STREAM)
            messages.append({"role": "assistant", "content": reply.text or fixed or ""})
            if fixed is None:
                raise BadCodeBlock(
                    "The model answered without a fix for the failing cell.", reply.text
                )
            attempt += 1
            await self.cells.rewrite(cell_id, source, fixed, attempt, cause="fix")
            source = fixed

    async def _execute(self, cell_id: str, attempt: int) -> tuple[Execution, Digest]:
        """Run the cell once; a cell stopped, or ended with its kernel, ends the run here."""
        if self._stopping:
            raise StoppedByUser()
        self._attempt = attempt
        self._move(RunState.EXECUTING)
        self.attempts += 1
        self.emit(
            "attempt", cell_id=cell_id, attempt=attempt, max_attempts=self.settings.max_attempts
        )
        await self.files.start()
        self.emit("execution_started", cell_id=cell_id, attempt=attempt)
        self._executing = True
        self._cell_task = asyncio.ensure_future(
            self.workspace.run_cell(cell_id, self.settings.timeout)
        )
        try:
            execution = await self._cell_task
        except asyncio.CancelledError:
            if not self._stopping:
                raise
            self.emit(
                "execution_finished",
                cell_id=cell_id,
                status=CellStatus.INTERRUPTED.value,
                execution_count=None,
                digest=ABANDONED,
                duration=None,
            )
            raise StoppedByUser() from None
        finally:
            self._executing = False
            self._cell_task = None
        digest = self._digest(execution.outputs)
        self.emit(
            "execution_finished",
            cell_id=cell_id,
            status=execution.status.value,
            execution_count=execution.execution_count,
            digest=digest.text,
            duration=execution.duration,
        )
        self._end_if_over(execution.status)
        await self.files.check()
        return execution, digest

    def _end_if_over(self, status: CellStatus) -> None:
        """End the run when the cell was stopped, or its kernel went away; else go on.

        The reason is what was asked (Stop, a restart, a shutdown, the tab gone) when something
        was; otherwise what the cell's status says.
        """
        if self._stopping:
            raise _Finish(RunState.STOPPED, self._stop_reason, self._stop_error or StoppedByUser())
        if status.stopped:
            raise _Finish(RunState.STOPPED, "user", StoppedByUser())
        if status.kernel_gone:
            state, reason, detail = _KERNEL_ENDS[status]
            raise _Finish(state, reason, KernelDied(detail))

    def _digest(self, outputs: list[dict[str, Any]]) -> Digest:
        """What the model is shown of a cell's outputs (only its errors without share_outputs)."""
        if not self.settings.share_outputs:
            errors = [out for out in outputs if out.get("output_type") == "error"]
            digest = digest_outputs(errors, max_chars=DIGEST_CHARS, vision=False)
            note = "[outputs are not shared with the model; only errors are shown]"
            return replace(digest, text=f"{note}\n{digest.text}".rstrip())
        return digest_outputs(
            outputs, max_chars=DIGEST_CHARS, vision=getattr(self.model, "vision", False)
        )

    def _error_of(self, execution: Execution) -> JupyterCIError:
        if execution.status is CellStatus.TIMED_OUT:
            return CellTimeout(self.settings.timeout)
        error = execution.error
        if error is None:
            return CellError("Error", "the cell failed without an error output")
        return CellError.from_output(error)

    async def _review(self, cell_id: str, source: str, attempt: int) -> tuple[str, bool]:
        """Wait for the user's decision on the cell: its code to run (their edit, if they made
        one) and whether they ran it themselves already (decision ``ran``)."""
        assert self.approve is not None
        self._move(RunState.AWAITING_APPROVAL)
        decision = await self.approve(cell_id, source, "")
        if decision.decision == "reject":
            # The user's word, kept in the conversation so later requests know it too.
            self.emit("message", role="user", text=rejection_text(source))
            raise _Rejected()
        if decision.source is not None and decision.source != source:
            await self.cells.rewrite(cell_id, source, decision.source, attempt, cause="edited")
            return decision.source, decision.decision == "ran"
        return source, decision.decision == "ran"

    def _answered(self, reply: ModelReply, reason: str) -> _Finish:
        """The end of the run with the model's prose as its answer (sent as a message)."""
        answer = reply.text.strip()
        if answer:
            self.emit("message", role="assistant", text=answer)
        return _Finish(RunState.DONE, reason, answer=answer)

    async def _propose_instead(
        self,
        cell_id: str,
        rejected: str,
        messages: list[dict[str, Any]],
        rejections: int,
        attempt: int,
    ) -> str:
        """After the user rejected a cell: tell the model, and put its other proposal into the
        same (unrun) cell, shown as a diff and reviewed again; returns it.

        The run ends ("rejected") when the model answers in prose instead, or once the cell was
        rejected ``max_attempts`` times (the model is not asked again).
        """
        if rejections >= self.settings.max_attempts:
            raise _Finish(RunState.DONE, "rejected")
        self._move(RunState.GENERATING)
        messages.append({"role": "user", "content": render("cell_rejected", comment="")})
        reply, code, _ = await self._generate(messages, stream_after=NO_STREAM)
        messages.append({"role": "assistant", "content": reply.text or code or ""})
        if code is None:
            raise self._answered(reply, "rejected")
        await self.cells.rewrite(cell_id, rejected, code, attempt, cause="reproposed")
        return code

    async def _install(self, package: str, failing_cell: str) -> None:
        """Propose ``%pip install package`` in a cell above the failing one, and run it: at once
        with ``allow_pip_install``, after the user's "Install and continue" where a frontend
        reviews it; otherwise the run ends saying what to do."""
        cells = await self.workspace.read_cells()
        ids = [cell.id for cell in cells]
        index = ids.index(failing_cell) if failing_cell in ids else len(ids)
        before = ids[index - 1] if index > 0 else None
        source = f"%pip install {package}"
        # Not a step of the request: its metadata says step 0.
        pip_cell = await self.cells.insert(before, source, 1, metadata_step=0)
        missing = ConfigError(
            f"The package {package!r} is missing from the kernel's environment.",
            hint=(
                f"Run the `%pip install {package}` cell inserted above the failing cell if you "
                "want it, then run the %%ci cell again (or allow this with allow_pip_install)."
            ),
        )
        ran = False
        if not self.settings.allow_pip_install:
            if self.approve is None:
                raise _Finish(RunState.FAILED, "missing_package", missing)
            self._move(RunState.AWAITING_APPROVAL, "missing_package")
            decision = await self.approve(pip_cell, source, "")
            if decision.decision == "reject":
                raise _Finish(RunState.FAILED, "missing_package", missing)
            ran = decision.decision == "ran"
        if ran:
            execution, _ = await self._taken_from_notebook(pip_cell, 1)
        else:
            execution, _ = await self._execute(pip_cell, 1)
        if execution.status is not CellStatus.OK:
            raise _Finish(RunState.FAILED, "missing_package", self._error_of(execution))

    async def _taken_from_notebook(self, cell_id: str, attempt: int) -> tuple[Execution, Digest]:
        """A cell awaiting review that the user ran themselves: its outputs are the attempt's
        result, read from the notebook, and told as if the run had run it."""
        self._attempt = attempt
        self._move(RunState.EXECUTING)
        self.attempts += 1
        self.emit(
            "attempt", cell_id=cell_id, attempt=attempt, max_attempts=self.settings.max_attempts
        )
        self.emit("execution_started", cell_id=cell_id, attempt=attempt)
        cell = next((c for c in await self.workspace.read_cells() if c.id == cell_id), None)
        if cell is None:
            raise NotebookUnavailable(
                "The cell awaiting review is gone.", hint="Ask again to get a new one."
            )
        error = next((out for out in cell.outputs if out.get("output_type") == "error"), None)
        status = classify(
            "error" if error is not None else "ok",
            str(error.get("ename")) if error is not None else None,
        )
        execution = Execution(cell_id, status, list(cell.outputs), cell.execution_count, None)
        digest = self._digest(execution.outputs)
        self.emit(
            "execution_finished",
            cell_id=cell_id,
            status=status.value,
            execution_count=cell.execution_count,
            digest=digest.text,
            duration=None,
        )
        self._end_if_over(status)
        return execution, digest

    # --- talking to the model -----------------------------------------------------------------

    async def _generate(
        self, messages: list[dict[str, Any]], *, stream_after: str | _NoStream | None
    ) -> tuple[ModelReply, str | None, str | None]:
        """Ask the model; stream code into a new cell inserted after ``stream_after``.

        Returns the reply, the code it holds (None for prose only) and the id of the cell it
        was streamed into (None when no cell was made). A streamed cell's complete code is
        announced (``cell_updated``, cause ``streamed``) once the reply is whole.
        """
        streaming = not isinstance(stream_after, _NoStream)
        fence = FenceStream()
        pending: list[str] = []
        cell_id: str | None = None
        wake = asyncio.Event()
        done = False

        def show(pieces: list[Piece]) -> None:
            for part, piece in pieces:
                self.emit(
                    "token", text=piece, cell_id=cell_id if part == "code" else None, part=part
                )

        def on_text(text: str) -> None:
            pieces = fence.feed(text)
            show(pieces)
            code = code_pieces(pieces)
            if code and streaming:
                pending.append(code)
                wake.set()

        async def pump() -> None:
            nonlocal cell_id
            while True:
                await wake.wait()
                wake.clear()
                if pending:
                    text = "".join(pending)
                    pending.clear()
                    if cell_id is None:
                        cell_id = await self._insert(stream_after_id, "", len(self.cells.ids) + 1)
                    await self.workspace.append_source(cell_id, text)
                if done and not pending:
                    return

        stream_after_id = stream_after if isinstance(stream_after, str) else None
        pump_task = asyncio.ensure_future(pump()) if streaming else None
        try:
            reply = await self.calls.call(messages, on_text)
        except (Exception, asyncio.CancelledError) as err:
            # Stopped, or the stream was cut: the cell must not stay half-written and runnable.
            ours = self._stopping or not isinstance(err, asyncio.CancelledError)
            if pump_task is not None and ours:
                # The pump ends by itself too: asyncio.wait_for (3.11) can swallow a cancel
                # that arrives as the awaited call completes.
                done = True
                pending.clear()
                wake.set()
                pump_task.cancel()
                await asyncio.gather(pump_task, return_exceptions=True)
                if cell_id is not None:
                    fence.finish()
                    await self._leave_unfinished(cell_id, fence.code)
            raise
        finally:
            done = True
            wake.set()
            if pump_task is not None:
                if self._stopping:
                    pump_task.cancel()
                await asyncio.gather(pump_task, return_exceptions=True)
        last = fence.finish()
        show(last)
        tail = code_pieces(last)
        if streaming and tail and cell_id is not None:
            await self.workspace.append_source(cell_id, tail)
        code = code_of(reply)
        if cell_id is not None:
            streamed = fence.code
            final = code if code is not None else streamed
            await self.cells.rewrite(cell_id, streamed, final, 1, cause="streamed")
            code = final
        if code is not None:
            # What the model said around its code is part of the conversation too.
            prose = _prose(reply.text)
            if prose:
                self.emit("message", role="assistant", text=prose)
        return reply, code, cell_id

    async def _leave_unfinished(self, cell_id: str, code: str) -> None:
        """The model stopped writing ``cell_id`` before its code was complete (Stop, a cut
        stream): delete the cell when no code came, else comment its code out under a note
        (``cell_updated``, cause ``stopped``), so that it never runs unedited, Run All included.

        Best effort: a notebook that cannot be reached any more (its tab went away) keeps the
        cell as it is, and the run still ends as it must.
        """
        if self._stopping and self._stop_reason == "disconnected":
            return
        with contextlib.suppress(JupyterCIError, asyncio.TimeoutError):
            await asyncio.wait_for(self.cells.leave_unfinished(cell_id, code), UNFINISHED_TIMEOUT)

    # --- helpers ------------------------------------------------------------------------------

    async def _insert(self, after_id: str | None, source: str, step: int) -> str:
        if self._stopping:
            raise StoppedByUser()
        return await self.cells.insert(after_id, source, step)

    def _end_stopped(self, answer: str, error: JupyterCIError | None = None) -> RunOutcome:
        """End as asked: stopped, with the reason and error :meth:`stop` was given."""
        error = self._stop_error or error or StoppedByUser()
        return self._end(RunState.STOPPED, self._stop_reason, error, answer)

    def _end(
        self, state: RunState, reason: str, error: JupyterCIError | None, answer: str
    ) -> RunOutcome:
        if self._interrupt_task is not None and not self._interrupt_task.done():
            self._interrupt_task.cancel()  # no cell runs any more: no further interrupts
        if self.machine.state is RunState.QUEUED and state is RunState.DONE:
            self._move(RunState.GENERATING)
        outcome = RunOutcome(
            self.run_id,
            state,
            reason,
            error,
            list(self.cells.ids),
            self.attempts,
            self.calls.usage,
            time.monotonic() - self._started,
            answer,
            list(self.notices),
        )
        text = outcome.status_line()
        self.machine.advance(state, reason)
        self.emit("state", state=state.value, reason=reason, text=text)
        self.emit(
            "finished",
            state=state.value,
            reason=reason,
            error=error.to_dict() if error is not None else None,
            summary=outcome.summary(),
            answer=answer,
            text=text,
        )
        return outcome


def _prose(text: str) -> str:
    """The prose of a reply around its code (the model's explanation of a fix)."""
    return extract_code(text).prose.strip() if text else ""


__all__ = [
    "AgentRun",
    "Approver",
    "EventCallback",
    "ReviewDecision",
    "RunOutcome",
    "RunRequest",
    "text_of",
]
