"""The agent loop end to end: a real ipykernel, the headless workspace, the scripted model."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from jupyter_ci.agent import loop
from jupyter_ci.agent.cells import UNFINISHED_NOTE
from jupyter_ci.agent.fix_context import ADVICE
from jupyter_ci.agent.loop import AgentRun, Approver, ReviewDecision, RunOutcome
from jupyter_ci.agent.states import RunState
from jupyter_ci.errors import BudgetExceeded, CellError, ModelError
from jupyter_ci.testing import Fault, Reply, ScriptedModelServer
from jupyter_ci.workspaces.kernel import KernelWorkspace

from .loop_support import IRIS_SETUP, KEY, Recorder, run_loop, write_notebook

pytestmark = pytest.mark.asyncio

WRONG = (
    "import matplotlib.pyplot as plt\n"
    'plt.scatter(iris["petal_len"], iris["petal_width"])\n'
    "plt.show()"
)
FIXED = WRONG.replace('"petal_len"', '"petal_length"')


@pytest_asyncio.fixture
async def iris_workspace(tmp_path: Path) -> AsyncIterator[KernelWorkspace]:
    path = write_notebook(tmp_path / "iris.ipynb", [IRIS_SETUP])
    workspace = await KernelWorkspace.open(path)
    try:
        await workspace.restore()
        yield workspace
    finally:
        await workspace.close()


@pytest_asyncio.fixture
async def workspace(tmp_path: Path) -> AsyncIterator[KernelWorkspace]:
    workspace = await KernelWorkspace.open(write_notebook(tmp_path / "empty.ipynb"))
    try:
        yield workspace
    finally:
        await workspace.close()


async def test_iris_wrong_column_is_fixed_in_the_same_cell(
    iris_workspace: KernelWorkspace,
) -> None:
    script = [
        Reply.code(WRONG, prose="A scatter plot of petal sizes."),
        Reply.code(FIXED),
        Reply.text("The plot shows petal length against petal width."),
    ]
    recorder = Recorder()
    with ScriptedModelServer(script) as server:
        outcome = await run_loop(iris_workspace, server, "plot the iris data", recorder=recorder)
        requests = server.chat_requests
    assert outcome.state is RunState.DONE, outcome.error
    assert outcome.reason == "answered"
    assert outcome.answer == "The plot shows petal length against petal width."
    assert len(outcome.cells) == 1
    assert outcome.attempts == 2
    cells = await iris_workspace.read_cells()
    assert len(cells) == 2
    generated = cells[1]
    assert generated.id == outcome.cells[0]
    assert generated.source == FIXED
    assert any("image/png" in out.get("data", {}) for out in generated.outputs)
    assert generated.metadata["jupyter_ci"]["run_id"] == outcome.run_id
    names = {v.name for v in await iris_workspace.inspect_variables()}
    assert "iris" in names
    # The second request carried the KeyError digest inside the untrusted-data envelope.
    fix_request = requests[1].body["messages"][-1]["content"]
    assert isinstance(fix_request, str)
    envelope = re.search(
        r"<untrusted-data id=\"(\w+)\"[^>]*>(.*?)</untrusted-data", fix_request, re.S
    )
    assert envelope is not None, fix_request
    assert "KeyError" in envelope.group(2)
    assert "petal_len" in envelope.group(2)
    assert "(1 of 3 attempts used)" in fix_request  # a fresh fix, the default
    # The first request described the notebook and its variables.
    first = requests[0].body["messages"][1]["content"]
    assert "iris = pd.DataFrame" in first
    assert "iris: " in first
    assert "sepal_length" in first
    assert first.rstrip().endswith("Request: plot the iris data")
    # Events: a diff for the fix, attempts counted, a finished event with the summary.
    updated = [e for e in recorder.of("cell_updated") if e["attempt"] == 2]
    assert len(updated) == 1
    assert '-plt.scatter(iris["petal_len"]' in updated[0]["diff"]
    assert '+plt.scatter(iris["petal_length"]' in updated[0]["diff"]
    assert [e["attempt"] for e in recorder.of("attempt")] == [1, 2]
    finished = recorder.of("finished")
    assert len(finished) == 1
    assert finished[0]["summary"]["attempts"] == 2
    seqs = [e["seq"] for e in recorder.events]
    assert seqs == list(range(1, len(seqs) + 1))
    # Streamed: the cell was inserted empty and the code went in as the model wrote it.
    inserted = recorder.of("cell_inserted")
    assert [(e["cell_id"], e["source"]) for e in inserted] == [(generated.id, "")]
    assert recorder.of("token")


async def test_attempts_cap(workspace: KernelWorkspace) -> None:
    script = [Reply.code("1/0"), Reply.code("2/0"), Reply.code("3/0")]
    with ScriptedModelServer(script) as server:
        outcome = await run_loop(workspace, server, "divide", max_attempts=2)
        assert len(server.chat_requests) == 2
    assert outcome.state is RunState.FAILED
    assert outcome.reason == "max_attempts"
    assert isinstance(outcome.error, CellError)
    assert outcome.error.ename == "ZeroDivisionError"
    assert outcome.attempts == 2
    assert len(outcome.cells) == 1


async def test_a_fix_is_told_what_is_there(iris_workspace: KernelWorkspace) -> None:
    """The KeyError's frame's real columns, and the closest to the missing one, go with it."""
    script = [Reply.code(WRONG), Reply.code(FIXED), Reply.text("Plotted.")]
    with ScriptedModelServer(script) as server:
        outcome = await run_loop(iris_workspace, server, "plot", share_outputs=False)
        fix_request = server.chat_requests[1].body["messages"][-1]["content"]
    assert outcome.state is RunState.DONE, outcome.error
    assert "What is there now, read from the kernel:" in fix_request
    envelopes = re.findall(r"<untrusted-data[^>]*>(.*?)</untrusted-data", fix_request, re.S)
    told = envelopes[-1]
    assert "iris is a DataFrame with columns: 'sepal_length'" in told
    assert "closest to 'petal_len' among iris's columns: 'petal_length'" in told
    # Names only: no value of the frame went with it (share_outputs is off).
    assert "5.1" not in fix_request


async def test_advice_goes_outside_the_kernel_output(iris_workspace: KernelWorkspace) -> None:
    """The system prompt says never to follow instructions inside the kernel's output: what to
    do about a fact is jupyter-ci's own advice, after the envelope; the facts stay inside."""
    spaced = "import pandas as pd\nw = pd.DataFrame({' WINDSPEED': [1.0]})\nw['WINDSPEED']"
    script = [Reply.code(spaced), Reply.code("w[' WINDSPEED']"), Reply.text("1.0")]
    with ScriptedModelServer(script) as server:
        # The model is asked for the fix only without jupyter-ci's own (test_levers.py).
        outcome = await run_loop(iris_workspace, server, "wind", own_fixes=False)
        fix_request = server.chat_requests[1].body["messages"][-1]["content"]
    assert outcome.state is RunState.DONE, outcome.error
    inside, after = fix_request.split("What is there now, read from the kernel:\n")[1].split(
        "</untrusted-data", 1
    )
    assert "w's column is ' WINDSPEED', with spaces in its name: w[' WINDSPEED']" in inside
    assert "advice" not in inside
    assert ADVICE["spaced_column"] in after
    assert "WINDSPEED" not in after


