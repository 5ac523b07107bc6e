"""The run manager's side of the conversation store: history in, each run's events out.

A store that fails never fails a run: every call here logs and goes on (the store says in
``/jupyter-ci/status`` that conversations may not be kept). With no store (a server that has not
opened it yet) runs go on without history or record.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

from ..agent.outcome import RunOutcome
from ..agent.states import RunState
from ..errors import ServerStopping
from ..models.base import TokenUsage
from .store import ConversationStore, RunRecord

#: Earlier messages of the notebook's conversation given to the model with a new request.
HISTORY_MESSAGES = 12


@dataclass(frozen=True)
class History:
    """What a new run of a notebook gets from its conversation."""

    conversation_id: str | None
    #: The latest user/assistant turns, for the model.
    turns: list[dict[str, Any]]
    #: The notices the conversation already holds.
    said: frozenset[str]


class RunRecorder:
    """Reads a notebook's history for a new run, records runs and their events."""

    def __init__(self, store: ConversationStore | None, log: logging.Logger) -> None:
        #: Set once the server has opened it; None until then.
        self.store = store
        self.log = log

    async def history(self, notebook_path: str) -> History:
        """The notebook's conversation id, its latest user/assistant messages (for the model)
        and the notices it already holds (said once per conversation)."""
        if self.store is None:
            return History(None, [], frozenset())
        try:
            conversation = await self.store.conversation_for(notebook_path)
            messages = await self.store.messages(conversation.id, limit=None)
        except Exception:  # the store says why in its own log; runs go on without history
            self.log.warning("jupyter-ci: the conversation store failed", exc_info=True)
            return History(None, [], frozenset())
        turns = [
            {"role": message.role, "content": message.text}
            for message in messages
            if message.role in ("user", "assistant") and message.text
        ]
        said = frozenset(message.text for message in messages if message.role == "notice")
        return History(str(conversation.id), turns[-HISTORY_MESSAGES:], said)

    async def conversation_id(self, notebook_path: str) -> str | None:
        """The notebook's conversation (made when it has none); None when the store fails."""
        if self.store is None:
            return None
        try:
            return str((await self.store.conversation_for(notebook_path)).id)
        except Exception:  # the store says why in its own log; runs go on without a record
            self.log.warning("jupyter-ci: the conversation store failed", exc_info=True)
            return None

    async def started(
        self,
        conversation_id: str | None,
        run_id: str,
        prompt: str,
        options: dict[str, Any],
        anchor_cell_id: str | None,
        origin: str,
    ) -> None:
        """Record a new run and its request (the user's message)."""
        if self.store is None or conversation_id is None:
            return
        await self._call(
            self.store.start_run(conversation_id, run_id, prompt, options, anchor_cell_id, origin)
        )
        await self._call(self.store.add_message(conversation_id, "user", prompt, run_id=run_id))

    async def write(
        self, run_id: str, conversation_id: str | None, queue: asyncio.Queue[Any]
    ) -> None:
        """Record a run's events from ``queue`` in order, off the loop's hot path, until None.

        Whatever has queued up while the previous write ran is written in one transaction: a
        fast run (or twenty at once) never waits for one disk sync per event.
        """
        while True:
            batch = [await queue.get()]
            while not queue.empty():
                batch.append(queue.get_nowait())
            ended = None in batch
            events = [item for item in batch if item is not None]
            if self.store is not None and conversation_id is not None and events:
                await self._call(self.store.record_events(run_id, events))
            if ended:
                return

    async def last_run_at(self, notebook_path: str, anchor: str) -> RunRecord | None:
        """The newest run of a ``%%ci`` cell (None if none, or unreadable)."""
        if self.store is None:
            return None
        try:
            conversation = await self.store.conversation_for(notebook_path)
            return await self.store.latest_run_for_anchor(conversation.id, anchor)
        except Exception:
            self.log.warning("jupyter-ci: could not read the run record", exc_info=True)
            return None

    async def stored_events(self, run_id: str) -> list[dict[str, Any]]:
        """A run's recorded events ([] if none, or unreadable)."""
        if self.store is None:
            return []
        try:
            return (await self.store.events_of([run_id])).get(run_id, [])
        except Exception:
            self.log.warning("jupyter-ci: could not read run %s", run_id, exc_info=True)
            return []

    async def _call(self, call: Awaitable[Any]) -> None:
        try:
            await call
        except Exception:
            self.log.warning("jupyter-ci: the conversation store failed", exc_info=True)


def abandoned_run_finished(record: RunRecord, last_time: float | None) -> dict[str, Any]:
    """The ``finished`` event of a run its server left unfinished (the process was killed).

    Recorded by the next server at startup, so the run's record, its history and a replay
    all say that it ended, and why.
    """
    usage = TokenUsage()
    if record.usage:
        cost = record.usage.get("cost")
        usage = TokenUsage(
            int(record.usage.get("prompt_tokens") or 0),
            int(record.usage.get("completion_tokens") or 0),
            float(cost) if isinstance(cost, (int, float)) else None,
        )
    seconds = max(0.0, (last_time or record.created) - record.created)
    error = ServerStopping()
    outcome = RunOutcome(
        record.run_id,
        RunState.STOPPED,
        "server_shutdown",
        error,
        [cell.cell_id for cell in record.cells],
        sum(1 for cell in record.cells if cell.status is not None),
        usage,
        seconds,
    )
    return {
        "type": "finished",
        "state": outcome.state.value,
        "reason": outcome.reason,
        "error": error.to_dict(),
        "summary": outcome.summary(),
        "answer": "",
        "text": outcome.status_line(),
    }
