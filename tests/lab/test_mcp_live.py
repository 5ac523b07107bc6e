"""The MCP tools on a notebook open in a JupyterLab tab, in a real Jupyter server with real kernels:
the calls go through the tab (the Python test tab plays the browser, as in the other Lab-path
tests), each call is a run of the notebook's conversation, review mode waits for the user's
decision in the tab, and two agents on one notebook take the kernel's turn like runs do."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_server.utils import url_path_join

from jupyter_ci.testing.lab_tab import ScriptedTab, code_cell
from tests.mcp.support import http_client, structured, text


@pytest.fixture
def mcp_url(jp_serverapp: Any, jp_http_port: int, jp_base_url: str, http_server_client: Any) -> str:
    return url_path_join(f"http://localhost:{jp_http_port}", jp_base_url, "jupyter-ci", "mcp")


@pytest.fixture
def token(jp_serverapp: Any) -> str:
    return str(jp_serverapp.identity_provider.token)


async def open_in_tab(
    jp_serverapp: Any, root: Path, tab_factory: Callable[..., ScriptedTab], path: str, *sources: str
) -> tuple[ScriptedTab, str]:
    """A notebook with a session and a kernel (as JupyterLab opens one), open in a tab."""
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in sources]
    nbformat.write(notebook, root / path)
    session = await jp_serverapp.session_manager.create_session(
        path=path, name=path, type="notebook", kernel_name="python3"
    )
    tab = tab_factory()
    tab.open_notebook(
        path,
        session["kernel"]["id"],
        [code_cell(cell.source, cell.id) for cell in notebook.cells],
    )
    await tab.connect()
    return tab, session["kernel"]["id"]


async def test_execute_in_an_open_notebook_goes_through_its_tab_as_a_run(
    jp_serverapp: Any,
    jp_root_dir: Path,
    tab_factory: Callable[..., ScriptedTab],
    mcp_url: str,
    token: str,
    jp_fetch: Any,
) -> None:
    tab, _ = await open_in_tab(jp_serverapp, jp_root_dir, tab_factory, "live.ipynb", "x = 20")
    async with http_client(mcp_url, token) as client:
        result = structured(
            await client.call_tool("execute", {"path": "live.ipynb", "code": "21 * 2"})
        )
        view = structured(await client.call_tool("read_notebook", {"path": "live.ipynb"}))
    assert result["status"] == "ok", result
    assert "Out[1]: 42" in result["outputs"]
    cells = tab.notebooks["live.ipynb"].cells
    assert [c["source"] for c in cells] == ["x = 20", "21 * 2"]
    assert cells[1]["metadata"]["jupyter_ci"]["agent"] == "claude-code"
    assert cells[1]["execution_count"] == 1
    assert view["open_in_lab"] is True
    assert [c["id"] for c in view["cells"]] == [c["id"] for c in cells]
    # The tab saves the notebook (soon after the agent's change): on disk without real-time
    # collaboration.
    await tab.wait_until(lambda: tab.saves.get("live.ipynb", 0) >= 1)
    # The call was a run of the notebook's conversation: its events reached the tab...
    finished = await tab.wait_for_event(lambda e: e["type"] == "finished")
    assert finished["state"] == "done"
    assert finished["reason"] == "called"
    assert finished["text"].startswith("claude-code via jupyter-ci: done — 1 cell")
    inserted = await tab.wait_for_event(lambda e: e["type"] == "cell_inserted")
    assert inserted["cell_id"] == result["cell_id"]
    # ... and its record is the conversation's (Export shows the cell and its output).
    exported = (
        await jp_fetch("jupyter-ci", "conversation", "export", params={"path": "live.ipynb"})
    ).body.decode()
    assert "claude-code: execute" in exported
    assert "21 * 2" in exported


async def test_edit_cell_in_the_tab_is_undoable_and_shown_as_a_diff(
    jp_serverapp: Any,
    jp_root_dir: Path,
    tab_factory: Callable[..., ScriptedTab],
    mcp_url: str,
    token: str,
) -> None:
    tab, _ = await open_in_tab(jp_serverapp, jp_root_dir, tab_factory, "e.ipynb", "total = 1")
    cell_id = tab.notebooks["e.ipynb"].cells[0]["id"]
    async with http_client(mcp_url, token) as client:
        edited = structured(
            await client.call_tool(
                "edit_cell", {"path": "e.ipynb", "cell_id": cell_id, "source": "total = 2"}
            )
        )
    assert tab.notebooks["e.ipynb"].cells[0]["source"] == "total = 2"
    assert tab.undo[cell_id] == ["total = 1"]  # the user's original, one undo away
    update = await tab.wait_for_event(lambda e: e["type"] == "cell_updated")
    assert update["cause"] == "agent"
    assert "-total = 1" in update["diff"]
    assert update["diff"] == edited["diff"]


async def test_review_mode_waits_for_the_users_run_or_reject_in_the_tab(
    jp_serverapp: Any,
    jp_root_dir: Path,
    tab_factory: Callable[..., ScriptedTab],
    mcp_url: str,
    token: str,
) -> None:
    tab, _ = await open_in_tab(jp_serverapp, jp_root_dir, tab_factory, "r.ipynb")
    tab.user_options = {"mode": "review"}  # the user's JupyterLab setting

    async def review(decision: str, since: int, comment: str | None = None) -> None:
        waiting = await tab.wait_for(
            lambda m: m.get("type") == "state" and m.get("state") == "awaiting_approval",
            start=since,
        )
        cell = next(
            m
            for m in reversed(tab.received)
            if m.get("run_id") == waiting["run_id"] and "cell_id" in m
        )
        reply = await tab.request(
            {
                "request": "review",
                "run_id": waiting["run_id"],
                "cell_id": cell["cell_id"],
                "decision": decision,
                "source": None,
                **({"comment": comment} if comment else {}),
            }
        )
        assert reply["ok"], reply

    async with http_client(mcp_url, token) as client:
        since = len(tab.received)
        call = asyncio.ensure_future(
            client.call_tool("execute", {"path": "r.ipynb", "code": "answer = 42\nanswer"})
        )
        await review("run", since)
        ran = structured(await call)
        assert ran["status"] == "ok"
        assert ran["review"]["decision"] == "run"
        assert "Out[1]: 42" in ran["outputs"]
        since = len(tab.received)
        call = asyncio.ensure_future(
            client.call_tool("execute", {"path": "r.ipynb", "code": "import shutil"})
        )
        await review("reject", since, comment="no deleting files, please")
        rejected = structured(await call)
    assert rejected["status"] == "rejected"
    assert rejected["review"]["decision"] == "rejected"
    assert rejected["review"]["comment"] == "no deleting files, please"
    assert "did not run" in rejected["next"]
    rejected_cell = tab.notebooks["r.ipynb"].cell(rejected["cell_id"])
    assert rejected_cell["execution_count"] is None  # it never ran


async def test_a_second_agent_waits_for_the_kernel_and_stop_in_the_tab_interrupts_the_first(
    jp_serverapp: Any,
    jp_root_dir: Path,
    tab_factory: Callable[..., ScriptedTab],
    mcp_url: str,
    token: str,
) -> None:
    tab, _ = await open_in_tab(jp_serverapp, jp_root_dir, tab_factory, "q.ipynb")
    long = "import time\nfor _ in range(600):\n    time.sleep(0.1)"
    messages: list[str] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")

    async with (
        http_client(mcp_url, token) as first,
        http_client(mcp_url, token, name="codex") as second,
    ):
        running = structured(
            await first.call_tool("execute", {"path": "q.ipynb", "code": long, "timeout": 1})
        )
        assert running["status"] == "running"
        queued = asyncio.ensure_future(
            second.call_tool(
                "execute", {"path": "q.ipynb", "code": "'after'"}, progress_callback=on_progress
            )
        )
        # The second call's cell is in the notebook, waiting for the kernel's turn.
        await tab.wait_until(lambda: len(tab.notebooks["q.ipynb"].cells) == 2)
        await tab.wait_until(lambda: any("queued" in m for m in messages))
        # The user presses Stop on the first agent's run, in the tab that owns it.
        first_run = next(
            r
            for r in tab.received
            if r.get("notice") == "runs"
            for r in r["runs"]
            if r["origin"] == "mcp" and r["state"] == "executing"
        )
        assert (await tab.request({"request": "stop_run", "run_id": first_run["run_id"]}))["ok"]
        stopped = structured(
            await first.call_tool("wait_cell", {"path": "q.ipynb", "cell_id": running["cell_id"]})
        )
        after = structured(await queued)
    assert stopped["status"] == "interrupted", stopped
    assert after["status"] == "ok"
    assert "Out[2]: 'after'" in after["outputs"]


async def test_a_notebook_open_without_a_kernel_is_said_to_the_agent(
    jp_serverapp: Any,
    jp_root_dir: Path,
    tab_factory: Callable[..., ScriptedTab],
    mcp_url: str,
    token: str,
) -> None:
    nbformat.write(nbformat.v4.new_notebook(), jp_root_dir / "k.ipynb")
    tab = tab_factory()
    tab.open_notebook("k.ipynb", "no-kernel", [])
    await tab.connect()
    async with http_client(mcp_url, token) as client:
        failed = await client.call_tool("execute", {"path": "k.ipynb", "code": "1"})
    assert failed.is_error
    assert "without a kernel" in text(failed)