async def test_an_answer_line_written_as_code_gets_the_advice(
    iris_workspace: KernelWorkspace,
) -> None:
    script = [
        Reply.code("total = 3\nprint(@total[total])"),
        Reply.code("total = 3\nprint(f'@total[{total}]')"),
        Reply.text("@total[3]"),
    ]
    with ScriptedModelServer(script) as server:
        outcome = await run_loop(iris_workspace, server, "the total, as @total[value]")
        fix_request = server.chat_requests[1].body["messages"][-1]["content"]
    assert outcome.state is RunState.DONE, outcome.error
    assert "SyntaxError" in fix_request
    # No fact from the kernel to tell: the advice alone, after the tries' account.
    assert "What is there now" not in fix_request
    assert ADVICE["answer_as_code"] in fix_request.rsplit("</untrusted-data", 1)[1]


async def test_a_keyword_the_function_does_not_take_is_told_its_parameters(
    iris_workspace: KernelWorkspace,
) -> None:
    """A model trained on an older library passes a keyword a newer one removed (scikit-learn's
    ``squared=False``, three times in a row on the dev set): the fix is told the parameters."""
    setup = "def error_of(y_true, y_pred, *, sample_weight=None):\n    return 0.5\n"
    script = [
        Reply.code(setup + "print(error_of([1], [2], squared=False))"),
        Reply.code(setup + "print(error_of([1], [2]) ** 0.5)"),
        Reply.text("0.707"),
    ]
    with ScriptedModelServer(script) as server:
        outcome = await run_loop(iris_workspace, server, "the error's root")
        fix_request = server.chat_requests[1].body["messages"][-1]["content"]
    assert outcome.state is RunState.DONE, outcome.error
    inside, after = fix_request.split("What is there now, read from the kernel:\n")[1].split(
        "</untrusted-data", 1
    )
    assert (
        "error_of takes the parameters (y_true, y_pred, *, sample_weight): none is named 'squared'"
    ) in inside
    assert ADVICE["unknown_keyword"] in after


#: Settings where a reply cannot differ from the last to the same prompt (temperature 0, no fix
#: temperatures): a fix that runs nothing is not asked for once more, free (test_levers.py).
DETERMINISTIC: dict[str, Any] = {"temperature": 0, "fix_temperatures": ""}

