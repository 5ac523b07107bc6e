"""Saving a notebook an agent changed through its JupyterLab tab, without real-time
collaboration too: the tab saves it (as the user's Save does), shortly after the agent's latest
change rather than after each one (a save is a write of the whole file on the server, whose
event loop it holds meanwhile; an agent making many calls in a row must not pay it each time).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ..errors import JupyterCIError

log = logging.getLogger("jupyter_ci.mcp")

#: Seconds after an agent's latest change that its notebook is saved...
SAVE_AFTER = 1.0
#: ...and at the latest this long after the first change not saved yet.
SAVE_WITHIN = 5.0


class TabSaves:
    """The saves due of notebooks open in tabs, one timer per (tab, notebook)."""

    def __init__(self, manager: Any) -> None:
        self.manager = manager
        self._due: dict[tuple[str, str], tuple[float, asyncio.TimerHandle]] = {}
        self._saving: set[asyncio.Future[None]] = set()

    def changed(self, tab: str, path: str) -> None:
        """An agent changed the notebook through the tab: save it soon."""
        loop = asyncio.get_running_loop()
        key = (tab, path)
        first = loop.time()
        if key in self._due:
            first, timer = self._due[key]
            timer.cancel()
        delay = max(0.0, min(SAVE_AFTER, first + SAVE_WITHIN - loop.time()))
        self._due[key] = (first, loop.call_later(delay, self._save_now, key))

    def _save_now(self, key: tuple[str, str]) -> None:
        self._due.pop(key, None)
        task = asyncio.ensure_future(self._save(*key))
        self._saving.add(task)
        task.add_done_callback(self._saving.discard)

    async def _save(self, tab: str, path: str) -> None:
        try:
            with self.manager.probes.workspace(tab, path) as workspace:
                await workspace.save()
        except JupyterCIError as err:  # the tab closed the notebook, or went away
            log.info("jupyter-ci: %s was not saved: %s", path, err)

    async def close(self) -> None:
        """Drop the saves not due yet; wait for those going on."""
        for _, timer in self._due.values():
            timer.cancel()
        self._due.clear()
        if self._saving:
            await asyncio.wait(self._saving, timeout=5)
