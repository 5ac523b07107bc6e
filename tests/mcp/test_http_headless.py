"""jupyter-ci's MCP server over Streamable HTTP in a real Jupyter server, headless (no JupyterLab
tab has the notebooks open): the SDK's own client, real kernels, the files on disk."""

from __future__ import annotations

import asyncio
import base64
import itertools
import time
from pathlib import Path
from typing import Any

import pytest
from jupyter_server.auth.authorizer import Authorizer
from mcp.shared.exceptions import MCPError
from mcp_types import ImageContent
from tornado.httpclient import AsyncHTTPClient, HTTPClientError

from jupyter_ci.mcp.images import MAX_IMAGE_BYTES

from .support import http_client, on_disk, read_notebook, structured, write_notebook

TOOLS = {
    "list_notebooks",
    "read_notebook",
    "insert_cell",
    "edit_cell",
    "delete_cell",
    "run_cell",
    "wait_cell",
    "execute",
    "interrupt",
    "restart_kernel",
    "variables",
    "ask",
}


async def test_the_tools_are_listed_with_their_schemas(mcp_url: str, token: str) -> None:
    async with http_client(mcp_url, token) as client:
        listed = (await client.list_tools()).tools
    by_name = {tool.name: tool for tool in listed}
    assert set(by_name) == TOOLS
    execute = by_name["execute"]
    assert execute.input_schema["required"] == ["path", "code"]
    assert {"timeout", "interrupt_on_timeout"} <= set(execute.input_schema["properties"])
    assert execute.output_schema is not None
    assert "status" in execute.output_schema["properties"]
    for tool in listed:
        assert tool.description, tool.name


async def test_execute_writes_the_cell_and_its_outputs_into_the_file(
    mcp_url: str, token: str, root: Path, jp_serverapp: Any
) -> None:
    ids = write_notebook(root / "work" / "a.ipynb", "x = 41")
    async with http_client(mcp_url, token) as client:
        first = structured(
            await client.call_tool(
                "execute", {"path": "work/a.ipynb", "code": "y = 6 * 7\nprint(y)"}
            )
        )
        second = structured(
            await client.call_tool("execute", {"path": "work/a.ipynb", "code": "y + 1"})
        )
    assert first["status"] == "ok", first
    assert "[stdout] 42" in first["outputs"]
    assert first["outputs"].startswith("<untrusted-data ")
    assert second["status"] == "ok", second
    assert "Out[2]: 43" in second["outputs"]
    notebook = await on_disk(root / "work" / "a.ipynb", lambda nb: nb.cells[-1].outputs)
    # The user's cell stays first; the agent's cells follow in the order it added them.
    assert [cell.id for cell in notebook.cells] == [ids[0], first["cell_id"], second["cell_id"]]
    added = notebook.cells[1]
    assert added.source == "y = 6 * 7\nprint(y)"
    assert added.execution_count == 1
    assert added.outputs[0]["text"] == "42\n"
    assert added.metadata["jupyter_ci"]["agent"] == "claude-code"
    # The kernel is the server's session kernel for the notebook: JupyterLab opening it finds it.
    sessions = await jp_serverapp.session_manager.list_sessions()
    assert [s["path"] for s in sessions] == ["work/a.ipynb"]