#: A fix that runs nothing, as the model may reply it: the failed code again (a trailing
#: newline aside), or prose without code; the notice said, and how the model is asked again.
NOTHING_TO_RUN = [
    (
        Reply.code("value = 1/0\n"),
        "The model proposed the code that just failed again; it was not run (attempt 2/3).",
        "Your corrected code is the code that just failed, unchanged, so it was not run",
    ),
    (
        Reply.text("Division by zero is undefined, so the value cannot be computed."),
        "The model replied without code for the failing cell (attempt 2/3).",
        "Your reply had no code, so nothing was run (attempt 2 of 3",
    ),
]


@pytest.mark.parametrize(("fix", "notice", "asked"), NOTHING_TO_RUN, ids=["same", "no code"])
async def test_a_fix_that_runs_nothing_uses_an_attempt_and_is_asked_again(
    workspace: KernelWorkspace, fix: Reply, notice: str, asked: str
) -> None:
    script = [Reply.code("value = 1/0"), fix, Reply.code("value = 1/1"), Reply.text("It is 1.")]
    recorder = Recorder()
    with ScriptedModelServer(script) as server:
        # The long conversation's prompts (test_levers.py has the fresh fixes' account), at
        # temperature 0 throughout: no free ask once more (test_levers.py has it).
        outcome = await run_loop(
            workspace, server, "divide", recorder=recorder, fresh_fixes=False, **DETERMINISTIC
        )
        requests = server.chat_requests
    assert outcome.state is RunState.DONE, outcome.error
    # Ran twice, but three attempts used, as the cell's badge says: the second fix ran nothing.
    assert outcome.attempts == 3
    assert "— 1 cell, 3 attempts," in outcome.status_line()
    assert [e["attempt"] for e in recorder.of("attempt")] == [1, 3]
    notices = [e["text"] for e in recorder.of("message") if e["role"] == "notice"]
    assert notice in notices, notices
    asked_again = requests[2].body["messages"][-1]["content"]
    assert asked_again.startswith(asked), asked_again
    assert "attempt 2 of 3" in asked_again
    (cell,) = [c for c in await workspace.read_cells() if c.id in outcome.cells]
    assert cell.source == "value = 1/1"


@pytest.mark.parametrize(
    "fix", [Reply.code("1/0", times=None), Reply.text("I cannot fix it.", times=None)]
)
async def test_fixes_that_run_nothing_use_up_the_attempts(
    workspace: KernelWorkspace, fix: Reply
) -> None:
    with ScriptedModelServer([Reply.code("1/0"), fix]) as server:
        outcome = await run_loop(workspace, server, "divide", max_attempts=3, **DETERMINISTIC)
        assert len(server.chat_requests) == 3
    # Ended as fixes that ran out end, with the cell's own error (not a bad reply).
    assert (outcome.state, outcome.reason) == (RunState.FAILED, "max_attempts")
    # All three used, as the notices say ("attempt 3/3"), though only the first ran.
    assert outcome.attempts == 3
    assert isinstance(outcome.error, CellError)
    assert outcome.error.ename == "ZeroDivisionError"


async def test_one_attempt_means_no_fix(workspace: KernelWorkspace) -> None:
    with ScriptedModelServer([Reply.code("1/0")]) as server:
        outcome = await run_loop(workspace, server, "divide", max_attempts=1)
        assert len(server.chat_requests) == 1
    assert outcome.reason == "max_attempts"


async def test_steps_cap(workspace: KernelWorkspace) -> None:
    script = [Reply.code("x = 1"), Reply.code("y = 2"), Reply.code("z = 3")]
    with ScriptedModelServer(script) as server:
        outcome = await run_loop(workspace, server, "count", max_steps=2)
        assert len(server.chat_requests) == 2
    assert outcome.state is RunState.DONE
    assert outcome.reason == "max_steps"
    assert len(outcome.cells) == 2
    sources = [cell.source for cell in await workspace.read_cells()]
    assert sources == ["x = 1", "y = 2"]


async def test_token_cap_stops_cleanly_naming_it(workspace: KernelWorkspace) -> None:
    script = [Reply.code("x = 1", times=None)]
    with ScriptedModelServer(script) as server:
        outcome = await run_loop(workspace, server, "count", max_tokens_per_run=1500, max_steps=50)
        assert len(server.chat_requests) >= 2
    assert outcome.state is RunState.FAILED, outcome.error
    assert outcome.reason == "budget_exceeded", outcome.error
    assert isinstance(outcome.error, BudgetExceeded)
    assert outcome.error.cap == "max_tokens_per_run"
    assert "--max-tokens-per-run" in outcome.error.hint


async def test_cost_cap_with_a_priced_model(workspace: KernelWorkspace) -> None:
    script = [Reply.code("x = 1"), Reply.code("y = 2")]
    with ScriptedModelServer(script) as server:
        outcome = await run_loop(
            workspace, server, "count", model_name="openai/gpt-4o", max_cost_per_run=0.000001
        )
    assert outcome.reason == "budget_exceeded", outcome.error
    assert isinstance(outcome.error, BudgetExceeded)
    assert outcome.error.cap == "max_cost_per_run"
    assert outcome.usage.cost is not None


