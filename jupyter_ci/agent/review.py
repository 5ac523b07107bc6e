"""The user's side of a run: review of a cell before it runs, the model's other proposal after
a Reject, the user's code given back when the model's proposal for their cell is not accepted, a
cell the user ran themselves, and the install of a missing package.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..errors import ConfigError, JupyterCIError, NotebookUnavailable
from ..execution.status import CellStatus, classify
from .digest import Digest
from .generate import UNFINISHED_TIMEOUT, Generating
from .outcome import rejection_text
from .prompts import render
from .run_base import NO_STREAM, _Finish, _Rejected
from .states import RunState
from .workspace import Execution

#: The notice when the user's code is put back into their cell (see Reviewing._give_back).
USERS_CODE_BACK = (
    "Your code is back in the cell: jupyter-ci's proposal was not accepted "
    "(Ctrl+Z in the cell brings the proposal back)."
)
#: End reasons after which the notebook cannot be reached (the tab went away).
_TAB_GONE = frozenset({"disconnected", "notebook_unavailable"})


class Reviewing(Generating):
    """The review and install steps of :class:`~jupyter_ci.agent.loop.AgentRun`."""

    async def _review(self, cell_id: str, source: str, attempt: int) -> tuple[str, bool]:
        """Wait for the user's decision on the cell: its code to run (their edit, if they made
        one) and whether they ran it themselves already (decision ``ran``)."""
        assert self.approve is not None
        # The cell waits as the try it is about to be (a fix waits as the next attempt).
        self._attempt = attempt
        if cell_id in self.cells.adopted:
            self._unaccepted = source  # the model's code in the user's cell, not accepted yet
        self._move(RunState.AWAITING_APPROVAL)
        decision = await self.approve(cell_id, source, "")
        if decision.decision == "reject":
            # The user's word, kept in the conversation so later requests know it too.
            self.emit("message", role="user", text=rejection_text(source, decision.comment))
            raise _Rejected(decision.comment)
        self._unaccepted = None  # run (as proposed or as the user edited it): theirs to keep
        if decision.source is not None and decision.source != source:
            await self.cells.rewrite(cell_id, source, decision.source, attempt, cause="edited")
            return decision.source, decision.decision == "ran"
        return source, decision.decision == "ran"

    async def _propose_instead(
        self,
        cell_id: str,
        rejected: str,
        messages: list[dict[str, Any]],
        rejections: int,
        attempt: int,
        comment: str | None = None,
    ) -> str:
        """After the user rejected a cell: tell the model (with the user's reason, if they gave
        one), and put its other proposal into the same (unrun) cell, shown as a diff and
        reviewed again; returns it.

        The run ends ("rejected") when the model answers in prose instead, or once the cell was
        rejected ``max_attempts`` times (the model is not asked again).
        """
        if rejections >= self.settings.max_attempts:
            raise _Finish(RunState.DONE, "rejected")
        self._move(RunState.GENERATING)
        said = f"\n\nTheir reason: {comment}" if comment else ""
        messages.append({"role": "user", "content": render("cell_rejected", comment=said)})
        reply, code, _ = await self._generate(messages, stream_after=NO_STREAM)
        messages.append({"role": "assistant", "content": reply.text or code or ""})
        if code is None:
            raise self._answered(reply, "rejected")
        await self.cells.rewrite(cell_id, rejected, code, attempt, cause="reproposed")
        if cell_id in self.cells.adopted:
            self._unaccepted = code
        return code

    async def _give_back(self, reason: str) -> bool:
        """The run ends while the model's code waits unaccepted in the user's cell (they
        rejected it, or the run was stopped or failed during the review): put the user's own
        code back, as a change in the cell's undo history (Ctrl+Z brings the proposal back),
        and say so; True when it did.

        Not when the tab is gone (nothing can reach the cell), nor when the user changed the
        cell since (what they typed stays). Best effort, within ``UNFINISHED_TIMEOUT``.
        """
        proposed, self._unaccepted = self._unaccepted, None
        cell_id, users_code = self.request.fix_cell_id, self._users_code
        if proposed is None or cell_id is None or users_code is None or reason in _TAB_GONE:
            return False
        try:
            now = await asyncio.wait_for(self._source_of(cell_id), UNFINISHED_TIMEOUT)
            if now != proposed:
                return False
            await asyncio.wait_for(
                self.cells.rewrite(
                    cell_id, proposed, users_code, self._attempt or 1, cause="restored"
                ),
                UNFINISHED_TIMEOUT,
            )
        except (JupyterCIError, asyncio.TimeoutError):
            return False
        self.notices.append(USERS_CODE_BACK)
        self.emit("message", role="notice", text=USERS_CODE_BACK)
        return True

    async def _source_of(self, cell_id: str) -> str | None:
        """The cell's source in the notebook now (None when it is gone)."""
        cells = await self.workspace.read_cells(outputs=False)
        return next((cell.source for cell in cells if cell.id == cell_id), None)

    async def _install(self, package: str, failing_cell: str) -> None:
        """Propose ``%pip install package`` in a cell above the failing one, and run it: at once
        with ``allow_pip_install``, after the user's "Install and continue" where a frontend
        reviews it; otherwise the run ends saying what to do."""
        cells = await self.workspace.read_cells(outputs=False)
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
        self._reach(cell_id, attempt)
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
