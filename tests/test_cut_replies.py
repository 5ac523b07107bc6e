"""Replies that do not end as a reply should, in the headless loop, ``jupyter ci run`` and
``%%ci`` in the kernel: a stream the provider ends cleanly in the middle of the code (no
``finish_reason``, no ``[DONE]``), whose code, cut short, must never run; a reply that never
ends or grows past the caps, which is cut at the cap as it streams. The cell is left unfinished
(ARCHITECTURE.md, "Cells the model did not finish").
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from jupyter_ci.agent.cells import UNFINISHED_NOTE
from jupyter_ci.agent.model_calls import MAX_REPLY_CHARS
from jupyter_ci.agent.states import RunState
from jupyter_ci.errors import ModelError
from jupyter_ci.testing import Fault, Reply, ScriptedModelServer
from jupyter_ci.testing.openai_format import split_tokens
from jupyter_ci.workspaces.kernel import KernelWorkspace

from .loop_support import Recorder, run_loop, write_notebook
from .test_cli_run import KEY, ci_run

#: Code whose first lines, run alone, lose a file that the whole of it keeps (rewritten).
REWRITE = (
    "import os\n"
    'os.rename("precious.txt", "precious.tmp")\n'
    'text = open("precious.tmp").read().upper()\n'
    'open("precious.txt", "w").write(text)\n'
    'os.remove("precious.tmp")'
)
#: The line after which the stream is cut.
CUT_AFTER = 'os.rename("precious.txt", "precious.tmp")\n'


def chunks_through(content: str, marker: str) -> int:
    """How many SSE chunks (the role chunk first) carry ``content`` up to the end of ``marker``."""
    end = content.index(marker) + len(marker)
    pieces = split_tokens(content)
    sent = 0
    for count, piece in enumerate(pieces, start=1):
        sent += len(piece)
        if sent >= end:
            assert sent == end, "the marker must end at a token's end"
            return 1 + count
    raise AssertionError("marker beyond the content")


#: The ways a provider ends a reply cleanly before its end, and what the user is told of each:
#: the body ends with no finish reason and no ``[DONE]``; or the reply reaches its token limit
#: (``finish_reason`` ``"length"``, and ``[DONE]``), as a local model that rambles on does.
CUTS = {
    "clean": ("ended before it was complete", lambda after: Fault.cut_stream(after, graceful=True)),
    "length": ("reached its length limit", Fault.length),
}


def cut_rewrite(times: int | None = None, cut: str = "clean") -> Reply:
    """The rewrite's reply, its stream ended cleanly right after the rename."""
    content = Reply.code(REWRITE).content or ""
    after = chunks_through(content, CUT_AFTER)
    return Reply.fail(CUTS[cut][1](after), content=content, times=times)


def precious(folder: Path) -> Path:
    path = folder / "precious.txt"
    path.write_text("keep me")
    return path