async def test_unknown_price_is_said_once(workspace: KernelWorkspace) -> None:
    recorder = Recorder()
    with ScriptedModelServer([Reply.code("x = 1"), Reply.text("done")]) as server:
        outcome = await run_loop(workspace, server, "x", recorder=recorder)
    notices = [e["text"] for e in recorder.of("message") if e["role"] == "notice"]
    assert len(notices) == 1
    assert "cost cap cannot be enforced" in notices[0]
    assert outcome.usage.cost is None
    assert "cost unknown" in outcome.status_line()


async def test_timeout_interrupts_and_is_fed_back(workspace: KernelWorkspace) -> None:
    script = [Reply.code("while True:\n    pass"), Reply.code("x = 'fast'"), Reply.text("ok")]
    with ScriptedModelServer(script) as server:
        outcome = await run_loop(workspace, server, "loop", timeout=1)
        fix_request = server.chat_requests[1].body["messages"][-1]["content"]
    assert outcome.state is RunState.DONE, outcome.error
    assert "still running after 1 seconds and was interrupted" in fix_request
    cells = await workspace.read_cells()
    assert cells[-1].source == "x = 'fast'"


async def test_kernel_death_ends_the_run_without_replay(workspace: KernelWorkspace) -> None:
    script = [Reply.code("import os\nos._exit(1)"), Reply.code("x = 1", times=None)]
    recorder = Recorder()
    with ScriptedModelServer(script) as server:
        outcome = await run_loop(workspace, server, "die", recorder=recorder)
        assert len(server.chat_requests) == 1
    assert [e["status"] for e in recorder.of("execution_finished")] == ["kernel_died"]
    assert outcome.state is RunState.FAILED
    assert outcome.reason == "kernel_died"
    assert "re-run the cells you need" in outcome.error.hint  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("fault", "kind"),
    [
        (Fault.auth(), "auth"),
        (Fault.rate_limit(0.01), "rate_limit"),
        (Fault.server_error(), "provider"),
        (Fault.cut_stream(2), "bad_reply"),
        (Fault.length(3), "bad_reply"),
        (Fault.malformed_json(), "bad_reply"),
        (Fault.empty_stream(), "empty_reply"),
    ],
)
async def test_provider_faults_fail_the_run_clearly(
    workspace: KernelWorkspace, fault: Fault, kind: str
) -> None:
    with ScriptedModelServer([Reply.fail(fault, content="```python\nx = 1", times=None)]) as server:
        outcome = await run_loop(workspace, server, "anything")
    assert outcome.state is RunState.FAILED
    assert outcome.reason == "model_error"
    assert isinstance(outcome.error, ModelError)
    assert outcome.error.kind == kind
    assert KEY not in str(outcome.error)


async def test_a_cut_stream_leaves_its_half_written_cell_commented_out(
    workspace: KernelWorkspace,
) -> None:
    recorder = Recorder()
    reply = Reply.fail(
        Fault.cut_stream(10), content="```python\nx = 1\ny = 2\nz = 3 and more", times=None
    )
    with ScriptedModelServer([reply]) as server:
        outcome = await run_loop(workspace, server, "make x", recorder=recorder)
    assert (outcome.state, outcome.reason) == (RunState.FAILED, "model_error")
    [cell] = await workspace.read_cells()
    lines = cell.source.splitlines()
    assert lines[0] == UNFINISHED_NOTE
    assert lines[1:3] == ["# x = 1", "# y = 2"]
    assert all(line.startswith("#") for line in lines)  # nothing in it runs, Run All included
    [update] = recorder.of("cell_updated")
    assert (update["cell_id"], update["cause"], update["source"]) == (
        cell.id,
        "stopped",
        cell.source,
    )
    assert recorder.of("execution_finished") == []
    assert outcome.cells == [cell.id]


async def test_a_cut_stream_before_any_code_deletes_the_cell_it_began(
    workspace: KernelWorkspace,
) -> None:
    recorder = Recorder()
    # The first line of the block is blank: the cell is made for it, and no code follows.
    reply = Reply.fail(Fault.cut_stream(3), content="Here:\n```python\n    \nx = 1\n", times=None)
    with ScriptedModelServer([reply]) as server:
        outcome = await run_loop(workspace, server, "make x", recorder=recorder)
    assert outcome.state is RunState.FAILED
    assert await workspace.read_cells() == []
    [inserted] = recorder.of("cell_inserted")
    [deleted] = recorder.of("cell_deleted")
    assert deleted["cell_id"] == inserted["cell_id"]
    assert outcome.cells == []


