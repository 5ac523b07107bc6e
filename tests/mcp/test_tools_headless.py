"""Each tool headless in a real Jupyter server (over Streamable HTTP, the SDK's client): reading,
changing cells without losing anything of the user's, the kernel's tools, and bad input."""

from __future__ import annotations

import asyncio
import os
import re
import signal
from pathlib import Path
from typing import Any

import nbformat

from .support import http_client, read_notebook, structured, text, write_notebook


async def test_read_notebook_gives_cells_with_digested_outputs_as_untrusted_data(
    mcp_url: str, token: str, root: Path
) -> None:
    ids = write_notebook(root / "r.ipynb", "print('hello')", "1 + 1")
    notebook = read_notebook(root / "r.ipynb")
    notebook.cells.insert(1, nbformat.v4.new_markdown_cell("# Title"))
    notebook.cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text="hello\n")]
    notebook.cells[0].execution_count = 1
    nbformat.write(notebook, root / "r.ipynb")
    async with http_client(mcp_url, token) as client:
        view = structured(await client.call_tool("read_notebook", {"path": "r.ipynb"}))
        only = structured(
            await client.call_tool("read_notebook", {"path": "r.ipynb", "cell_ids": [ids[1]]})
        )
    cells = view["cells"]
    assert [c["cell_type"] for c in cells] == ["code", "markdown", "code"]
    assert cells[0]["id"] == ids[0]
    assert cells[0]["execution_count"] == 1
    assert re.fullmatch(
        r'<untrusted-data id="\w+" source="kernel output">\n\[stdout\] hello\n'
        r'</untrusted-data id="\w+">',
        cells[0]["outputs"],
    )
    assert view["kernel"] is None  # reading starts no kernel
    assert [c["id"] for c in only["cells"]] == [ids[1]]
    assert only["omitted"] == 2


async def test_insert_edit_and_delete_keep_everything_of_the_user(
    mcp_url: str, token: str, root: Path
) -> None:
    ids = write_notebook(root / "n.ipynb", "users_cell = 1", "last = 2")
    async with http_client(mcp_url, token) as client:
        top = structured(
            await client.call_tool(
                "insert_cell", {"path": "n.ipynb", "source": "import os", "after_cell_id": ""}
            )
        )
        note = structured(
            await client.call_tool(
                "insert_cell",
                {
                    "path": "n.ipynb",
                    "source": "## Notes",
                    "after_cell_id": ids[0],
                    "cell_type": "markdown",
                },
            )
        )
        edit = structured(
            await client.call_tool(
                "edit_cell", {"path": "n.ipynb", "cell_id": ids[0], "source": "users_cell = 10"}
            )
        )
        assert "-users_cell = 1" in edit["diff"]
        assert "+users_cell = 10" in edit["diff"]
        # The user's cell: not the agent's to delete, even after the agent edited it.
        refused = await client.call_tool("delete_cell", {"path": "n.ipynb", "cell_id": ids[0]})
        assert refused.is_error
        assert "not inserted by claude-code" in text(refused)
        # Another agent may not delete claude-code's cell either.
        async with http_client(mcp_url, token, name="codex") as other:
            theirs = await other.call_tool(
                "delete_cell", {"path": "n.ipynb", "cell_id": top["cell_id"]}
            )
        assert theirs.is_error
        assert "not inserted by codex" in text(theirs)
        # A cell of the agent's that the user changed since is not deleted.
        on_disk = read_notebook(root / "n.ipynb")
        on_disk.cells[0].source = "import os  # the user's comment"
        nbformat.write(on_disk, root / "n.ipynb")
        changed = await client.call_tool(
            "delete_cell", {"path": "n.ipynb", "cell_id": top["cell_id"]}
        )
        assert changed.is_error
        assert "changed since" in text(changed)
        gone = structured(
            await client.call_tool("delete_cell", {"path": "n.ipynb", "cell_id": note["cell_id"]})
        )
        assert gone["cell_id"] == note["cell_id"]
    cells = read_notebook(root / "n.ipynb").cells
    assert [c.source for c in cells] == [
        "import os  # the user's comment",
        "users_cell = 10",
        "last = 2",
    ]


async def test_execute_goes_after_the_callers_last_cell_else_at_the_end(
    mcp_url: str, token: str, root: Path
) -> None:
    ids = write_notebook(root / "p.ipynb", "a = 1", "b = 2")
    async with http_client(mcp_url, token) as client:
        mine = structured(
            await client.call_tool(
                "insert_cell", {"path": "p.ipynb", "source": "c = 3", "after_cell_id": ids[0]}
            )
        )
        ran = structured(await client.call_tool("execute", {"path": "p.ipynb", "code": "d = 4"}))
    async with http_client(mcp_url, token, name="codex") as other:
        theirs = structured(await other.call_tool("execute", {"path": "p.ipynb", "code": "e = 5"}))
    order = [c.id for c in read_notebook(root / "p.ipynb").cells]
    assert order == [ids[0], mine["cell_id"], ran["cell_id"], ids[1], theirs["cell_id"]]


