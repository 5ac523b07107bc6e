"""One tool call of an outside agent, as a run of the notebook's conversation.

An MCP client's ``insert_cell``, ``edit_cell``, ``delete_cell``, ``run_cell`` or ``execute`` is a
:class:`McpRun`: the loop's run (:class:`~jupyter_ci.agent.loop.AgentRun`) with the agent outside
it. Its steps are the call's; everything else is the loop's own: the cells it writes and the
events that say so (:class:`~jupyter_ci.agent.cells.RunCells`: ``cell_inserted``,
``cell_updated`` with the diff), review in JupyterLab (``awaiting_approval``, the user's Run,
Edit or Reject), one try of a cell (``attempt``, ``execution_started``, ``execution_finished``
with its digest, the files it wrote), Stop, and how the run ends (``finished``, the status
line). So the run record, the panel's history, Export, the ``%%ci``-style status and Stop show
what the agent did, as they show jupyter-ci's own runs.

The call and the run part where the cell starts running: the tool returns when the cell ends or
its caller's patience does (``running``); the run goes on until the cell ends, and
:attr:`McpRun.done` says how, for a later ``wait_cell``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..agent.cells import RunCells
from ..agent.files import Snapshot
from ..agent.loop import AgentRun, Approver, EventCallback, ReviewDecision, RunRequest
from ..agent.run_base import _Finish, _Rejected
from ..agent.states import RunState
from ..agent.workspace import Execution, Workspace
from ..errors import InternalError, JupyterCIError
from ..execution.status import CellStatus
from ..models.base import ModelReply, TextCallback, WaitCallback

#: Turns of the event loop a call's run gives its waiter after the outcome is set (the wait's
#: callback, then the waiting task), before it goes on with its own end.
_LET_THE_ANSWER_GO = 3


class ExternalAgent:
    """The model seam of a run an outside agent drives: the agent writes the code, and
    jupyter-ci asks no model anything (no tokens, no cost)."""

    #: The agent's client is sent a cell's images as image content (bounded, see images.py):
    #: no figure notes in words are asked of the kernel for it.
    vision = True

    def __init__(self, name: str) -> None:
        self.name = name

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        on_text: TextCallback | None = None,
        temperature: float | None = None,
        on_wait: WaitCallback | None = None,
        seed: int | None = None,
    ) -> ModelReply:
        """Never called: an MCP run's steps ask no model."""
        raise InternalError("A run an MCP client drives asks no model.")

    def count_tokens(self, text: str) -> int:
        """A rough count (nothing is sent to a model)."""
        return max(1, len(text) // 4)


@dataclass
class CallOutcome:
    """What a call's cell came to: how it ran, or what the user decided instead."""

    cell_id: str
    execution: Execution | None = None
    #: The user's decision in review mode: ``run``, ``ran`` or ``rejected`` (None: no review).
    decision: str | None = None
    #: The code the user ran, when they changed it in review.
    edited_source: str | None = None
    comment: str | None = None
    #: The files the run's cell created or changed (the protocol's ChangedFile).
    files: list[dict[str, Any]] = field(default_factory=list)


class McpRun(AgentRun):
    """One tool call of an outside agent; its steps are given as :attr:`steps`."""

    def __init__(
        self,
        request: RunRequest,
        workspace: Workspace,
        *,
        agent: str,
        run_id: str | None = None,
        on_event: EventCallback | None = None,
        approve: Approver | None = None,
    ) -> None:
        super().__init__(
            request,
            workspace,
            ExternalAgent(agent),
            run_id=run_id,
            on_event=on_event,
            approve=self._noting(approve) if approve is not None else None,
        )
        self.agent = agent
        self.cells = RunCells(workspace, self.run_id, None, self.emit, agent=agent)
        #: The call's own steps (set before the run starts).
        self.steps: Callable[[McpRun], Awaitable[None]] | None = None
        #: The cell the call is about, once known.
        self.cell_id: str | None = None
        #: When the kernel began the call's cell (monotonic), None before.
        self.began: float | None = None
        #: How the call's cell ended (or what the user decided instead).
        self.done: asyncio.Future[CallOutcome] = asyncio.get_running_loop().create_future()
        #: Waits for the kernel's turn before a cell runs (live: the run manager's lane).
        self.turn: Callable[[], Awaitable[None]] | None = None
        #: Stops the run as its Stop does (live: through the run manager); None: :meth:`stop`.
        self.stop_hook: Callable[[], Awaitable[None]] | None = None
        #: Puts what the call did on disk before the call returns (live: the tab saves).
        self.persist: Callable[[], Awaitable[None]] | None = None
        #: The kernel's files as the previous call's cell left them (its "before"), and where
        #: this call's "after" goes: no request of its own for either.
        self.files_before: Snapshot | None = None
        self.keep_files: Callable[[Snapshot], None] | None = None
        self._persisted = False
        self._waiting_turn = False
        self._decision: ReviewDecision | None = None
        # The workspace says when the kernel begins a cell (each call has its own workspace).
        workspace_hooks: Any = workspace
        workspace_hooks.on_cell_started = self._began

    async def run(self) -> Any:
        """Do the call's steps; the run ends as they end (see :meth:`AgentRun.guarded`)."""
        outcome = await self.guarded(self._call_steps)
        if not self._persisted:
            await self._persist()  # what the call did before it failed or was stopped
        if not self.done.done():
            if outcome.state is RunState.STOPPED and self.cell_id is not None:
                # Stopped before its cell ran (waiting for the kernel, or for a review).
                stopped = Execution(self.cell_id, CellStatus.INTERRUPTED, [])
                self.done.set_result(CallOutcome(self.cell_id, stopped))
            else:
                error = outcome.error or InternalError("The call ended without a result.")
                self.done.set_exception(error)
                self.done.exception()  # retrieved: a caller that stopped waiting need not see it
        return outcome

    async def _call_steps(self) -> None:
        if self.steps is None:
            raise InternalError("An MCP run was started without its steps.")
        await self.steps(self)

    @property
    def activity(self) -> str:
        """What the call is doing now, in a few words (for progress notifications)."""
        state = self.machine.state
        if state is RunState.QUEUED or self._waiting_turn:
            return "queued behind another request in this kernel"
        if state is RunState.AWAITING_APPROVAL:
            return "waiting for the user's review in JupyterLab"
        if state is RunState.EXECUTING:
            if self.began is None:
                return "waiting for the kernel to start the cell"
            return f"running for {time.monotonic() - self.began:.0f} s"
        return str(state.value).replace("_", " ")

    # --- steps the tools are made of ------------------------------------------------------

    async def insert(self, after_id: str | None, source: str, cell_type: str = "code") -> str:
        """Insert the agent's cell (a code cell through the run's cells, so the record has it;
        markdown and raw cells through the workspace)."""
        self._move(RunState.GENERATING)
        if cell_type == "code":
            cell_id = await self.cells.insert(after_id, source, 1)
        else:
            insert: Any = self.workspace.insert_cell
            metadata = self.cells.metadata(1)
            cell_id = await insert(after_id, source, metadata, cell_type=cell_type)
        self.cell_id = cell_id
        return cell_id

    async def edit(self, cell_id: str, before: str, after: str) -> None:
        """Replace a cell's code; the record (and JupyterLab, under the cell) shows the diff."""
        self._move(RunState.GENERATING)
        self.cell_id = cell_id
        self.cells.adopt(cell_id)
        await self.cells.rewrite(cell_id, before, after, 1, cause="agent")

    async def delete(self, cell_id: str) -> None:
        """Delete a cell (the tools allow the agent's own, unedited ones only)."""
        self._move(RunState.GENERATING)
        self.cell_id = cell_id
        await self.cells.delete(cell_id)

    async def review(self, cell_id: str, source: str) -> tuple[str, bool] | None:
        """In review mode, wait for the user's decision on the cell: its code to run and
        whether they ran it themselves; None (and the call's outcome says so) on a Reject."""
        self.cell_id = cell_id
        if cell_id not in self.cells.ids:
            # A cell this run did not write: it is the one proposed to run (the tab shows the
            # review on it, the record has it).
            self.cells.adopt(cell_id)
            self.emit(
                "cell_updated", cell_id=cell_id, source=source, diff="", attempt=1, cause="agent"
            )
        try:
            return await self._review(cell_id, source, 1)
        except _Rejected:
            await self._settle(CallOutcome(cell_id, decision="rejected", comment=self._comment()))
            return None

    async def run_cell(self, cell_id: str, source: str) -> None:
        """Run the cell (after the user's review in review mode) and say how it ended; the run
        ends with it."""
        self.cell_id = cell_id
        if self.machine.state is RunState.QUEUED:
            self._move(RunState.GENERATING)  # the agent wrote the code: the run's first step
        if self.turn is not None:
            self._waiting_turn = True
            try:
                await self.turn()
            finally:
                self._waiting_turn = False
        decision: str | None = None
        ran = False
        if self.settings.mode == "review":
            reviewed = await self.review(cell_id, source)
            if reviewed is None:
                raise _Finish(RunState.DONE, "rejected")
            code, ran = reviewed
            decision = "ran" if ran else "run"
            edited = code if code != source else None
        else:
            edited = None
        if self.files_before is not None:
            self.files.seed(self.files_before)
        if ran:
            execution, _ = await self._taken_from_notebook(cell_id, 1)
        else:
            execution, _ = await self._execute(cell_id, 1)
        await self.files.settle()
        if self.keep_files is not None and self.files.latest is not None:
            self.keep_files(self.files.latest)
        await self._settle(
            CallOutcome(cell_id, execution, decision, edited, files=list(self.files.changed))
        )
        super()._end_if_over(execution.status)
        raise _Finish(RunState.DONE, "called")

    def finish(self) -> None:
        """End the run: the call did what it asked."""
        raise _Finish(RunState.DONE, "called")

    async def resolve_change(self, cell_id: str) -> None:
        """A call without a cell to run (an insert, an edit, a delete) is done."""
        await self._settle(CallOutcome(cell_id))

    # --- the loop's hooks -------------------------------------------------------------------

    def _end_if_over(self, status: CellStatus) -> None:
        """Not yet: the call's outcome is told first (see :meth:`run_cell`)."""

    def _began(self) -> None:
        if self.began is None:
            self.began = time.monotonic()

    def _noting(self, approve: Approver) -> Approver:
        """The approver, keeping the user's decision (for a Reject's comment)."""

        async def noted(cell_id: str, source: str, diff: str) -> ReviewDecision:
            self._decision = await approve(cell_id, source, diff)
            return self._decision

        return noted

    def _comment(self) -> str | None:
        """The user's comment on their Reject, if they wrote one."""
        return (self._decision.comment or None) if self._decision is not None else None

    async def _settle(self, outcome: CallOutcome) -> None:
        """The call's outcome; then what it did is put on disk (the call need not wait)."""
        if not self.done.done():
            self.done.set_result(outcome)
        # The call's answer first: its waiter runs before the rest of the run's end.
        for _ in range(_LET_THE_ANSWER_GO):
            await asyncio.sleep(0)
        await self._persist()

    async def _persist(self) -> None:
        if self.persist is None:
            return
        self._persisted = True
        try:
            await self.persist()
        except JupyterCIError:  # the tab is gone: its notebook is not ours to write
            return