@pytest.mark.asyncio
@pytest.mark.parametrize("cut", sorted(CUTS))
async def test_a_cleanly_ended_stream_mid_code_runs_nothing_headless(
    tmp_path: Path, cut: str
) -> None:
    kept = precious(tmp_path)
    recorder = Recorder()
    workspace = await KernelWorkspace.open(write_notebook(tmp_path / "a.ipynb"))
    try:
        with ScriptedModelServer([cut_rewrite(times=None, cut=cut)]) as server:
            outcome = await run_loop(workspace, server, "upper-case the file", recorder=recorder)
        cells = await workspace.read_cells()
    finally:
        await workspace.close()
    assert kept.read_text() == "keep me"
    assert (outcome.state, outcome.reason) == (RunState.FAILED, "model_error")
    assert isinstance(outcome.error, ModelError)
    assert outcome.error.kind == "bad_reply"
    assert CUTS[cut][0] in str(outcome.error)
    assert recorder.of("execution_started") == []
    [cell] = cells
    assert cell.source.splitlines()[0] == UNFINISHED_NOTE
    assert all(line.startswith("#") for line in cell.source.splitlines())
    assert 'os.rename("precious.txt", "precious.tmp")' in cell.source


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("reply", "what"),
    [
        # Prose cut short: an answer that never ended is not the model's answer.
        (Reply.text("The answer is that the column holds"), "prose"),
        # A tool call whose arguments the stream cut (incomplete JSON).
        (Reply.tool_call("run_python", {"code": "import os\nos.remove('x')\nprint(1)"}), "tool"),
    ],
)
async def test_other_replies_ended_cleanly_before_their_end_are_unfinished(
    tmp_path: Path, reply: Reply, what: str
) -> None:
    content = reply.content
    chunks = 3 if what == "prose" else 4
    cut = Reply(
        content=content,
        tool_calls=reply.tool_calls,
        times=None,
        fault=Fault.cut_stream(chunks, graceful=True),
    )
    workspace = await KernelWorkspace.open(write_notebook(tmp_path / "a.ipynb"))
    try:
        with ScriptedModelServer([cut]) as server:
            outcome = await run_loop(
                workspace, server, "go", tool_calling="on" if what == "tool" else "off"
            )
        cells = await workspace.read_cells()
    finally:
        await workspace.close()
    assert (outcome.state, outcome.reason) == (RunState.FAILED, "model_error"), outcome.error
    assert isinstance(outcome.error, ModelError)
    assert outcome.error.kind == "bad_reply"
    assert outcome.answer == ""
    assert cells == []


@pytest.mark.asyncio
async def test_a_closed_block_is_complete_without_a_finish_reason(tmp_path: Path) -> None:
    """The stream ends after the closing fence, with no finish reason: the code is whole."""
    content = Reply.code("answer = 6 * 7\nprint(answer)").content or ""
    whole = 1 + len(split_tokens(content))
    script = [
        Reply.fail(Fault.cut_stream(whole, graceful=True), content=content),
        Reply.text("It is 42."),
    ]
    workspace = await KernelWorkspace.open(write_notebook(tmp_path / "a.ipynb"))
    try:
        with ScriptedModelServer(script) as server:
            outcome = await run_loop(workspace, server, "compute")
        cells = await workspace.read_cells()
    finally:
        await workspace.close()
    assert outcome.state is RunState.DONE, outcome.error
    assert [cell.source for cell in cells] == ["answer = 6 * 7\nprint(answer)"]


@pytest.mark.asyncio
async def test_a_closed_block_before_the_length_limit_is_whole(tmp_path: Path) -> None:
    """The limit came in the prose after the closing fence: the code is whole and runs."""
    content = (Reply.code("answer = 6 * 7\nprint(answer)").content or "") + "\n\nThis prints"
    whole = 1 + len(split_tokens(content)) - 2
    script = [Reply.fail(Fault.length(whole), content=content), Reply.text("It is 42.")]
    workspace = await KernelWorkspace.open(write_notebook(tmp_path / "a.ipynb"))
    try:
        with ScriptedModelServer(script) as server:
            outcome = await run_loop(workspace, server, "compute")
            assert server.chat_requests[0].outcome == "fault:length"
        cells = await workspace.read_cells()
    finally:
        await workspace.close()
    assert outcome.state is RunState.DONE, outcome.error
    assert [cell.source for cell in cells] == ["answer = 6 * 7\nprint(answer)"]
    assert "".join(o.get("text", "") for o in cells[0].outputs) == "42\n"


@pytest.mark.parametrize("cut", sorted(CUTS))
def test_jupyter_ci_run_leaves_a_cleanly_cut_cell_unrun(tmp_path: Path, cut: str) -> None:
    kept = precious(tmp_path)
    path = write_notebook(tmp_path / "a.ipynb", ["x = 1"])
    with ScriptedModelServer([cut_rewrite(times=None, cut=cut)]) as server:
        result = ci_run(
            str(path),
            "upper-case the file",
            "--model",
            "openai/scripted",
            "--api-base",
            server.base_url,
            env={"JUPYTER_CI_API_KEY": KEY},
        )
    assert result.returncode == 1, result.stderr
    assert kept.read_text() == "keep me"
    assert CUTS[cut][0] in result.stderr
    assert "failed (model error)" in result.stderr
    notebook = nbformat.read(str(path), as_version=4)
    assert notebook.cells[0].source == "x = 1"
    [cell] = notebook.cells[1:]
    assert cell.source.splitlines()[0] == UNFINISHED_NOTE
    assert cell.outputs == []


