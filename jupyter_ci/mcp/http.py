"""``<base_url>jupyter-ci/mcp``: jupyter-ci's MCP server over Streamable HTTP, in the Jupyter
server itself (no port of its own).

Authenticated like every Jupyter request (the server's token as ``Authorization: token …`` or
``Bearer …``, or the user's login), and authorized like the run websocket: the user must be
allowed to execute code in kernels (another JupyterHub user's server refuses). The request is
then served by the MCP SDK's session manager through :mod:`.asgi`: POST for messages (answered
as JSON or as an event stream), GET for the session's own event stream, DELETE to end it.

This module imports no MCP package: the service (and the SDK) load on the first request, or in
the background once the server started (:meth:`JupyterCIServer.mcp_service`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tornado import web

from ..server.handlers import BaseHandler, check_may_execute
from .asgi import TornadoExchange, serve_asgi

if TYPE_CHECKING:
    from tornado.concurrent import Future


class McpHandler(BaseHandler):
    """One HTTP request of an MCP client."""

    _exchange: TornadoExchange | None = None

    @web.authenticated
    async def post(self) -> None:
        """A JSON-RPC message (or batch) from the client."""
        await self._serve()

    @web.authenticated
    async def get(self) -> None:
        """The session's event stream (server-to-client messages)."""
        await self._serve()

    @web.authenticated
    async def delete(self) -> None:
        """End the session."""
        await self._serve()

    async def _serve(self) -> None:
        await check_may_execute(self)
        service = await self.ci_app.mcp_service()
        self._exchange = TornadoExchange(self)
        await serve_asgi(service.asgi, self, self._exchange)

    def check_xsrf_cookie(self) -> None:
        """As every Jupyter POST (a cookie needs its XSRF token; a token needs none), said so
        that an MCP client without credentials knows what to send."""
        try:
            super().check_xsrf_cookie()
        except web.HTTPError as refused:
            if self.current_user:
                raise
            raise web.HTTPError(
                403,
                "jupyter-ci's MCP server needs the Jupyter server's token: send it as "
                "'Authorization: token <token>' (or 'Bearer <token>').",
            ) from refused

    def on_connection_close(self) -> None:
        """The client went away (an event stream it no longer reads)."""
        if self._exchange is not None:
            self._exchange.connection_closed()
        super().on_connection_close()

    def finish(self, *args: Any, **kwargs: Any) -> Future[None]:
        """End the response with the content type the MCP transport chose (not JSON always)."""
        kwargs.setdefault("set_content_type", self._headers.get("Content-Type") or "text/plain")
        return super().finish(*args, **kwargs)
