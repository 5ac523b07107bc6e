"""``/jupyter-ci/ws``: the websocket between the server and each JupyterLab tab.

Authenticated like every Jupyter handler, and authorized like kernel execution (a run executes
code in the user's kernels): the user must be allowed to ``execute`` on ``kernels`` and on
jupyter-ci's own resource. Origin checks and keep-alive pings come from jupyter_server's
``WebSocketMixin``. What each message does is decided by :mod:`jupyter_ci.server.dispatch`.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from jupyter_server.auth.decorator import ws_authenticated
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.base.websocket import WebSocketMixin
from tornado.websocket import WebSocketClosedError, WebSocketHandler

from .dispatch import MAX_MESSAGE_BYTES
from .handlers import AUTH_RESOURCE, check_may_execute

if TYPE_CHECKING:
    from .app import JupyterCIServer

#: Tornado drops a connection on messages above this; the dispatcher refuses, with an error,
#: messages between MAX_MESSAGE_BYTES and this.
HARD_MESSAGE_LIMIT = 4 * MAX_MESSAGE_BYTES
#: The close code of a connection the server ends for what it did (a websocket "policy
#: violation"); the reason says what.
CLOSE_POLICY = 1008
#: Bytes queued for one connection that its tab has not read yet; beyond, the tab is too slow
#: to read (or does not) and the connection is closed: it reconnects and replays what it missed.
MAX_QUEUED_BYTES = HARD_MESSAGE_LIMIT
#: The reason a connection closed for not reading says.
TOO_SLOW = "The tab did not read the server's messages (too much queued); reconnect and replay."


class _SocketConnection:
    """The hub's view of one websocket: ``send`` queues JSON and never raises.

    What is queued and not yet written to the socket is counted (``queued``, bytes): a tab that
    stops reading would otherwise grow the server without bound. Past
    :data:`MAX_QUEUED_BYTES` the connection is closed, saying why (:data:`TOO_SLOW`).
    """

    def __init__(self, handler: RunSocketHandler) -> None:
        self.handler = handler
        self.open = True
        self.queued = 0
        user = handler.current_user
        self.user: str = str(getattr(user, "username", None) or user or "")

    def send(self, message: dict[str, Any]) -> None:
        if not self.open:
            return
        text = json.dumps(message)
        size = len(text)
        if self.queued + size > MAX_QUEUED_BYTES:
            self.handler.log.warning(
                "jupyter-ci: closing a connection that does not read (%d bytes queued)",
                self.queued,
            )
            self.close(TOO_SLOW)
            return
        try:
            future = self.handler.write_message(text)
        except WebSocketClosedError:
            self.open = False
            return
        self.queued += size
        future.add_done_callback(lambda done: self._written(done, size))

    def _written(self, future: Any, size: int) -> None:
        self.queued -= size
        _ignore_closed(future)

    def close(self, reason: str) -> None:
        """Close the websocket with ``reason`` (the tab shows it, reconnects and replays)."""
        if self.open:
            self.open = False
            self.handler.close(CLOSE_POLICY, reason[:120])


def _ignore_closed(future: Any) -> None:
    if not future.cancelled():
        future.exception()  # retrieve it: a closed stream is not an error here


class RunSocketHandler(WebSocketMixin, WebSocketHandler, JupyterHandler):
    """One tab's connection: requests and call replies in; events, calls and replies out."""

    auth_resource = AUTH_RESOURCE

    @property
    def ci_app(self) -> JupyterCIServer:
        """The running extension application."""
        app: JupyterCIServer = self.settings["jupyter_ci"]
        return app

    def set_default_headers(self) -> None:
        """No HTTP headers of JupyterHandler's (this is a websocket)."""

    @property
    def max_message_size(self) -> int:
        """Tornado's limit; the dispatcher refuses messages above its own, lower one."""
        return HARD_MESSAGE_LIMIT

    @ws_authenticated
    async def get(self, *args: Any, **kwargs: Any) -> None:
        """Upgrade to a websocket once the user may execute code in kernels."""
        await check_may_execute(self)
        await self.ci_app.ensure_started()
        await super().get(*args, **kwargs)

    def open(self, *args: Any, **kwargs: Any) -> None:
        """Start pings; the tab introduces itself with a ``hello``."""
        super().open(*args, **kwargs)
        # Calls and their replies are small request/response messages: without this, Nagle's
        # algorithm and delayed ACKs hold each one back by tens of milliseconds.
        self.set_nodelay(True)
        self.connection = _SocketConnection(self)
        self._tasks: set[asyncio.Future[None]] = set()

    def on_message(self, message: str | bytes) -> None:
        """Hand the message to the dispatcher, without waiting for it.

        Tornado delivers no further message until ``on_message`` returns: a request whose
        handling waits for a call reply from this same tab (a re-run check reads the notebook)
        would wait forever. Each message is handled in its own task; tasks start in arrival
        order, so messages are still taken up in order.
        """
        task = asyncio.ensure_future(self.ci_app.dispatcher.handle(self.connection, message))
        self._tasks.add(task)
        task.add_done_callback(self._handled)

    def _handled(self, task: asyncio.Future[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.log.error("jupyter-ci: a message could not be handled", exc_info=task.exception())

    def on_close(self) -> None:
        """The tab went away (or reconnects on a new socket)."""
        connection = getattr(self, "connection", None)
        if connection is not None:
            connection.open = False
            self.ci_app.hub.closed(connection)