async def test_stop_while_code_streams_leaves_the_cell_commented_out(
    workspace: KernelWorkspace,
) -> None:
    recorder = Recorder()
    holder: list[AgentRun] = []
    code = "\n".join(f"value_{i} = {i}" for i in range(200))
    with ScriptedModelServer([Reply.code(code, delay=0.01)]) as server:
        task = asyncio.ensure_future(
            run_loop(workspace, server, "count", recorder=recorder, run_holder=holder)
        )
        await asyncio.wait_for(recorder.first("cell_inserted"), 60)
        holder[0].stop()
        outcome = await asyncio.wait_for(task, 60)
    assert (outcome.state, outcome.reason) == (RunState.STOPPED, "user")
    [cell] = await workspace.read_cells()
    lines = cell.source.splitlines()
    assert lines[0] == UNFINISHED_NOTE
    assert lines[1] == "# value_0 = 0"
    assert all(line.startswith("#") for line in lines)
    assert len(lines) < 201  # stopped before the model was done
    assert [e["cause"] for e in recorder.of("cell_updated")] == ["stopped"]
    assert recorder.of("execution_finished") == []
    # Run as it stands, it does nothing.
    assert (await workspace.run_cell(cell.id, timeout=30)).status.value == "ok"
    assert "value_0" not in {v.name for v in await workspace.inspect_variables()}


async def test_an_empty_reply_is_asked_for_again_then_explained(
    workspace: KernelWorkspace,
) -> None:
    # Once empty, then a real reply: the run goes on as if nothing happened.
    script = [Reply.fail(Fault.empty_stream()), Reply.code("x = 1"), Reply.text("x is 1.")]
    with ScriptedModelServer(script) as server:
        outcome = await run_loop(workspace, server, "make x")
        assert len(server.chat_requests) == 3
    assert (outcome.state, outcome.reason) == (RunState.DONE, "answered")
    # Twice empty: the error says what is known (the prompt's size against context_tokens).
    with ScriptedModelServer([Reply.fail(Fault.empty_stream(), times=None)]) as server:
        outcome = await run_loop(workspace, server, "make y", context_tokens=4000)
        assert len(server.chat_requests) == 2
    assert isinstance(outcome.error, ModelError)
    assert (outcome.error.kind, outcome.error.message) == (
        "empty_reply",
        "The model sent an empty reply, twice.",
    )
    assert re.search(r"The prompt was about [\d,]+ tokens", outcome.error.hint)
    assert "context_tokens (now 4,000)" in outcome.error.hint


async def test_tokens_that_streamed_before_stop_are_counted(workspace: KernelWorkspace) -> None:
    recorder = Recorder()
    holder: list[AgentRun] = []
    with ScriptedModelServer([Reply.text("word " * 400, delay=0.01)]) as server:
        task = asyncio.ensure_future(
            run_loop(workspace, server, "talk", recorder=recorder, run_holder=holder)
        )
        await asyncio.wait_for(recorder.first("token"), 60)
        holder[0].stop()
        outcome = await asyncio.wait_for(task, 60)
    assert outcome.state is RunState.STOPPED
    assert outcome.usage.completion_tokens > 0
    assert outcome.usage.prompt_tokens > 0
    assert outcome.usage.estimated
    assert outcome.usage.cost is None
    assert "(est.)" in outcome.status_line()


async def test_prose_only_reply_is_the_answer(workspace: KernelWorkspace) -> None:
    with ScriptedModelServer([Reply.text("A DataFrame has a shape attribute.")]) as server:
        outcome = await run_loop(workspace, server, "what is a shape?")
    assert outcome.state is RunState.DONE
    assert outcome.reason == "answered"
    assert outcome.answer == "A DataFrame has a shape attribute."
    assert outcome.cells == []
    assert await workspace.read_cells() == []


async def test_malformed_code_reply_is_repaired(workspace: KernelWorkspace) -> None:
    reply = "Here:\n```\nanswer = 6 * 7\nprint(answer)\n```\nOutput:\n```\n42\n```"
    with ScriptedModelServer([Reply.text(reply), Reply.text("It is 42.")]) as server:
        outcome = await run_loop(workspace, server, "compute")
    assert outcome.state is RunState.DONE, outcome.error
    cells = await workspace.read_cells()
    assert [cell.source for cell in cells] == ["answer = 6 * 7\nprint(answer)"]
    assert cells[0].outputs[0]["text"] == "42\n"


async def test_stop_mid_stream_closes_it(workspace: KernelWorkspace) -> None:
    recorder = Recorder()
    holder: list = []
    with ScriptedModelServer([Reply.fail(Fault.never_ending(0.02))]) as server:
        task = asyncio.ensure_future(
            run_loop(workspace, server, "go on", recorder=recorder, run_holder=holder)
        )
        for _ in range(300):
            if recorder.of("token"):
                break
            await asyncio.sleep(0.02)
        assert recorder.of("token"), "the stream never started"
        holder[0].stop()
        outcome = await asyncio.wait_for(task, 10)
        request = await asyncio.to_thread(server.wait_for_close, 5.0)
    assert outcome.state is RunState.STOPPED
    assert outcome.reason == "user"
    assert request.client_closed_early


