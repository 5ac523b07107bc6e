"""``ask``: jupyter-ci's own loop as one MCP tool, headless, with the scripted model as the server's
model (its key stays on the server) and a real kernel; the run is in the notebook's conversation."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_ci.testing import Reply, ScriptedModelServer

from .support import http_client, on_disk, structured, text, write_notebook

KEY = "sk-test-MCP-SERVERKEY-0123456789"


@pytest.fixture
def model_server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer([]) as server:
        yield server


@pytest.fixture
def jp_server_config(
    tmp_path: Path, model_server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    monkeypatch.setenv("JUPYTER_CI_API_KEY", KEY)
    return {
        "ServerApp": {"jpserver_extensions": {"jupyter_ci": True}},
        "JupyterCI": {
            "model": "openai/scripted",
            "api_base": model_server.base_url,
            "db_path": str(tmp_path / "conversations.sqlite"),
        },
    }


async def test_ask_runs_the_loop_and_returns_its_answer_cells_and_status_line(
    mcp_url: str, token: str, root: Path, model_server: ScriptedModelServer, jp_fetch: Any
) -> None:
    [first] = write_notebook(root / "ask.ipynb", "numbers = [3, 1, 2]")
    model_server.set_script(
        [
            Reply.code("total = sum(numbers)\nprint(total)"),
            Reply.text("The total is 6."),
        ]
    )
    async with http_client(mcp_url, token) as client:
        ran = structured(
            await client.call_tool("run_cell", {"path": "ask.ipynb", "cell_id": first})
        )
        assert ran["status"] == "ok"
        assert ran["execution_count"] == 1
        answer = structured(
            await client.call_tool("ask", {"path": "ask.ipynb", "request": "add up the numbers"})
        )
    assert answer["state"] == "done", answer
    assert answer["answer"] == "The total is 6."
    assert answer["status_line"].startswith("jupyter-ci: done — 1 cell, 1 attempt"), answer
    [cell] = answer["cells"]
    assert cell["source"] == "total = sum(numbers)\nprint(total)"
    assert cell["status"] == "ok"
    assert "[stdout] 6" in cell["outputs"]
    assert KEY not in str(answer)
    cells = (await on_disk(root / "ask.ipynb", lambda nb: nb.cells[-1].outputs)).cells
    assert [c.source for c in cells] == ["numbers = [3, 1, 2]", cell["source"]]
    assert cells[1].outputs[0]["text"] == "6\n"
    # The run is in the notebook's conversation, as the panel shows it.
    exported = await jp_fetch("jupyter-ci", "conversation", "export", params={"path": "ask.ipynb"})
    markdown = exported.body.decode()
    assert "add up the numbers" in markdown
    assert "The total is 6." in markdown


async def test_ask_for_a_model_the_server_did_not_configure_is_refused(
    mcp_url: str, token: str, root: Path
) -> None:
    write_notebook(root / "ask.ipynb")
    async with http_client(mcp_url, token) as client:
        failed = await client.call_tool(
            "ask", {"path": "ask.ipynb", "request": "hello", "model": "openai/unknown"}
        )
    assert failed.is_error
    assert "openai/unknown" in text(failed)