async def test_a_long_cell_past_the_timeout_keeps_running_with_progress_then_wait_cell_ends_it(
    mcp_url: str, token: str, root: Path
) -> None:
    write_notebook(root / "long.ipynb")
    code = "import time\nfor _ in range(30):\n    time.sleep(1)\ndone = True"
    progress: list[tuple[float, float]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((time.monotonic(), value))

    async with http_client(mcp_url, token) as client:
        started = time.monotonic()
        running = structured(
            await client.call_tool(
                "execute",
                {"path": "long.ipynb", "code": code, "timeout": 5},
                progress_callback=on_progress,
            )
        )
        returned = time.monotonic()
        assert running["status"] == "running", running
        assert "wait_cell" in running["next"]
        assert 5 <= returned - started < 15
        # At least one notification a second while it ran, though the cell printed nothing.
        stamps = [started] + [at for at, _ in progress] + [returned]
        assert max(b - a for a, b in itertools.pairwise(stamps)) <= 1.0, stamps
        assert len(progress) >= 5
        assert [value for _, value in progress] == sorted(value for _, value in progress)
        ended = structured(
            await client.call_tool(
                "wait_cell", {"path": "long.ipynb", "cell_id": running["cell_id"], "timeout": 60}
            )
        )
        assert ended["status"] == "ok", ended
        assert ended["seconds"] >= 29
        check = structured(
            await client.call_tool("execute", {"path": "long.ipynb", "code": "done"})
        )
        assert "Out[2]: True" in check["outputs"]


async def test_interrupt_stops_the_running_cell(mcp_url: str, token: str, root: Path) -> None:
    write_notebook(root / "stop.ipynb")
    code = "import time\nfor _ in range(600):\n    time.sleep(0.1)"
    async with http_client(mcp_url, token) as client:
        # The kernel started first: the long cell begins at once.
        structured(await client.call_tool("execute", {"path": "stop.ipynb", "code": "1"}))
        running = structured(
            await client.call_tool("execute", {"path": "stop.ipynb", "code": code, "timeout": 1})
        )
        assert running["status"] == "running"
        said = structured(await client.call_tool("interrupt", {"path": "stop.ipynb"}))
        assert "Interrupted" in said["message"]
        ended = structured(
            await client.call_tool(
                "wait_cell", {"path": "stop.ipynb", "cell_id": running["cell_id"], "timeout": 30}
            )
        )
    assert ended["status"] == "interrupted", ended
    assert ended["error"]["ename"] == "KeyboardInterrupt"


async def test_a_cell_with_interrupt_on_timeout_ends_timed_out(
    mcp_url: str, token: str, root: Path
) -> None:
    write_notebook(root / "t.ipynb")
    async with http_client(mcp_url, token) as client:
        ended = structured(
            await client.call_tool(
                "execute",
                {
                    "path": "t.ipynb",
                    "code": "import time\ntime.sleep(30)",
                    "timeout": 1,
                    "interrupt_on_timeout": True,
                },
            )
        )
    assert ended["status"] == "timed_out", ended


async def test_a_large_plot_comes_back_as_an_image_within_the_bound(
    mcp_url: str, token: str, root: Path
) -> None:
    write_notebook(root / "plot.ipynb")
    code = (
        "import matplotlib\nmatplotlib.use('module://matplotlib_inline.backend_inline')\n"
        "import matplotlib.pyplot as plt, numpy as np\n"
        "rng = np.random.default_rng(0)\n"
        "fig, ax = plt.subplots(figsize=(16, 12), dpi=100)\n"
        "ax.scatter(rng.random(20000), rng.random(20000), c=rng.random(20000), s=3)\n"
        "plt.show()"
    )
    async with http_client(mcp_url, token) as client:
        result = await client.call_tool("execute", {"path": "plot.ipynb", "code": code})
    data = structured(result)
    assert data["status"] == "ok", data
    stored = (await on_disk(root / "plot.ipynb", lambda nb: nb.cells[0].outputs)).cells[0].outputs
    original = base64.b64decode(next(o for o in stored if "data" in o)["data"]["image/png"])
    assert len(original) > MAX_IMAGE_BYTES  # the kernel's image was too large as it was
    images = [block for block in result.content if isinstance(block, ImageContent)]
    assert data["images"] == len(images) == 1
    sent = base64.b64decode(images[0].data)
    assert len(sent) <= MAX_IMAGE_BYTES
    assert sent[:4] in (b"\x89PNG", b"\xff\xd8\xff\xe0", b"\xff\xd8\xff\xdb")
    assert "sent as an image" in data["outputs"]


async def test_two_clients_on_two_notebooks_at_once_never_cross(
    mcp_url: str, token: str, root: Path
) -> None:
    write_notebook(root / "a.ipynb", "# a")
    write_notebook(root / "b.ipynb", "# b")

    async def work(name: str, path: str, value: int) -> list[dict[str, Any]]:
        async with http_client(mcp_url, token, name=name) as client:
            results = []
            for step in range(3):
                code = f"import time; time.sleep(0.2)\nv = {value} + {step}\nv"
                results.append(
                    structured(await client.call_tool("execute", {"path": path, "code": code}))
                )
            return results

    a, b = await asyncio.gather(work("agent-a", "a.ipynb", 100), work("agent-b", "b.ipynb", 200))
    assert [r["outputs"].count("Out[") for r in a + b] == [1] * 6
    assert "Out[3]: 102" in a[-1]["outputs"]
    assert "Out[3]: 202" in b[-1]["outputs"]
    for path, name, mine in (("a.ipynb", "agent-a", a), ("b.ipynb", "agent-b", b)):
        cells = read_notebook(root / path).cells
        assert [c.id for c in cells[1:]] == [r["cell_id"] for r in mine]
        assert {c.metadata["jupyter_ci"]["agent"] for c in cells[1:]} == {name}


async def test_a_call_without_the_token_is_refused(mcp_url: str, token: str) -> None:
    body = '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}'
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    for auth in ({}, {"Authorization": "token wrong"}, {"Authorization": "Bearer wrong"}):
        with pytest.raises(HTTPClientError) as refused:
            await AsyncHTTPClient().fetch(
                mcp_url, method="POST", body=body, headers={**headers, **auth}
            )
        assert refused.value.code == 403, auth
        if not auth:  # what to send, said to a client that sent nothing
            assert refused.value.response is not None
            assert b"Authorization: token <token>" in refused.value.response.body
    # The SDK's client cannot even open a session.
    with pytest.raises(Exception) as failed:  # noqa: PT011 - an exception group of the SDK's
        async with http_client(mcp_url, None):
            pass
    assert _contains(failed.value, MCPError), repr(failed.value)


async def test_the_token_works_as_token_or_bearer(mcp_url: str, token: str) -> None:
    for scheme in ("token", "Bearer"):
        async with http_client(mcp_url, token, scheme=scheme) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
        assert names == TOOLS


class _NoKernelExecution(Authorizer):  # type: ignore[misc]
    """Lets the user read, but not execute code in kernels."""

    def is_authorized(self, handler: Any, user: Any, action: str, resource: str) -> bool:
        return not (action == "execute" and resource == "kernels")


@pytest.fixture
def no_execute_config(jp_server_config: dict[str, Any]) -> dict[str, Any]:
    jp_server_config["ServerApp"]["authorizer_class"] = _NoKernelExecution
    return jp_server_config


async def test_a_user_who_may_not_execute_in_kernels_is_refused(
    no_execute_config: dict[str, Any], mcp_url: str, token: str
) -> None:
    body = '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}'
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Authorization": f"token {token}",
    }
    for method in ("POST", "GET", "DELETE"):
        with pytest.raises(HTTPClientError) as refused:
            await AsyncHTTPClient().fetch(
                mcp_url,
                method=method,
                body=body if method == "POST" else None,
                headers=headers,
            )
        assert refused.value.code == 403, method


def _contains(error: BaseException, kind: type[BaseException]) -> bool:
    """Whether ``error`` is, or (in exception groups) holds, an exception of ``kind``."""
    if isinstance(error, kind):
        return True
    return any(_contains(inner, kind) for inner in getattr(error, "exceptions", ()))