@pytest.mark.parametrize("cut", sorted(CUTS))
def test_ci_in_the_kernel_leaves_a_cleanly_cut_cell_unrun(tmp_path: Path, cut: str) -> None:
    kept = precious(tmp_path)
    with ScriptedModelServer([cut_rewrite(times=None, cut=cut)]) as server:
        setup = f"%load_ext jupyter_ci\n%ci --model openai/scripted --api-base {server.base_url}"
        notebook = nbformat.v4.new_notebook()
        notebook.cells = [
            nbformat.v4.new_code_cell(setup),
            nbformat.v4.new_code_cell("%%ci upper-case the file"),
        ]
        client = NotebookClient(
            notebook,
            timeout=120,
            kernel_name="python3",
            allow_errors=True,
            resources={"metadata": {"path": str(tmp_path)}},
        )
        client.execute()
    assert kept.read_text() == "keep me"
    text = "".join(
        output.get("text", "") or str(output.get("data", {}).get("text/plain", ""))
        for output in notebook.cells[1].outputs
    )
    assert CUTS[cut][0] in text
    assert "failed (model error)" in text
    assert not (tmp_path / "precious.tmp").exists()


#: A code block of 10 MB in lines of 100,000 characters.
HUGE_CODE = "\n".join(f"v{i} = '{'a' * 100_000}'" for i in range(100))


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("reply", "cap", "settings"),
    [
        (
            Reply.fail(Fault.never_ending(0.002), content="```python\nx = 1\n"),
            "max_tokens_per_run",
            {"max_tokens_per_run": 4000},
        ),
        # With the default token cap (200,000), the size of one reply is the cap it reaches.
        (Reply.code(HUGE_CODE), "one reply's size", {}),
    ],
    ids=["never-ending", "10-MB-block"],
)
async def test_caps_hold_while_a_reply_streams(
    tmp_path: Path, reply: Reply, cap: str, settings: dict[str, int]
) -> None:
    """A reply that never ends, or one far past any cap, is cut at the cap as it streams."""
    recorder = Recorder()
    workspace = await KernelWorkspace.open(write_notebook(tmp_path / "a.ipynb"))
    try:
        with ScriptedModelServer([reply]) as server:
            outcome = await asyncio.wait_for(
                run_loop(workspace, server, "go", recorder=recorder, **settings), 120
            )
            closed = await asyncio.to_thread(server.wait_for_close, 10.0)
        cells = await workspace.read_cells()
    finally:
        await workspace.close()
    assert (outcome.state, outcome.reason) == (RunState.FAILED, "budget_exceeded"), outcome.error
    assert cap in str(outcome.error)
    assert closed.client_closed_early  # the stream was closed at the cap
    assert recorder.of("execution_started") == []
    # What streamed stayed bounded: the tokens shown and the cell's source.
    shown = sum(len(event["text"]) for event in recorder.of("token"))
    assert shown <= MAX_REPLY_CHARS
    assert all(len(cell.source) <= MAX_REPLY_CHARS + 10_000 for cell in cells)
    assert all(line.startswith("#") for cell in cells for line in cell.source.splitlines())
    assert outcome.usage.completion_tokens > 0  # what streamed is counted


def test_jupyter_ci_run_ends_a_reply_that_never_ends_at_the_token_cap(tmp_path: Path) -> None:
    path = write_notebook(tmp_path / "a.ipynb", ["x = 1"])
    reply = Reply.fail(Fault.never_ending(0.002), content="```python\nx = 1\n")
    with ScriptedModelServer([reply]) as server:
        result = ci_run(
            str(path),
            "go on",
            "--model",
            "openai/scripted",
            "--api-base",
            server.base_url,
            "--max-tokens-per-run",
            "3000",
        )
    assert result.returncode == 1, result.stderr
    assert "failed (over budget)" in result.stderr
    assert "max_tokens_per_run" in result.stderr
