"""Helpers of the MCP tests: the SDK's own client, over Streamable HTTP or stdio."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nbformat
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import CallToolResult, Implementation

from ..saved_files import whole_notebook


@contextlib.asynccontextmanager
async def http_client(
    url: str,
    token: str | None,
    name: str = "claude-code",
    *,
    mode: str = "auto",
    scheme: str = "token",
) -> AsyncIterator[Client]:
    """The SDK's client over Streamable HTTP, with the Jupyter token as ``Authorization``."""
    headers = {"Authorization": f"{scheme} {token}"} if token else {}
    async with create_mcp_http_client(headers=headers) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(
            transport, client_info=Implementation(name=name, version="1.0"), mode=mode
        ) as client:
            yield client


def structured(result: CallToolResult) -> dict[str, Any]:
    """A tool result's structured content (the test fails when it is an error)."""
    assert not result.is_error, text(result)
    assert result.structured_content is not None
    return dict(result.structured_content)


def text(result: CallToolResult) -> str:
    """A tool result's text."""
    return "\n".join(getattr(block, "text", "") for block in result.content)


def write_notebook(path: Path, *sources: str) -> list[str]:
    """A notebook file of code cells; their ids."""
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in sources]
    notebook.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, path)
    return [cell.id for cell in notebook.cells]


def read_notebook(path: Path, timeout: float = 15) -> Any:
    """The notebook file as it is on disk, once it is whole.

    A file caught half written by the server's save (see :mod:`tests.saved_files`) is read again.
    """
    import time

    deadline = time.monotonic() + timeout
    while True:
        notebook, error = whole_notebook(path)
        if notebook is not None:
            return notebook
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} was not a whole notebook within {timeout} s: {error}")
        time.sleep(0.05)


async def on_disk(path: Path, ready: Any, timeout: float = 15) -> Any:
    """The notebook file once ``ready(notebook)`` holds: a cell's outputs are written into the
    file a moment after its call returned (calls in a row share one write), and a file caught
    half written is read again."""
    import asyncio
    import time

    deadline = time.monotonic() + timeout
    while True:
        notebook, error = await asyncio.to_thread(whole_notebook, path)
        if notebook is not None and ready(notebook):
            return notebook
        if time.monotonic() > deadline:
            why = f": {error}" if error else ""
            raise AssertionError(f"{path} was not written as expected within {timeout} s{why}")
        await asyncio.sleep(0.05)


def as_json(result: CallToolResult) -> str:
    """The result for a failure message."""
    return json.dumps(result.model_dump(mode="json"), indent=1)[:3000]
