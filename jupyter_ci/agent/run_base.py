"""What every part of an :class:`~jupyter_ci.agent.loop.AgentRun` shares: its state, its
events and one try of a cell.

:class:`RunBase` holds a run's request, seams and counters, emits its events (ARCHITECTURE.md,
"The run record"), moves its state machine, runs a cell once (:meth:`RunBase._execute`) and says
when a cell's ending ends the run. The model's side (:mod:`.generate`), the user's
(:mod:`.review`) and the loop itself (:mod:`.loop`) build on it, one class on the other.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import replace
from typing import Any

from ..errors import CellError, CellTimeout, JupyterCIError, KernelDied, StoppedByUser
from ..execution.status import CellStatus
from ..models.base import Model
from .cells import RunCells
from .digest import Digest, digest_outputs, new_nonce
from .figures import figure_notes
from .files import FileWatch
from .messages import Conversation
from .model_calls import ModelCalls
from .outcome import RATE_LIMITED, live_line, rate_limited_line
from .request import Approver, EventCallback, RunRequest
from .states import RunState, RunStateMachine
from .workspace import Execution, Workspace

#: Characters of one execution's digest shown to the model.
DIGEST_CHARS = 4000
#: How long reading a cell's figures from the kernel may take before the run goes on without.
FIGURE_NOTES_TIMEOUT = 15.0
#: What the run record says of a cell the run stopped waiting for.
ABANDONED = "[the cell did not end after Stop interrupted it; the run stopped without waiting]"


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
    """Internal: the user rejected the cell awaiting approval (``comment``: their reason)."""

    def __init__(self, comment: str | None = None) -> None:
        super().__init__("rejected")
        self.comment = comment


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


class RunBase:
    """A run's state and the steps every part of the loop takes (see the module's docstring)."""

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
        nonce: str | None = None,
    ) -> None:
        self.request = request
        self.settings = request.settings
        self.workspace = workspace
        self.model = model
        self.run_id = run_id or uuid.uuid4().hex
        self.on_event = on_event
        self.approve = approve
        self.machine = RunStateMachine()
        #: The id of the run's untrusted-data markers: random, so that kernel output cannot
        #: close one. Only the bench passes its own (reproducible samples for paired arms).
        self.nonce = nonce or new_nonce()
        self.conversation = Conversation(
            model,
            self.settings,
            self.nonce,
            request.prompt,
            tuple(dict(m) for m in request.history),
            request.attachments,
            request.attached_cells,
            request.instructions,
        )
        self.calls = ModelCalls(
            model,
            self.settings,
            self.conversation,
            use_tools=use_tools,
            emit=self.emit,
            notice=self._notice,
            on_wait=self._waiting,
        )
        self.cells = RunCells(
            workspace, self.run_id, request.origin_cell_id, self.emit, request.replaces
        )
        self.files = FileWatch(workspace, self.emit)
        #: The highest attempt each cell reached (a try run, or used up without a run: a fix
        #: that repeated a failed try, a result kept twice that cannot be right).
        self._reached: dict[str, int] = {}
        #: The column spellings jupyter-ci's own fixes corrected in the cell being fixed (as
        #: written -> as the frame spells it): the model's later fixes of the cell are held to
        #: them (``own_fixes``). Another cell may run after the frame was renamed.
        self.spellings: dict[str, str] = {}
        self.notices: list[str] = []
        self._seq = 0
        self._stopping = False
        self._stop_reason = "user"
        self._stop_error: JupyterCIError | None = None
        self._executing = False
        self._cell_task: asyncio.Future[Execution] | None = None
        self._interrupt_task: asyncio.Future[None] | None = None
        self._attempt: int | None = None
        self._reason = ""
        self._noting_figures = False
        self._started = time.monotonic()
        #: A fix of the user's cell: their code before the run changed it, and the model's code
        #: in the cell while it waits unaccepted in review (see Reviewing._give_back).
        self._users_code: str | None = None
        self._unaccepted: str | None = None
        #: The outside agent (an MCP client) whose call this run is; None: jupyter-ci's loop.
        self.agent: str | None = None

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
        self._reason = reason
        self._emit_state(reason, self._live_text())

    def _count(self) -> tuple[int | None, int | None]:
        """The attempt the current state is about (the one being written while fixing) and the
        run's limit; (None, None) when it is about no one try."""
        state = self.machine.state
        attempt = self._attempt
        if state is RunState.FIXING and attempt is not None:
            attempt += 1  # the attempt being written
        if state is RunState.GENERATING:
            attempt = None
        return attempt, self.settings.max_attempts if attempt is not None else None

    def _live_text(self) -> str:
        """The status line of the run's current state."""
        attempt, max_attempts = self._count()
        return live_line(self.machine.state, attempt, max_attempts, self._reason, agent=self.agent)

    def _emit_state(self, reason: str, text: str) -> None:
        # The count travels with the line, so every view says the same (the panel's steps,
        # the cell's badge, the %%ci status): one count, the loop's.
        attempt, max_attempts = self._count()
        self.emit(
            "state",
            state=self.machine.state.value,
            reason=reason,
            text=text,
            attempt=attempt,
            max_attempts=max_attempts,
        )

    def _waiting(self, seconds: float, retry: int, retries: int) -> None:
        """The model waits before a retry (rate limited): the status line says so, and goes
        back to the state's own once the wait is over. The state does not change (the events'
        reason, RATE_LIMITED, tells clients not to take them for a new step)."""
        if self.machine.state.terminal:
            return
        text = rate_limited_line(seconds, retry, retries) if seconds > 0 else self._live_text()
        self._emit_state(RATE_LIMITED, text)

    def _notice(self, text: str) -> None:
        if text in self.request.said or text in self.notices:
            return  # said once per conversation is enough
        self.notices.append(text)
        self.emit("message", role="notice", text=text)

    @property
    def attempts(self) -> int:
        """The attempts the run used, over all its cells: what their badges ("attempt 3/3")
        add up to, the attempts used without a run included."""
        return sum(self._reached.values())

    def _reach(self, cell_id: str, attempt: int) -> None:
        """Cell ``cell_id`` runs its try ``attempt``."""
        self._reached[cell_id] = max(self._reached.get(cell_id, 0), attempt)

    # --- one try of a cell --------------------------------------------------------------------

    async def _execute(
        self, cell_id: str, attempt: int, *, counted: bool = True
    ) -> tuple[Execution, Digest]:
        """Run the cell once; a cell stopped, or ended with its kernel, ends the run here.
        ``counted``: a try of the cell (a version that ran before, run again, is not one)."""
        if self._stopping:
            raise StoppedByUser()
        self._attempt = attempt
        self._move(RunState.EXECUTING)
        if counted:
            self._reach(cell_id, attempt)
        self.emit(
            "attempt", cell_id=cell_id, attempt=attempt, max_attempts=self.settings.max_attempts
        )
        await self.files.settle()
        await self.files.start()
        await self._note_figures(read=False)
        if self._stopping:
            raise StoppedByUser()  # Stop came meanwhile: the cell never runs
        self.emit("execution_started", cell_id=cell_id, attempt=attempt)
        self._executing = True
        self._cell_task = asyncio.ensure_future(
            self.workspace.run_cell(cell_id, self.settings.timeout, self.files.expression)
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
        notes = ""
        status = execution.status
        if _has_image(execution.outputs) and not (
            status.stopped or status.kernel_gone or self._stopping
        ):
            notes = figure_notes(await self._note_figures(read=True))
        digest = self._digest(execution.outputs, notes)
        self.emit(
            "execution_finished",
            cell_id=cell_id,
            status=execution.status.value,
            execution_count=execution.execution_count,
            digest=digest.text,
            duration=execution.duration,
        )
        self._end_if_over(execution.status)
        self.files.after_cell(execution.expression_value)
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

    def _digest(self, outputs: list[dict[str, Any]], figures: str = "") -> Digest:
        """What the model is shown of a cell's outputs (only its errors without share_outputs),
        with ``figures``, the figures it displayed in words, within the same budget."""
        if not self.settings.share_outputs:
            errors = [out for out in outputs if out.get("output_type") == "error"]
            digest = digest_outputs(errors, max_chars=DIGEST_CHARS, vision=False)
            note = "[outputs are not shared with the model; only errors are shown]"
            return replace(digest, text=f"{note}\n{digest.text}".rstrip())
        budget = DIGEST_CHARS - (len(figures) + 1 if figures else 0)
        digest = digest_outputs(outputs, max_chars=budget, vision=self._vision())
        return replace(digest, text=f"{digest.text}\n{figures}") if figures else digest

    def _vision(self) -> bool:
        return bool(getattr(self.model, "vision", False))

    async def _note_figures(self, read: bool) -> list[str]:
        """For a model that does not see images (outputs shared): start noting the figures the
        kernel displays, before the run's first cell; with ``read``, the notes of the cell that
        just ran. Best effort: a kernel that cannot say, or does not say in time, gives none."""
        if self._vision() or not self.settings.share_outputs:
            return []
        if not read and self._noting_figures:
            return []
        self._noting_figures = True
        await self.files.settle()  # one request of the run's own in the kernel at a time
        try:
            return await asyncio.wait_for(self.workspace.figure_notes(read), FIGURE_NOTES_TIMEOUT)
        except (asyncio.TimeoutError, JupyterCIError):
            return []

    def _error_of(self, execution: Execution) -> JupyterCIError:
        if execution.status is CellStatus.TIMED_OUT:
            return CellTimeout(self.settings.timeout)
        error = execution.error
        if error is None:
            return CellError("Error", "the cell failed without an error output")
        return CellError.from_output(error)

    async def _insert(self, after_id: str | None, source: str, step: int) -> str:
        if self._stopping:
            raise StoppedByUser()
        return await self.cells.insert(after_id, source, step)


def _has_image(outputs: list[dict[str, Any]]) -> bool:
    """Whether a cell's outputs hold an image (what a text-only model would not see)."""
    return any(
        str(mime).startswith("image/") for out in outputs for mime in (out.get("data") or {})
    )
