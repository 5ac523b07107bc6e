"""One HTTP request of a tornado handler, served by an ASGI application.

The MCP SDK's Streamable HTTP transport is an ASGI application; the Jupyter server is tornado.
:func:`serve_asgi` runs the application for the request the handler holds: the scope from the
request, the body (tornado has read it already) as one ``http.request`` message, then
``http.disconnect`` once the client goes away; the response's status and headers as they come,
and each body chunk written and flushed at once (Server-Sent Events must reach the client as
they are sent, not when the response ends). No separate port and no second web server.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Protocol

from tornado.iostream import StreamClosedError
from tornado.web import RequestHandler

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class ASGIApp(Protocol):
    """An ASGI 3 application."""

    def __call__(self, scope: Message, receive: Receive, send: Send) -> Awaitable[None]:
        """Serve one connection."""
        ...


#: Response headers tornado sets itself (from what is written), never copied from the app.
_TORNADO_OWNED = frozenset({"content-length", "transfer-encoding", "connection"})


def scope_of(handler: RequestHandler) -> dict[str, Any]:
    """The ASGI ``http`` scope of the handler's request."""
    request = handler.request
    host, _, port = request.host.rpartition(":")
    server = (host, int(port)) if port.isdigit() else (request.host, 0)
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": request.version.removeprefix("HTTP/") or "1.1",
        "method": request.method or "GET",
        "scheme": request.protocol,
        "path": request.path,
        "raw_path": request.path.encode("latin-1", "replace"),
        "root_path": "",
        "query_string": request.query.encode("latin-1", "replace"),
        "headers": [
            (name.lower().encode("latin-1"), value.encode("latin-1", "replace"))
            for name, value in request.headers.get_all()
        ],
        "client": (request.remote_ip or "", 0),
        "server": server,
    }


class TornadoExchange:
    """The request and response of one tornado handler, as an ASGI ``receive`` and ``send``."""

    def __init__(self, handler: RequestHandler) -> None:
        self.handler = handler
        self._body_sent = False
        self.disconnected = asyncio.Event()
        self.started = False
        self.finished = False

    def connection_closed(self) -> None:
        """The client closed the connection (the handler's ``on_connection_close``)."""
        self.disconnected.set()

    async def receive(self) -> Message:
        """The request's body once, then (when the client goes away) ``http.disconnect``."""
        if not self._body_sent:
            self._body_sent = True
            return {"type": "http.request", "body": self.handler.request.body, "more_body": False}
        await self.disconnected.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        """Write the response's start and body to the client, flushing each chunk."""
        if self.finished or self.disconnected.is_set():
            return
        kind = message["type"]
        if kind == "http.response.start":
            self._start(int(message["status"]), message.get("headers") or [])
        elif kind == "http.response.body":
            await self._body(bytes(message.get("body", b"")), bool(message.get("more_body")))

    def _start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        handler = self.handler
        handler.set_status(status)
        handler.clear_header("Content-Type")
        for raw_name, raw_value in headers:
            name = raw_name.decode("latin-1")
            if name.lower() in _TORNADO_OWNED:
                continue
            handler.add_header(name, raw_value.decode("latin-1"))
        self.started = True

    async def _body(self, body: bytes, more: bool) -> None:
        handler = self.handler
        if body:
            handler.write(body)
        try:
            if more:
                await handler.flush()
            else:
                self.finished = True
                await handler.finish()
        except StreamClosedError:
            self.disconnected.set()


async def serve_asgi(app: ASGIApp, handler: RequestHandler, exchange: TornadoExchange) -> None:
    """Run ``app`` for the handler's request through ``exchange``; end the response if the
    application did not (it raised, or the client went away first)."""
    try:
        await app(scope_of(handler), exchange.receive, exchange.send)
    finally:
        if not exchange.finished and not handler._finished:
            exchange.finished = True
            if not exchange.started:
                handler.set_status(500)
            with contextlib.suppress(StreamClosedError):
                handler.finish()