async def stopped_while_running(
    workspace: KernelWorkspace, server: ScriptedModelServer, timeout: float
) -> RunOutcome:
    """Run a request, Stop it half a second after its first cell began; its outcome."""
    recorder = Recorder()
    holder: list[AgentRun] = []
    task = asyncio.ensure_future(
        run_loop(workspace, server, "sleep", recorder=recorder, run_holder=holder)
    )
    await asyncio.wait_for(recorder.first("execution_started"), 60)
    await asyncio.sleep(0.5)  # Stop while the cell runs; an earlier Stop works too, but the
    # stubborn cell's test needs its code to be running to catch the first interrupt
    holder[0].stop()
    return await asyncio.wait_for(task, timeout)


async def test_stop_while_a_cell_runs_interrupts_and_is_not_fixed(
    workspace: KernelWorkspace,
) -> None:
    script = [Reply.code("import time\ntime.sleep(600)"), Reply.code("x = 1", times=None)]
    with ScriptedModelServer(script) as server:
        outcome = await stopped_while_running(workspace, server, timeout=20)
        assert len(server.chat_requests) == 1
    assert outcome.state is RunState.STOPPED
    assert outcome.reason == "user"


async def test_stop_interrupts_again_a_cell_that_ignores_the_first_interrupt(
    workspace: KernelWorkspace,
) -> None:
    stubborn = (
        "import time\n"
        "try:\n"
        "    time.sleep(600)\n"
        "except KeyboardInterrupt:\n"
        "    print('ignored one interrupt', flush=True)\n"
        "    time.sleep(600)"
    )
    with ScriptedModelServer([Reply.code(stubborn), Reply.code("x = 1", times=None)]) as server:
        outcome = await stopped_while_running(workspace, server, timeout=30)
        assert len(server.chat_requests) == 1
    assert (outcome.state, outcome.reason) == (RunState.STOPPED, "user")
    [cell] = await workspace.read_cells()
    printed = "".join(o.get("text", "") for o in cell.outputs if o["output_type"] == "stream")
    assert "ignored one interrupt" in printed
    assert [o["ename"] for o in cell.outputs if o["output_type"] == "error"] == [
        "KeyboardInterrupt"
    ]


