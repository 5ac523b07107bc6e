"""What the server does with each message a tab sends: one small dispatcher.

It takes the raw text of a websocket message and a connection, checks the message against the
protocol schema (``ClientMessage``), and hands it to the hub (``hello``, ``subscribe``), the run
manager (``start_run``, ``stop_run``, ``review``, ``replay``, call replies) or the handoff
expectations (``expect_handoff``). Every request with a ``request_id`` gets a ``RequestReply``;
a message that cannot be handled gets an ``ErrorNotice`` and the connection stays open. Tests
feed it plain strings, no socket needed.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from .. import protocol
from .._version import __version__
from ..agent.request import ReviewDecision
from .expectations import HandoffExpectations
from .hub import ClientTaken, Connection, HelloRefused, Hub
from .paths import BadPath, notebook_path
from .run_types import RunRefused
from .runs import RunManager

log = logging.getLogger("jupyter_ci.server")

#: Larger messages are refused with a clear error (the browser caps outputs well below this);
#: tornado's own limit, above it, would drop the connection.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024


def error_info(code: str, message: str, hint: str = "") -> dict[str, Any]:
    """An ErrorInfo."""
    info = {"code": code, "message": message}
    if hint:
        info["hint"] = hint
    return info


def _definition_of(message: dict[str, Any]) -> str:
    """The narrowest schema definition to check ``message`` against.

    Call replies are most of the traffic (four a step); checking them against the whole
    ``ClientMessage`` oneOf evaluates every branch (1-4 ms each on a busy machine), their own
    definition costs well under 0.1 ms.
    """
    if "call_id" in message and "request" not in message:
        if "progress" in message:
            return "CallProgress"
        return "CallFailure" if message.get("ok") is False else "CallResult"
    return "ClientMessage"


def _with_canonical_paths(message: dict[str, Any]) -> dict[str, Any]:
    """The message with its notebook paths in their one canonical form (:mod:`.paths`)."""
    if "notebook_path" not in message and "notebook_paths" not in message:
        return message
    canonical = dict(message)
    if "notebook_path" in message:
        canonical["notebook_path"] = notebook_path(str(message["notebook_path"]))
    if "notebook_paths" in message:
        canonical["notebook_paths"] = [notebook_path(str(p)) for p in message["notebook_paths"]]
    return canonical


class Dispatcher:
    """Routes the messages of every connection."""

    def __init__(
        self,
        hub: Hub,
        manager: RunManager,
        *,
        expectations: HandoffExpectations | None = None,
        max_bytes: int = MAX_MESSAGE_BYTES,
    ) -> None:
        self.hub = hub
        self.manager = manager
        self.expectations = expectations
        self.max_bytes = max_bytes

    async def handle(self, connection: Connection, raw: str | bytes) -> None:
        """Handle one message from ``connection``."""
        size = len(raw)
        try:
            message = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            self._notice(connection, "bad_message", "The message is not JSON.")
            return
        except RecursionError:
            self._notice(connection, "bad_message", "The message is nested too deeply.")
            return
        if not isinstance(message, dict):
            self._notice(connection, "bad_message", "The message is not a JSON object.")
            return
        if size > self.max_bytes:
            self._too_large(connection, message, size)
            return
        try:
            protocol.validate(_definition_of(message), message)
        except ValueError as err:
            self._refuse(connection, message, error_info("bad_message", str(err)))
            return
        except RecursionError:
            self._refuse(connection, message, error_info("bad_message", "Nested too deeply."))
            return
        try:
            message = _with_canonical_paths(message)
        except BadPath as err:
            self._refuse(
                connection,
                message,
                error_info(
                    "bad_path", str(err), "Open the notebook from JupyterLab's file browser."
                ),
            )
            return
        client_id = self.hub.client_of(connection)
        if "request" in message:
            await self._request(connection, client_id, message)
        elif client_id is None:
            self._notice(connection, "no_hello", "Say hello before anything else.")
        elif not self.manager.deliver(client_id, message):
            log.debug("jupyter-ci: a reply for no waiting call: %s", message.get("call_id"))

    async def _request(
        self, connection: Connection, client_id: str | None, message: dict[str, Any]
    ) -> None:
        kind = message["request"]
        if kind == "hello":
            client = str(message["client_id"])
            try:
                secret = self.hub.hello(
                    connection,
                    client,
                    message["notebook_paths"],
                    message.get("client_secret"),
                    page_start=bool(message.get("page_start")),
                )
            except HelloRefused as refused:
                self._refuse(
                    connection, message, error_info(refused.code, refused.message, refused.hint)
                )
                if refused.close:
                    connection.close(refused.message)
                return
            except ClientTaken:
                info = error_info(
                    "client_taken",
                    "Another connection is that browser tab.",
                    "Reload the page: it gets an id of its own.",
                )
                self._refuse(connection, message, info)
                return
            runs = self.hub.runs_for(client, self.manager.runs())
            self._accept(
                connection, message, runs=runs, server_version=__version__, client_secret=secret
            )
            return
        if client_id is None:
            self._refuse(
                connection, message, error_info("no_hello", "Say hello before anything else.")
            )
            return
        try:
            if kind == "subscribe":
                self.hub.subscribe(connection, message["notebook_paths"])
                self._accept(connection, message)
            elif kind == "expect_handoff":
                written = self.expectations is not None and self.expectations.expect(
                    str(message["kernel_id"]), str(message["cell_id"]), str(message["code"])
                )
                self._accept(connection, message, expected=written)
            elif kind == "start_run":
                anchor = message.get("anchor_cell_id")
                if self.expectations is not None and message.get("handoff_nonce") and anchor:
                    self.expectations.fulfilled(str(message["kernel_id"]), str(anchor))
                result = await self.manager.start(client_id, message)
                fields: dict[str, Any] = {"position": result.position}
                if result.run_id:
                    fields["run_id"] = result.run_id
                if result.note:
                    fields["note"] = result.note
                if result.status_line:
                    fields["status_line"] = result.status_line
                self._accept(connection, message, **fields)
            elif kind == "stop_run":
                await self.manager.stop(client_id, str(message["run_id"]))
                self._accept(connection, message, run_id=str(message["run_id"]))
            elif kind == "review":
                comment = str(message.get("comment") or "").strip() or None
                self.manager.review(
                    client_id,
                    str(message["run_id"]),
                    str(message["cell_id"]),
                    ReviewDecision(str(message["decision"]), message.get("source"), comment),
                )
                self._accept(connection, message, run_id=str(message["run_id"]))
            elif kind == "preview":
                preview = await self.manager.preview(client_id, message)
                self._accept(connection, message, preview=preview)
            elif kind == "replay":
                events = await self.manager.replay(
                    client_id, str(message["run_id"]), int(message["after_seq"])
                )
                self._accept(connection, message, run_id=str(message["run_id"]))
                for event in events:
                    connection.send(event)
        except RunRefused as refused:
            self._refuse(connection, message, refused.to_dict(), run_id=refused.run_id)
        except Exception as err:  # a bug of ours: the tab still gets an answer, the log the rest
            log.exception("jupyter-ci: a %s request failed", kind)
            info = error_info(
                "internal_error",
                f"jupyter-ci could not do this ({type(err).__name__}).",
                "The server's log has the details.",
            )
            self._refuse(connection, message, info)

    # --- replies -------------------------------------------------------------------------

    @staticmethod
    def _accept(connection: Connection, message: dict[str, Any], **fields: Any) -> None:
        request_id = message.get("request_id")
        if request_id:
            connection.send({"reply_to": request_id, "ok": True, **fields})

    @staticmethod
    def _refuse(
        connection: Connection,
        message: dict[str, Any],
        error: dict[str, Any],
        run_id: str | None = None,
    ) -> None:
        request_id = message.get("request_id")
        if isinstance(request_id, str) and request_id:
            reply: dict[str, Any] = {"reply_to": request_id, "ok": False, "error": error}
            if run_id:
                reply["run_id"] = run_id
            connection.send(reply)
        else:
            connection.send({"notice": "error", "error": error})

    @staticmethod
    def _notice(connection: Connection, code: str, text: str) -> None:
        connection.send({"notice": "error", "error": error_info(code, text)})

    def _too_large(self, connection: Connection, message: dict[str, Any], size: int) -> None:
        limit = self.max_bytes // (1024 * 1024)
        info = error_info(
            "too_large",
            f"A message of {size / 1024 / 1024:.1f} MB is larger than the {limit} MB the "
            "server accepts.",
            "The cell's outputs are too large to read back; print less, or write them to a file.",
        )
        client_id = self.hub.client_of(connection)
        call_id = message.get("call_id")
        if client_id is not None and isinstance(call_id, str) and "progress" not in message:
            # The waiting call fails with this error instead of waiting forever.
            self.manager.deliver(client_id, {"call_id": call_id, "ok": False, "error": info})
        self._refuse(connection, message, info)
