"""A second MCP client that no one here wrote: the MCP Inspector's CLI mode (npm
``@modelcontextprotocol/inspector``) against jupyter-ci's Streamable HTTP route, listing the tools
and calling ``execute``.

``.ci/run`` installs the Inspector into a temporary prefix and sets ``JUPYTER_CI_MCP_INSPECTOR``
to its ``mcp-inspector``; without it these tests are skipped (there they fail if it is missing).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from .support import read_notebook, write_notebook
from .test_http_headless import TOOLS

INSPECTOR = os.environ.get("JUPYTER_CI_MCP_INSPECTOR", "")

pytestmark = pytest.mark.skipif(
    not INSPECTOR,
    reason="the MCP Inspector is not installed (.ci/run's Inspector stage sets "
    "JUPYTER_CI_MCP_INSPECTOR)",
)


async def inspector(url: str, token: str, *args: str) -> dict[str, Any]:
    """Run the Inspector's CLI against ``url`` with the token; its JSON output."""
    assert shutil.which(INSPECTOR), f"no MCP Inspector at {INSPECTOR}"
    process = await asyncio.create_subprocess_exec(
        INSPECTOR,
        "--cli",
        url,
        "--transport",
        "http",
        "--header",
        f"Authorization: token {token}",
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, stderr.decode()
    result: dict[str, Any] = json.loads(stdout)
    return result


async def test_the_inspector_lists_the_tools_and_calls_execute(
    mcp_url: str, token: str, root: Path
) -> None:
    write_notebook(root / "inspected.ipynb", "x = 6")
    listed = await inspector(mcp_url, token, "--method", "tools/list")
    assert {tool["name"] for tool in listed["tools"]} == TOOLS
    execute = next(tool for tool in listed["tools"] if tool["name"] == "execute")
    assert execute["inputSchema"]["required"] == ["path", "code"]
    assert "\n" not in execute["description"]
    called = await inspector(
        mcp_url,
        token,
        "--method",
        "tools/call",
        "--tool-name",
        "execute",
        "--tool-arg",
        "path=inspected.ipynb",
        "--tool-arg",
        "code=print(6 * 7)",
    )
    assert called["isError"] is False, called
    assert called["structuredContent"]["status"] == "ok"
    assert "[stdout] 42" in called["structuredContent"]["outputs"]
    cells = read_notebook(root / "inspected.ipynb").cells
    assert [cell.source for cell in cells] == ["x = 6", "print(6 * 7)"]
