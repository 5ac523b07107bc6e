"""An outside agent for the browser tests: the MCP SDK's own client, over Streamable HTTP, on an
event loop of its own in a thread (the browser tests drive Playwright's synchronous API)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from mcp_types import CallToolResult

from ..mcp.support import http_client, structured
from .lab import Lab


class Agent:
    """One MCP client session to a Lab's ``jupyter-ci/mcp``; calls are made from any thread."""

    def __init__(self, lab: Lab, name: str) -> None:
        self.url = f"{lab.url}jupyter-ci/mcp"
        self.token = lab.token
        self.name = name
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._queue: asyncio.Queue[Any] | None = None
        self._session: concurrent.futures.Future[None] | None = None

    def start(self) -> None:
        """Open the session (returns once the client is connected)."""
        self._thread.start()
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._session = asyncio.run_coroutine_threadsafe(self._serve(ready), self.loop)
        ready.result(timeout=60)

    async def _serve(self, ready: concurrent.futures.Future[None]) -> None:
        # One task enters and leaves the client (anyio ties its task group to it); each call
        # is a task of its own.
        self._queue = asyncio.Queue()
        async with http_client(self.url, self.token, self.name) as client:
            ready.set_result(None)
            tasks: set[asyncio.Future[Any]] = set()
            while (item := await self._queue.get()) is not None:
                name, arguments, outcome, progress = item
                task = asyncio.ensure_future(self._call(client, name, arguments, outcome, progress))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            await asyncio.gather(*tasks, return_exceptions=True)

    @staticmethod
    async def _call(
        client: Any,
        name: str,
        arguments: dict[str, Any],
        outcome: concurrent.futures.Future[CallToolResult],
        progress: list[str] | None,
    ) -> None:
        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            if progress is not None:
                progress.append(message or "")

        try:
            outcome.set_result(
                await client.call_tool(name, arguments, progress_callback=on_progress)
            )
        except BaseException as error:  # handed to the test thread
            outcome.set_exception(error)

    def call(
        self, name: str, arguments: dict[str, Any], progress: list[str] | None = None
    ) -> concurrent.futures.Future[CallToolResult]:
        """Call a tool (in the background); its result's future."""
        outcome: concurrent.futures.Future[CallToolResult] = concurrent.futures.Future()
        assert self._queue is not None
        self.loop.call_soon_threadsafe(self._queue.put_nowait, (name, arguments, outcome, progress))
        return outcome

    def result(self, name: str, arguments: dict[str, Any], timeout: float = 120) -> dict[str, Any]:
        """Call a tool and wait for its structured result (the test fails on a tool error)."""
        return structured(self.call(name, arguments).result(timeout=timeout))

    def close(self) -> None:
        """End the session and the loop."""
        if self._queue is not None:
            self.loop.call_soon_threadsafe(self._queue.put_nowait, None)
        if self._session is not None:
            self._session.result(timeout=30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=30)
        self.loop.close()


@contextmanager
def agent(lab: Lab, name: str = "claude-code") -> Iterator[Agent]:
    """An MCP client session for the block."""
    client = Agent(lab, name)
    client.start()
    try:
        yield client
    finally:
        client.close()
