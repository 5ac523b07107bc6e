"""``jupyter ci mcp``: jupyter-ci's MCP tools for clients that speak stdio.

With a running Jupyter server that serves the folder (found as ``jupyter server list`` finds
servers, or given by ``--url`` and ``--token``), it relays: every message from stdin goes to the
server's MCP route (``<base_url>jupyter-ci/mcp``, Streamable HTTP, the server's token) and every
message back, progress notifications included, goes to stdout. The tools then act in that server:
through JupyterLab where a tab has the notebook open, else on the file with the server's kernel.

With none, it serves the tools itself, headless on the files under the folder, with kernels of
its own (:mod:`.local`), shut down when it ends.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import anyio

log = logging.getLogger("jupyter_ci.mcp")

#: Seconds to wait for a server's status before taking it for unreachable.
CHECK_TIMEOUT = 10.0


def find_server(root: str) -> dict[str, Any] | None:
    """The running Jupyter server whose root folder holds ``root`` (the deepest such root when
    several do), as ``jupyter server list`` finds servers; None when none does."""
    from jupyter_server.serverapp import list_running_servers

    folder = os.path.realpath(root)
    best: dict[str, Any] | None = None
    for info in list_running_servers():
        served = os.path.realpath(str(info.get("root_dir") or info.get("notebook_dir") or ""))
        if not served or not (
            folder == served or folder.startswith(served.rstrip(os.sep) + os.sep)
        ):
            continue
        if best is None or len(served) > len(str(best.get("root_dir") or "")):
            best = {**info, "root_dir": served}
    return best


def mcp_url(server_url: str) -> str:
    """The MCP route of a server at ``server_url`` (its base URL included)."""
    return server_url.rstrip("/") + "/jupyter-ci/mcp"


async def check_server(server_url: str, token: str) -> str | None:
    """Why the server's jupyter-ci cannot be used (None when it can): unreachable, the token
    refused, or no jupyter-ci there."""
    import httpx2

    status = server_url.rstrip("/") + "/jupyter-ci/status"
    headers = {"Authorization": f"token {token}"} if token else {}
    try:
        async with httpx2.AsyncClient(timeout=CHECK_TIMEOUT) as client:
            response = await client.get(status, headers=headers)
    except httpx2.HTTPError as err:
        return f"the Jupyter server at {server_url} cannot be reached ({err or type(err).__name__})"
    if response.status_code in (401, 403):
        return f"the Jupyter server at {server_url} refused the token"
    if response.status_code == 404:
        return f"the Jupyter server at {server_url} does not have jupyter-ci"
    if response.status_code >= 400:
        return f"the Jupyter server at {server_url} answered {response.status_code}"
    return None


async def relay(server_url: str, token: str) -> None:
    """Relay MCP between stdio and the server's Streamable HTTP route until stdin closes."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client
    from mcp.server.stdio import stdio_server

    headers = {"Authorization": f"token {token}"} if token else {}
    # No read timeout: a cell may run for hours, and the event stream waits as long.
    timeout = httpx2.Timeout(30.0, read=None)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
        stdio_server() as (from_client, to_client),
        streamable_http_client(mcp_url(server_url), http_client=http) as (from_server, to_server),
        anyio.create_task_group() as group,
    ):

        async def upstream() -> None:
            await _pump(from_client, to_server)
            group.cancel_scope.cancel()  # the client closed stdin: we are done

        group.start_soon(upstream)
        group.start_soon(_pump, from_server, to_client)


async def _pump(source: Any, sink: Any) -> None:
    """Forward every message of ``source`` to ``sink`` (a transport's errors are logged)."""
    async for message in source:
        if isinstance(message, Exception):
            log.warning("jupyter-ci mcp: %s", message)
            continue
        await sink.send(message)


async def serve_local(root: str, config: Any) -> None:
    """Serve the tools over stdio on the files under ``root``, with kernels of our own."""
    from .images import ImageStore
    from .local import LocalJupyter
    from .notebooks import Notebooks
    from .tools import build_server

    local = LocalJupyter(root, config)
    try:
        notebooks = Notebooks(await local.backend())
        server = build_server(notebooks, ImageStore())
        try:
            await server.run_stdio_async()
        finally:
            await notebooks.close()
    finally:
        await local.close()
