"""A headless run in the notebook's conversation: recorded as the run manager records a live run,
off the call's path (the store's writes never hold a call)."""

from __future__ import annotations

import asyncio
from typing import Any

from ..server.recording import History, RunRecorder
from ..settings import Settings


class Recording:
    """The record of one headless run (an MCP call's, or ``ask``'s loop): its start (the request
    as the user's message) and its events, written in order by one background task."""

    def __init__(
        self,
        recorder: RunRecorder | None,
        path: str,
        prompt: str,
        settings: Settings,
        origin: str = "mcp",
    ) -> None:
        self.recorder = recorder if recorder is not None and recorder.store is not None else None
        self.path = path
        self.prompt = prompt
        self.settings = settings
        self.origin = origin
        self.queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.writer: asyncio.Future[None] | None = None

    async def history(self) -> History:
        """The notebook's conversation for a run of the loop (its model sees the turns)."""
        if self.recorder is None:
            return History(None, [], frozenset())
        return await self.recorder.history(self.path)

    def begin(self, run_id: str, conversation_id: str | None = None) -> None:
        """Start recording the run ``run_id`` (its conversation found meanwhile if not given)."""
        if self.recorder is not None:
            self.writer = asyncio.ensure_future(
                self._record(self.recorder, run_id, conversation_id)
            )

    async def _record(
        self, recorder: RunRecorder, run_id: str, conversation_id: str | None
    ) -> None:
        if conversation_id is None:
            conversation_id = await recorder.conversation_id(self.path)
        if conversation_id is not None:
            options = self.settings.public_dict()
            await recorder.started(conversation_id, run_id, self.prompt, options, None, self.origin)
        await recorder.write(run_id, conversation_id, self.queue)

    def event(self, event: dict[str, Any]) -> None:
        """One of the run's events (tokens are not recorded)."""
        if self.writer is not None and event.get("type") != "token":
            self.queue.put_nowait(event)

    async def end(self) -> None:
        """The run ended: wait until its record is written."""
        if self.writer is not None:
            self.queue.put_nowait(None)
            await asyncio.shield(self.writer)
