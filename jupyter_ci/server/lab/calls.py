"""Calls from a run to the browser tab that owns it, and their replies.

The server's loop acts on the notebook through the tab (ARCHITECTURE.md, "The parts"): every call
is a message with a ``call_id``, naming the run and the notebook; the tab answers with a
``CallResult`` or a ``CallFailure`` carrying the same id, and for ``run_cell`` first a
``CallProgress`` when the kernel begins the cell.

A channel belongs to one run. While the tab is disconnected, calls wait; when it comes back (the
same ``client_id``), every unanswered call is sent again. The tab answers a call id it has seen
before with the same result instead of doing the work twice, so a resend never runs a cell twice.
A reloaded page (the same client, a new page) has no such memory: a ``run_cell`` the previous page
received may have run, so it is not sent again but fails (:data:`PAGE_RELOADED`).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from ...errors import JupyterCIError, NotebookUnavailable

#: Sends one message to the run's owner; returns False when the owner is not connected now.
Sender = Callable[[dict[str, Any]], bool]
#: Receives a ``CallProgress`` message of a call.
ProgressCallback = Callable[[Mapping[str, Any]], None]
#: The failure of a ``run_cell`` the page that received it took away with it (a reload).
PAGE_RELOADED = "page_reloaded"


class CallFailed(JupyterCIError):
    """The tab could not do what a call asked; ``error`` is the tab's ErrorInfo."""

    code = "call_failed"

    def __init__(self, method: str, error: Mapping[str, Any]) -> None:
        message = str(error.get("message") or f"the browser could not {method}")
        super().__init__(message, hint=str(error.get("hint", "")))
        self.method = method
        self.error = dict(error)
        self.error_code = str(error.get("code", "error"))


@dataclass
class _Pending:
    message: dict[str, Any]
    future: asyncio.Future[dict[str, Any]]
    on_progress: ProgressCallback | None = None
    #: Whether the message reached a connected tab at least once.
    delivered: bool = False


class CallChannel:
    """The calls of one run to its owner tab: ids, replies, progress, resends."""

    _ids = itertools.count(1)

    def __init__(self, run_id: str, notebook_path: str, send: Sender) -> None:
        self.run_id = run_id
        self.notebook_path = notebook_path
        self._send = send
        self._pending: dict[str, _Pending] = {}
        self.last_call_id = ""
        self._closed: JupyterCIError | None = None

    @property
    def pending(self) -> int:
        """How many calls wait for their reply."""
        return len(self._pending)

    async def call(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        on_progress: ProgressCallback | None = None,
    ) -> dict[str, Any]:
        """Send a call and await its ``CallResult``; :class:`CallFailed` for a ``CallFailure``.

        Raises the channel's closing error (see :meth:`close`) if it is or becomes closed.
        """
        return await self.send(method, params, on_progress=on_progress)

    def send(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        on_progress: ProgressCallback | None = None,
    ) -> asyncio.Future[dict[str, Any]]:
        """Send a call now (before any later message to the tab); a future of its result, as
        :meth:`call` returns it."""
        if self._closed is not None:
            raise self._closed
        call_id = f"{self.run_id[:8]}-{next(self._ids)}"
        message: dict[str, Any] = {
            "call_id": call_id,
            "run_id": self.run_id,
            "notebook_path": self.notebook_path,
            "method": method,
            **(params or {}),
        }
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        pending = _Pending(message, future, on_progress)
        self._pending[call_id] = pending
        #: The id of the call sent last (a caller's own, to leave out of a resend).
        self.last_call_id = call_id
        # If the tab is away, resend() delivers it on its return.
        pending.delivered = self._send(message)
        return asyncio.ensure_future(self._result(call_id, method, future))

    async def _result(
        self, call_id: str, method: str, future: asyncio.Future[dict[str, Any]]
    ) -> dict[str, Any]:
        try:
            reply = await future
        finally:
            self._pending.pop(call_id, None)
        if reply.get("ok") is False:
            raise CallFailed(method, reply.get("error") or {})
        return reply

    def deliver(self, reply: Mapping[str, Any]) -> bool:
        """Hand a ``CallResult``, ``CallFailure`` or ``CallProgress`` to its waiting call.

        Returns False when no call of this channel has that id (a late or foreign reply).
        """
        pending = self._pending.get(str(reply.get("call_id")))
        if pending is None or pending.future.done():
            return False
        if "progress" in reply:
            if pending.on_progress is not None:
                pending.on_progress(reply)
            return True
        pending.future.set_result(dict(reply))
        return True

    def resend(self, *, page_start: bool = False, skip: Collection[str] = ()) -> int:
        """Send every unanswered call again (after the owner reconnected) but those in
        ``skip``; returns how many.

        ``page_start``: the owner is a new page (reloaded); a ``run_cell`` the previous page
        received fails instead (it may have run there, and its outputs went with the page).
        """
        for call_id, pending in list(self._pending.items()):
            if call_id in skip or pending.future.done():
                continue
            if page_start and pending.delivered and pending.message["method"] == "run_cell":
                error = {
                    "code": PAGE_RELOADED,
                    "message": "The page was reloaded while a cell of the run was running; "
                    "what the cell did went with the page.",
                    "hint": "The cell may still be running in the kernel: wait for it, then "
                    "ask again.",
                }
                pending.future.set_result(
                    {"call_id": pending.message["call_id"], "ok": False, "error": error}
                )
                continue
            pending.delivered = self._send(pending.message) or pending.delivered
        return len(self._pending)

    def close(self, error: JupyterCIError | None = None) -> None:
        """Fail every waiting call and every later one with ``error``."""
        self._closed = error or NotebookUnavailable("The run's calls to the browser were closed.")
        for pending in list(self._pending.values()):
            if not pending.future.done():
                pending.future.set_exception(self._closed)

    def fail_pending(self, error: JupyterCIError) -> None:
        """Fail the calls waiting now (not later ones) with ``error``."""
        for pending in list(self._pending.values()):
            if not pending.future.done():
                pending.future.set_exception(error)