async def test_a_cell_that_ignores_every_interrupt_is_left_and_the_run_stops(
    workspace: KernelWorkspace, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(loop, "STOP_INTERRUPT_EVERY", 0.2)  # the interrupts' pace, not the test's
    # SIGINT ignored outright: a handler that catches KeyboardInterrupt can itself be
    # interrupted (inside its own print), which ends the cell and makes the test a race. Stop
    # comes once the cell says SIGINT is ignored (a file it writes): before, an interrupt ends
    # the cell in its imports.
    deaf_now = tmp_path / "deaf"
    deaf = (
        "import pathlib, signal, time\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        f"pathlib.Path({str(deaf_now)!r}).write_text('deaf')\n"
        "time.sleep(600)"
    )
    recorder = Recorder()
    holder: list[AgentRun] = []
    with ScriptedModelServer([Reply.code(deaf), Reply.code("x = 1", times=None)]) as server:
        task = asyncio.ensure_future(
            run_loop(workspace, server, "sleep", recorder=recorder, run_holder=holder)
        )
        await asyncio.wait_for(recorder.first("execution_started"), 60)
        for _ in range(600):
            if deaf_now.exists():
                break
            await asyncio.sleep(0.1)
        holder[0].stop()
        outcome = await asyncio.wait_for(task, 60)
        assert len(server.chat_requests) == 1
    assert deaf_now.exists()
    assert (outcome.state, outcome.reason) == (RunState.STOPPED, "user")
    [ended] = recorder.of("execution_finished")
    assert (ended["status"], ended["digest"]) == ("interrupted", loop.ABANDONED)
    assert recorder.of("finished")[0]["text"].startswith("jupyter-ci: stopped by the user")


async def test_missing_package_is_proposed_not_installed(workspace: KernelWorkspace) -> None:
    with ScriptedModelServer([Reply.code("import sklearn_does_not_exist_xyz")]) as server:
        outcome = await run_loop(workspace, server, "fit")
    assert outcome.state is RunState.FAILED
    assert outcome.reason == "missing_package"
    sources = [cell.source for cell in await workspace.read_cells()]
    assert sources == [
        "%pip install sklearn_does_not_exist_xyz",
        "import sklearn_does_not_exist_xyz",
    ]
    pip_cell = (await workspace.read_cells())[0]
    assert pip_cell.execution_count is None  # proposed, never run


async def test_insert_mode_never_runs(workspace: KernelWorkspace) -> None:
    with ScriptedModelServer([Reply.code("x = 1")]) as server:
        outcome = await run_loop(workspace, server, "x", mode="insert")
    assert outcome.reason == "inserted"
    cells = await workspace.read_cells()
    assert cells[0].source == "x = 1"
    assert cells[0].execution_count is None
    assert "x" not in {v.name for v in await workspace.inspect_variables()}


async def test_fix_this_cell_replaces_its_code_and_reruns_it(tmp_path: Path) -> None:
    """ "Fix with jupyter-ci" on a failed cell: no new cell, the diff, the rerun, the prose."""
    from jupyter_ci.agent.loop import AgentRun, RunRequest
    from jupyter_ci.models.litellm_model import LiteLLMModel
    from jupyter_ci.settings import Settings

    path = write_notebook(tmp_path / "fix.ipynb", [IRIS_SETUP, 'iris["petal_len"].mean()'])
    workspace = await KernelWorkspace.open(path)
    try:
        await workspace.restore()
        cells = await workspace.read_cells()
        broken = cells[1].id
        first = await workspace.run_cell(broken, 30)
        assert first.error is not None  # the user's cell failed: KeyError
        script = [Reply.code('iris["petal_length"].mean()', prose="The column is petal_length.")]
        recorder = Recorder()
        with ScriptedModelServer(script) as server:
            chosen = Settings(model="openai/scripted", api_base=server.base_url)
            model = LiteLLMModel(chosen, api_key=KEY)
            request = RunRequest("", chosen, fix_cell_id=broken)
            outcome = await AgentRun(request, workspace, model, on_event=recorder).run()
            sent = server.chat_requests[0].body["messages"][-1]["content"]
        after = await workspace.read_cells()
    finally:
        await workspace.close()
    assert (outcome.state, outcome.reason) == (RunState.DONE, "fixed")
    assert outcome.answer == "The column is petal_length."
    assert [cell.id for cell in after] == [cell.id for cell in cells]  # no cell added
    assert after[1].source == 'iris["petal_length"].mean()'
    assert after[1].outputs[0]["output_type"] == "execute_result"
    [update] = recorder.of("cell_updated")
    assert '-iris["petal_len"].mean()' in update["diff"]
    assert '+iris["petal_length"].mean()' in update["diff"]
    # The model saw the cell's code and its KeyError, as untrusted data, and the request.
    assert re.search(r"<untrusted-data[^>]*the cell to fix", sent)
    assert "KeyError" in sent
    assert sent.rstrip().endswith("Request: Fix this cell.")


async def test_share_outputs_off_keeps_values_away_from_the_model(tmp_path: Path) -> None:
    """Code, names, types and errors reach the model; printed values, results and samples not."""
    secret = "SECRET-ROW-42"
    setup = 'token = "SECRET" + "-ROW-" + str(6 * 7)\nprint(token)\ntoken'  # not in the code
    path = write_notebook(tmp_path / "private.ipynb", [setup])
    workspace = await KernelWorkspace.open(path)
    try:
        await workspace.restore()
        cells = await workspace.read_cells()
        await workspace.run_cell(cells[0].id, 30)  # its outputs are in the notebook now
        script = [
            Reply.code("print(token)\ntoken[100]"),  # prints the value, then an IndexError
            Reply.code("print(len(token))"),
            Reply.text("Done."),
        ]
        with ScriptedModelServer(script) as server:
            outcome = await run_loop(workspace, server, "use token", share_outputs=False)
            sent = json.dumps([r.body["messages"] for r in server.chat_requests])
    finally:
        await workspace.close()
    assert outcome.ok
    assert secret not in sent
    assert "token: str" in sent  # the variable's name and type
    assert "IndexError" in sent  # errors still go back, so fixes work
    assert "outputs are not shared with the model" in sent


# --- review mode: Reject is told to the model within the run ------------------------------------


def reviewer(*decisions: str) -> tuple[Approver, list[tuple[str, str]]]:
    """An approver answering ``decisions`` in turn (then ``run``); records what it was shown."""
    shown: list[tuple[str, str]] = []
    answers = list(decisions)

    async def approve(cell_id: str, source: str, diff: str) -> ReviewDecision:
        shown.append((cell_id, source))
        return ReviewDecision(answers.pop(0) if answers else "run")

    return approve, shown


async def test_a_rejected_cell_is_told_to_the_model_and_its_other_proposal_reviewed(
    workspace: KernelWorkspace,
) -> None:
    approve, shown = reviewer("reject", "run")
    script = [Reply.code("a = 1"), Reply.code("b = 2"), Reply.text("b is 2.")]
    recorder = Recorder()
    with ScriptedModelServer(script) as server:
        outcome = await run_loop(
            workspace, server, "set a variable", mode="review", approve=approve, recorder=recorder
        )
        told = server.chat_requests[1].body["messages"][-1]["content"]
    assert (outcome.state, outcome.reason) == (RunState.DONE, "answered")
    # The other proposal went into the same cell (one cell, shown as a diff), was reviewed
    # again and ran; the rejected code never ran.
    [cell] = await workspace.read_cells()
    assert [source for _, source in shown] == ["a = 1", "b = 2"]
    assert shown[0][0] == shown[1][0] == cell.id
    assert cell.source == "b = 2"
    assert cell.execution_count is not None
    names = {v.name for v in await workspace.inspect_variables()}
    assert "b" in names
    assert "a" not in names
    assert "The user rejected this cell without running it." in told
    # The loop says each fact once: the streamed code, the rejection (as the user's word),
    # the other proposal with its diff.
    streamed, update = recorder.of("cell_updated")
    assert (streamed["cause"], streamed["source"], streamed["diff"]) == ("streamed", "a = 1", "")
    assert (update["cause"], update["source"]) == ("reproposed", "b = 2")
    assert "-a = 1" in update["diff"]
    assert "+b = 2" in update["diff"]
    [rejection] = [e for e in recorder.of("message") if e["role"] == "user"]
    assert rejection["text"].startswith("I rejected the cell you proposed")
    assert "a = 1" in rejection["text"]
    states = [e["state"] for e in recorder.of("state")]
    assert states[:4] == ["generating", "awaiting_approval", "generating", "awaiting_approval"]


async def test_a_rejections_comment_goes_to_the_model_and_stays_in_the_conversation(
    workspace: KernelWorkspace,
) -> None:
    answers = [ReviewDecision("reject", None, "use a dict, not a list"), ReviewDecision("run")]

    async def approve(cell_id: str, source: str, diff: str) -> ReviewDecision:
        return answers.pop(0)

    script = [Reply.code("a = [1]"), Reply.code("a = {'one': 1}"), Reply.text("A dict.")]
    recorder = Recorder()
    with ScriptedModelServer(script) as server:
        outcome = await run_loop(
            workspace, server, "make a", mode="review", approve=approve, recorder=recorder
        )
        told = server.chat_requests[1].body["messages"][-1]["content"]
    assert (outcome.state, outcome.reason) == (RunState.DONE, "answered")
    assert told.startswith(
        "The user rejected this cell without running it.\n\nTheir reason: use a dict, not a list"
    ), told
    [rejection] = [e for e in recorder.of("message") if e["role"] == "user"]
    assert rejection["text"].startswith(
        "I rejected the cell you proposed, without running it.\n\nMy reason: use a dict, not a list"
    ), rejection["text"]


async def test_a_cell_the_user_ran_while_it_awaited_review_counts_as_run(
    workspace: KernelWorkspace,
) -> None:
    async def user_runs_it(cell_id: str, source: str, diff: str) -> ReviewDecision:
        await workspace.run_cell(cell_id, 0)  # the notebook's own Run, not the loop's
        return ReviewDecision("ran")

    recorder = Recorder()
    script = [Reply.code("b = 2\nprint(b * 21)"), Reply.text("b is 2.")]
    with ScriptedModelServer(script) as server:
        outcome = await run_loop(
            workspace, server, "set b", mode="review", approve=user_runs_it, recorder=recorder
        )
        told = server.chat_requests[1].body["messages"][-1]["content"]
    assert (outcome.state, outcome.reason) == (RunState.DONE, "answered")
    [cell] = await workspace.read_cells()
    assert cell.execution_count == 1  # ran once: the user's run, not again by the loop
    [ended] = recorder.of("execution_finished")
    assert (ended["status"], ended["execution_count"]) == ("ok", 1)
    assert "42" in told  # the model was told what the user's run printed


async def test_after_a_rejection_prose_ends_the_run_and_the_cell_stays_unrun(
    workspace: KernelWorkspace,
) -> None:
    approve, _ = reviewer("reject")
    recorder = Recorder()
    with ScriptedModelServer([Reply.code("a = 1"), Reply.text("Then I stop.")]) as server:
        outcome = await run_loop(
            workspace, server, "x", mode="review", approve=approve, recorder=recorder
        )
        assert len(server.chat_requests) == 2
    assert (outcome.state, outcome.reason, outcome.answer) == (
        RunState.DONE,
        "rejected",
        "Then I stop.",
    )
    assert [e["text"] for e in recorder.of("message") if e["role"] == "assistant"] == [
        "Then I stop."
    ]
    [cell] = await workspace.read_cells()
    assert (cell.source, cell.execution_count) == ("a = 1", None)


async def test_rejections_are_capped_by_max_attempts(workspace: KernelWorkspace) -> None:
    approve, shown = reviewer("reject", "reject")
    script = [Reply.code("a = 1"), Reply.code("a = 2"), Reply.code("a = 3")]
    with ScriptedModelServer(script) as server:
        outcome = await run_loop(
            workspace, server, "x", mode="review", approve=approve, max_attempts=2
        )
        assert len(server.chat_requests) == 2  # not asked a third time
    assert (outcome.state, outcome.reason) == (RunState.DONE, "rejected")
    assert len(shown) == 2
    [cell] = await workspace.read_cells()
    assert (cell.source, cell.execution_count) == ("a = 2", None)
