"""``jupyter ci mcp`` over stdio, with the SDK's own stdio client: relaying to a running Jupyter
server (found as ``jupyter server list`` finds it, or given by URL and token), and headless on
the files with kernels of its own when none runs."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp_types import Implementation

from .support import read_notebook, structured, text, write_notebook


def environment(runtime_dir: Path, tmp_path: Path) -> dict[str, str]:
    """The command's environment: this Python's, Jupyter's folders of its own (so that only the
    servers a test starts are found), jupyter-ci's settings cleared."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER_", "JPY_"))}
    env.update(
        JUPYTER_RUNTIME_DIR=str(runtime_dir),
        JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
        JUPYTER_DATA_DIR=str(tmp_path / "data"),
        JUPYTER_CI_DB_PATH=str(tmp_path / "stdio.sqlite"),
        PYTHONUNBUFFERED="1",
    )
    return env


@contextlib.asynccontextmanager
async def stdio_client(
    cwd: Path, env: dict[str, str], *args: str, name: str = "codex", stderr: Path | None = None
) -> AsyncIterator[Client]:
    """The SDK's client running ``jupyter ci mcp ARGS`` in ``cwd`` (its stderr into the file
    ``stderr`` if given)."""
    command = [sys.executable, "-m", "jupyter", "ci", "mcp", *args]
    if stderr is not None:
        command = ["sh", "-c", f"exec {shlex.join(command)} 2>{shlex.quote(str(stderr))}"]
    params = StdioServerParameters(command=command[0], args=command[1:], cwd=str(cwd), env=env)
    async with Client(params, client_info=Implementation(name=name, version="1")) as client:
        yield client


async def test_headless_without_a_server_works_on_the_file_with_its_own_kernel(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "project"
    ids = write_notebook(folder / "a.ipynb", "x = 20")
    runtime = tmp_path / "runtime"
    env = environment(runtime, tmp_path)
    stderr = tmp_path / "stderr.txt"
    async with stdio_client(folder, env, stderr=stderr) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"execute", "run_cell", "wait_cell", "read_notebook"} <= names
        ran = structured(await client.call_tool("run_cell", {"path": "a.ipynb", "cell_id": ids[0]}))
        assert ran["status"] == "ok"
        result = structured(await client.call_tool("execute", {"path": "a.ipynb", "code": "x * 2"}))
        assert "Out[2]: 40" in result["outputs"], result
        missing = await client.call_tool("read_notebook", {"path": "nope.ipynb"})
        assert missing.is_error
        assert "does not exist" in text(missing)
        # The kernel is this command's own (its parent is the command, not this test).
        pids = structured(
            await client.call_tool(
                "execute",
                {
                    "path": "a.ipynb",
                    "code": "import os\n(os.getpid(), os.environ['JPY_PARENT_PID'])",
                },
            )
        )
    value = pids["outputs"].split("Out[3]: ")[1].splitlines()[0]
    kernel_pid, parent_pid = (int(n) for n in re.findall(r"\d+", value))
    assert parent_pid != os.getpid()
    cells = read_notebook(folder / "a.ipynb").cells
    assert [c.source for c in cells[:2]] == ["x = 20", "x * 2"]
    assert cells[1].metadata["jupyter_ci"]["agent"] == "codex"
    # What the command says on stderr (the client's log) is its own, not each kernel's and each
    # read's warnings: no "running over TCP without encryption", no "Notebook is not trusted".
    said = stderr.read_text()
    assert "jupyter-ci mcp: headless on" in said
    assert "without encryption" not in said
    assert "not trusted" not in said
    assert cells[1].outputs[0]["data"]["text/plain"] == "40"
    # Its kernels were shut down when it ended.
    for pid in (kernel_pid, parent_pid):
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


async def test_relays_to_the_running_server_that_serves_the_folder(
    tmp_path: Path, jp_serverapp: Any, jp_runtime_dir: Path, root: Path, mcp_url: str
) -> None:
    write_notebook(root / "sub" / "r.ipynb")
    jp_serverapp.write_server_info_file()  # what `jupyter server list` reads
    env = environment(Path(jp_runtime_dir), tmp_path)
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(time.monotonic())

    # Started in a subfolder of the server's root: the server still serves it.
    async with stdio_client(root / "sub", env, name="gemini-cli") as client:
        running = structured(
            await client.call_tool(
                "execute",
                {
                    "path": "sub/r.ipynb",
                    "code": "import time\ntime.sleep(4)\n'slept'",
                    "timeout": 2,
                },
                progress_callback=on_progress,
            )
        )
        assert running["status"] == "running"
        assert len(progress) >= 2  # relayed as they came
        ended = structured(
            await client.call_tool(
                "wait_cell", {"path": "sub/r.ipynb", "cell_id": running["cell_id"]}
            )
        )
    assert "Out[1]: 'slept'" in ended["outputs"]
    # The server ran it: its kernel for the notebook, its file.
    sessions = await jp_serverapp.session_manager.list_sessions()
    assert [s["path"] for s in sessions] == ["sub/r.ipynb"]
    cell = read_notebook(root / "sub" / "r.ipynb").cells[0]
    assert cell.metadata["jupyter_ci"]["agent"] == "gemini-cli"


async def test_relays_to_a_server_given_by_url_and_token(
    tmp_path: Path, jp_serverapp: Any, root: Path, mcp_url: str, token: str
) -> None:
    write_notebook(root / "u.ipynb")
    server = mcp_url.removesuffix("jupyter-ci/mcp")
    env = environment(tmp_path / "empty-runtime", tmp_path)
    async with stdio_client(tmp_path, env, "--url", server, "--token", token) as client:
        result = structured(await client.call_tool("execute", {"path": "u.ipynb", "code": "6 * 7"}))
    assert "Out[1]: 42" in result["outputs"]
    assert read_notebook(root / "u.ipynb").cells[0].source == "6 * 7"


async def test_a_wrong_token_is_said_on_stderr_with_exit_code_2(
    tmp_path: Path, jp_serverapp: Any, mcp_url: str
) -> None:
    server = mcp_url.removesuffix("jupyter-ci/mcp")
    process = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "jupyter", "ci", "mcp", "--url", server, "--token", "wrong"),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=environment(tmp_path / "runtime", tmp_path),
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 2
    assert stdout == b""
    assert b"refused the token" in stderr
