"""A rejected proposal never stays in the user's cell (issue 23, "a user's cell stays the user's").

"Fix with jupyter-ci" on a cell the user wrote, in review mode: when the run ends while the
model's code waits unaccepted in the cell (rejected up to the limit, the model having nothing
else, Stop during the review, a failure while asking for another proposal), the loop puts the
user's code back (``cell_updated``, cause ``restored``), says so in a notice and in the status
line; never when the user accepted the proposal or changed the cell meanwhile. The headless
workspace with a real kernel and the scripted model; the browser's side is in
``tests/browser/test_users_work.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

from jupyter_ci.agent.loop import AgentRun, Approver, ReviewDecision, RunOutcome, RunRequest
from jupyter_ci.agent.review import USERS_CODE_BACK
from jupyter_ci.agent.states import RunState
from jupyter_ci.errors import StoppedByUser
from jupyter_ci.models.litellm_model import LiteLLMModel
from jupyter_ci.settings import Settings
from jupyter_ci.testing import Fault, Reply, ScriptedModelServer
from jupyter_ci.workspaces.kernel import KernelWorkspace

from .loop_support import KEY, Recorder, write_notebook

#: The user's own cell: it fails with a NameError.
USERS_CODE = "total = prices.sum()"
FIRST = "prices = [1, 2]\ntotal = sum(prices)"
SECOND = "total = 0"


@pytest_asyncio.fixture
async def failed(tmp_path: Path) -> AsyncIterator[tuple[KernelWorkspace, str]]:
    """A workspace whose one cell, the user's, has just failed; and that cell's id."""
    workspace = await KernelWorkspace.open(write_notebook(tmp_path / "users.ipynb", [USERS_CODE]))
    try:
        await workspace.restore()
        [cell] = await workspace.read_cells()
        assert (await workspace.run_cell(cell.id, 30)).error is not None
        yield workspace, cell.id
    finally:
        await workspace.close()


async def fix_in_review(
    workspace: KernelWorkspace,
    cell_id: str,
    script: list[Reply],
    approve: Approver,
    recorder: Recorder,
    holder: list[AgentRun] | None = None,
    **settings: Any,
) -> RunOutcome:
    """Run "Fix with jupyter-ci" on the cell in review mode, with ``approve`` deciding."""
    with ScriptedModelServer(script) as server:
        chosen = Settings(
            model="openai/scripted", api_base=server.base_url, mode="review", **settings
        )
        model = LiteLLMModel(chosen, api_key=KEY)
        run = AgentRun(
            RunRequest("", chosen, fix_cell_id=cell_id),
            workspace,
            model,
            on_event=recorder,
            approve=approve,
        )
        if holder is not None:
            holder.append(run)
        return await run.run()


def answering(*decisions: str) -> Approver:
    """An approver answering ``decisions`` in turn."""
    answers = list(decisions)

    async def approve(cell_id: str, source: str, diff: str) -> ReviewDecision:
        return ReviewDecision(answers.pop(0))

    return approve


async def source_of(workspace: KernelWorkspace, cell_id: str) -> str:
    return next(c.source for c in await workspace.read_cells() if c.id == cell_id)


def check_given_back(outcome: RunOutcome, recorder: Recorder, proposal: str) -> None:
    """The last change of the cell put the user's code back in place of ``proposal``, and the
    notice and the status line say so."""
    last = recorder.of("cell_updated")[-1]
    assert (last["cause"], last["source"]) == ("restored", USERS_CODE)
    assert f"-{proposal.splitlines()[-1]}" in last["diff"]
    assert f"+{USERS_CODE}" in last["diff"]
    notices = [e["text"] for e in recorder.of("message") if e["role"] == "notice"]
    assert USERS_CODE_BACK in notices
    assert ", your code is back — " in outcome.status_line()
    [finished] = recorder.of("finished")
    assert finished["text"] == outcome.status_line()


async def test_rejected_up_to_the_limit_the_users_code_is_back(
    failed: tuple[KernelWorkspace, str],
) -> None:
    workspace, cell_id = failed
    recorder = Recorder()
    outcome = await fix_in_review(
        workspace,
        cell_id,
        [Reply.code(FIRST), Reply.code(SECOND)],
        answering("reject", "reject"),
        recorder,
        max_attempts=2,
    )
    assert (outcome.state, outcome.reason) == (RunState.DONE, "rejected")
    assert await source_of(workspace, cell_id) == USERS_CODE
    check_given_back(outcome, recorder, SECOND)
    assert recorder.of("execution_started") == []  # no proposal ran


async def test_the_model_with_nothing_else_to_propose_gives_the_users_code_back(
    failed: tuple[KernelWorkspace, str],
) -> None:
    workspace, cell_id = failed
    recorder = Recorder()
    outcome = await fix_in_review(
        workspace,
        cell_id,
        [Reply.code(FIRST), Reply.text("I have no other fix.")],
        answering("reject"),
        recorder,
    )
    assert (outcome.state, outcome.reason) == (RunState.DONE, "rejected")
    assert await source_of(workspace, cell_id) == USERS_CODE
    check_given_back(outcome, recorder, FIRST)


async def test_stop_while_a_proposal_waits_gives_the_users_code_back(
    failed: tuple[KernelWorkspace, str],
) -> None:
    workspace, cell_id = failed
    holder: list[AgentRun] = []

    async def stop(cell: str, source: str, diff: str) -> ReviewDecision:
        # As the server does on Stop: the run is stopped and the waiting review fails.
        holder[0].stop()
        raise StoppedByUser()

    recorder = Recorder()
    outcome = await fix_in_review(
        workspace, cell_id, [Reply.code(FIRST)], stop, recorder, holder=holder
    )
    assert (outcome.state, outcome.reason) == (RunState.STOPPED, "user")
    assert await source_of(workspace, cell_id) == USERS_CODE
    check_given_back(outcome, recorder, FIRST)


async def test_a_failure_after_a_reject_gives_the_users_code_back(
    failed: tuple[KernelWorkspace, str],
) -> None:
    workspace, cell_id = failed
    recorder = Recorder()
    outcome = await fix_in_review(
        workspace,
        cell_id,
        [Reply.code(FIRST), Reply.fail(Fault.auth())],
        answering("reject"),
        recorder,
    )
    assert outcome.state is RunState.FAILED, outcome.status_line()
    assert await source_of(workspace, cell_id) == USERS_CODE
    check_given_back(outcome, recorder, FIRST)


async def test_an_accepted_proposal_stays(failed: tuple[KernelWorkspace, str]) -> None:
    workspace, cell_id = failed
    recorder = Recorder()
    # Run: the user accepted it; it fails, and the run ends at its limit of one attempt.
    outcome = await fix_in_review(
        workspace,
        cell_id,
        [Reply.code("total = prices_typo.sum()")],
        answering("run"),
        recorder,
        max_attempts=1,
    )
    assert (outcome.state, outcome.reason) == (RunState.FAILED, "max_attempts")
    assert await source_of(workspace, cell_id) == "total = prices_typo.sum()"
    assert "restored" not in [e["cause"] for e in recorder.of("cell_updated")]
    assert ", your code is back" not in outcome.status_line()


async def test_the_users_change_during_the_review_stays(
    failed: tuple[KernelWorkspace, str],
) -> None:
    workspace, cell_id = failed
    holder: list[AgentRun] = []

    async def edit_then_stop(cell: str, source: str, diff: str) -> ReviewDecision:
        await workspace.replace_source(cell, "total = 3  # typed by the user")
        holder[0].stop()
        raise StoppedByUser()

    recorder = Recorder()
    outcome = await fix_in_review(
        workspace, cell_id, [Reply.code(FIRST)], edit_then_stop, recorder, holder=holder
    )
    assert outcome.state is RunState.STOPPED
    assert await source_of(workspace, cell_id) == "total = 3  # typed by the user"
    assert "restored" not in [e["cause"] for e in recorder.of("cell_updated")]