async def test_variables_restart_and_a_failing_cell(mcp_url: str, token: str, root: Path) -> None:
    write_notebook(root / "v.ipynb")
    async with http_client(mcp_url, token) as client:
        assert (
            structured(await client.call_tool("variables", {"path": "v.ipynb"}))["variables"] == []
        )
        code = "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})\nn = 3"
        structured(await client.call_tool("execute", {"path": "v.ipynb", "code": code}))
        found = structured(await client.call_tool("variables", {"path": "v.ipynb"}))["variables"]
        frame = next(v for v in found if v["name"] == "df")
        assert frame["shape"] == [2, 2]
        assert frame["columns"] == ["a", "b"]
        failed = structured(
            await client.call_tool("execute", {"path": "v.ipynb", "code": "df['c']"})
        )
        assert failed["status"] == "error"
        assert failed["error"]["ename"] == "KeyError"
        assert "df['c']" in failed["error"]["traceback"]
        said = structured(await client.call_tool("restart_kernel", {"path": "v.ipynb"}))
        assert "Restarted" in said["message"]
        after = structured(await client.call_tool("variables", {"path": "v.ipynb"}))
        assert after["variables"] == []


def _one_sentence(message: str) -> None:
    assert "Traceback" not in message, message
    assert "\n" not in message, message
    assert message.endswith((".", ")")), message
    assert len(message) < 400, message


async def test_bad_input_is_one_clear_sentence_and_the_server_keeps_serving(
    mcp_url: str, token: str, root: Path, jp_serverapp: Any
) -> None:
    ids = write_notebook(root / "ok.ipynb", "x = 1")
    (root / "notes.txt").write_text("not a notebook")
    (root / "broken.ipynb").write_text("{ this is not json")
    write_notebook(root / "ro.ipynb", "x = 1")
    os.chmod(root / "ro.ipynb", 0o444)
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("read_notebook", {"path": "missing.ipynb"}, "does not exist"),
        ("execute", {"path": "missing.ipynb", "code": "1"}, "does not exist"),
        ("read_notebook", {"path": "notes.txt"}, "is not a notebook"),
        ("read_notebook", {"path": "broken.ipynb"}, "is not a valid notebook"),
        ("read_notebook", {"path": "../outside.ipynb"}, "outside the server's root"),
        ("run_cell", {"path": "ok.ipynb", "cell_id": "nope"}, "no cell 'nope'"),
        ("edit_cell", {"path": "ok.ipynb", "cell_id": "nope", "source": "1"}, "no cell 'nope'"),
        ("execute", {"path": "ro.ipynb", "code": "1"}, "read-only"),
        ("insert_cell", {"path": "ro.ipynb", "source": "1"}, "read-only"),
        ("execute", {"path": "ok.ipynb", "code": "x" * 100_001}, "at most 100,000"),
        ("execute", {"path": "ok.ipynb"}, "needs the argument 'code'"),
        ("execute", {"path": "ok.ipynb", "code": "1", "timeout": "soon"}, "'timeout' is not valid"),
        ("run_cell", {"path": "ok.ipynb", "cell_id": ids[0], "timeout": -1}, "'timeout'"),
        ("insert_cell", {"path": "ok.ipynb", "source": "1", "cell_type": "sql"}, "'cell_type'"),
        ("wait_cell", {"path": "ok.ipynb", "cell_id": ids[0]}, "No call of this server ran"),
    ]
    async with http_client(mcp_url, token) as client:
        for tool, arguments, expected in cases:
            result = await client.call_tool(tool, arguments)
            assert result.is_error, (tool, arguments, text(result))
            message = text(result)
            _one_sentence(message)
            assert expected.lower() in message.lower(), (tool, message)
        # A dead kernel: the notebook's kernel killed, and not restarted by the server.
        structured(await client.call_tool("execute", {"path": "ok.ipynb", "code": "1"}))
        session = (await jp_serverapp.session_manager.list_sessions())[0]
        manager = jp_serverapp.kernel_manager.get_kernel(session["kernel"]["id"])
        manager.autorestart = False
        manager.stop_restarter()
        os.kill(manager.provisioner.process.pid, signal.SIGKILL)
        manager.provisioner.process.wait()
        dead = await client.call_tool("execute", {"path": "ok.ipynb", "code": "2"})
        assert dead.is_error, text(dead)
        _one_sentence(text(dead))
        assert "restart_kernel" in text(dead)
        # ... and the server still serves.
        restarted = structured(await client.call_tool("restart_kernel", {"path": "ok.ipynb"}))
        assert restarted["kernel"]["state"] != "dead"
        again = structured(
            await client.call_tool("execute", {"path": "ok.ipynb", "code": "40 + 2"})
        )
        assert "Out[1]: 42" in again["outputs"]
    assert read_notebook(root / "ro.ipynb").cells[0].source == "x = 1"


async def test_two_clients_on_one_notebook_run_one_cell_at_a_time(
    mcp_url: str, token: str, root: Path
) -> None:
    write_notebook(root / "shared.ipynb", "import time")
    code = "import time\nstart = time.time(); time.sleep(1); end = time.time()\n(start, end)"

    async def one(name: str) -> dict[str, Any]:
        async with http_client(mcp_url, token, name=name) as client:
            return structured(
                await client.call_tool("execute", {"path": "shared.ipynb", "code": code})
            )

    first, second = await asyncio.gather(one("agent-a"), one("agent-b"))
    spans = sorted(
        tuple(float(x) for x in re.findall(r"[\d.]+", r["outputs"].split("Out[")[1])[1:3])
        for r in (first, second)
    )
    assert spans[0][1] <= spans[1][0], spans  # the second began after the first ended
    cells = read_notebook(root / "shared.ipynb").cells
    assert {c.metadata["jupyter_ci"]["agent"] for c in cells[1:]} == {"agent-a", "agent-b"}
