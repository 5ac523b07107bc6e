"""The MCP server of one Jupyter server: the tools over its notebooks, and the Streamable HTTP
session manager that serves them, living as long as the server does.

The SDK's session manager is an ASGI application whose sessions run in a task group of its
own (:meth:`~mcp.server.streamable_http_manager.StreamableHTTPSessionManager.run`); anyio ties a
task group to the task that opened it, so it lives in a task of its own here, from the first
request (or the server's start) to :meth:`McpService.close`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from .asgi import ASGIApp
from .images import ImageStore
from .notebooks import Backend, Notebooks
from .tools import JupyterCIMCP, build_server

log = logging.getLogger("jupyter_ci.mcp")

#: A Streamable HTTP session nobody used for this long is closed (its client starts another).
SESSION_IDLE_TIMEOUT = 4 * 3600.0


class McpService:
    """jupyter-ci's MCP server over a Jupyter server's notebooks, served by Streamable HTTP."""

    def __init__(self, backend: Backend) -> None:
        self.notebooks = Notebooks(backend)
        self.images = ImageStore()
        self.server: JupyterCIMCP = build_server(self.notebooks, self.images)
        # The Jupyter server checks the Host and Origin of every request already (and its
        # token): the SDK's own DNS-rebinding check would refuse a server reached by name.
        self.sessions = StreamableHTTPSessionManager(
            app=self.server._lowlevel_server,
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            session_idle_timeout=SESSION_IDLE_TIMEOUT,
        )
        self._ready = asyncio.Event()
        self._closing = asyncio.Event()
        self._task: asyncio.Future[None] | None = None

    @property
    def asgi(self) -> ASGIApp:
        """The ASGI application of the MCP route."""
        return self.sessions.handle_request

    async def start(self) -> None:
        """Start the session manager (once); returns when it serves."""
        if self._task is None:
            self._task = asyncio.ensure_future(self._serve())
        ready: asyncio.Future[Any] = asyncio.ensure_future(self._ready.wait())
        task: asyncio.Future[Any] = self._task
        await asyncio.wait({ready, task}, return_when=asyncio.FIRST_COMPLETED)
        ready.cancel()
        if self._task.done():
            self._task.result()  # it failed to start: say why

    async def _serve(self) -> None:
        async with self.sessions.run():
            self._ready.set()
            await self._closing.wait()

    async def close(self) -> None:
        """End every session and stop serving; stop the headless calls."""
        self._closing.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), 10)
            except (asyncio.TimeoutError, Exception):
                log.warning("jupyter-ci: the MCP sessions did not close cleanly", exc_info=True)
        await self.notebooks.close()
        await _end_event_stream_watcher()


async def _end_event_stream_watcher() -> None:
    """End the task sse-starlette (the SDK's event streams) leaves polling for a shutdown on
    this event loop, so that the server stops without a pending task. Its flag is global to the
    process: set for as long as the watcher takes to see it, then cleared again."""
    from sse_starlette.sse import AppStatus

    watchers = [
        task
        for task in asyncio.all_tasks()
        if getattr(task.get_coro(), "__qualname__", "") == "_shutdown_watcher"
    ]
    if not watchers:
        return
    AppStatus.should_exit = True
    try:
        await asyncio.wait(watchers, timeout=2)
    finally:
        AppStatus.should_exit = False
