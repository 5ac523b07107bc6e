"""The HTTP request handler of the scripted server: routing, recording and writing replies.

Routes (each also without the ``/v1`` prefix): ``POST /v1/chat/completions``,
``GET /v1/models`` and ``GET /v1/models/<name>``. Anything else gets an OpenAI-style 404.

Responses use HTTP/1.1: JSON bodies carry a ``Content-Length``; streams are
``text/event-stream`` with chunked transfer encoding, so a stream cut by a fault is visible to
the client as an incomplete body rather than a normal end.

A client that hangs up is noticed when a write fails, or, while the handler waits between
chunks (``delay``, never-ending faults), when the socket reports end-of-file.
"""

from __future__ import annotations

import itertools
import json
import select
import socket
import sys
import time
from collections.abc import Mapping
from dataclasses import replace
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from . import openai_format as fmt
from .recording import RecordedRequest
from .script import Fault, Reply, latest_message_text

if TYPE_CHECKING:
    from .server import ScriptedHTTPServer

NO_REPLY_MESSAGE = "scripted server: no reply left for this request"
"""The start of the error message sent (HTTP 500) when the script has no reply to give."""

_POLL = 0.02


class ClientGone(Exception):
    """The client closed the connection before the reply was complete."""


class ServerStopping(Exception):
    """The server is shutting down; the reply is abandoned."""


class ScriptedHandler(BaseHTTPRequestHandler):
    """Answers one connection's requests from the server's current script."""

    protocol_version = "HTTP/1.1"
    server_version = "jupyter-ci-scripted"
    sys_version = ""
    disable_nagle_algorithm = True
    server: ScriptedHTTPServer

    # -- connection bookkeeping ---------------------------------------------------------------

    def setup(self) -> None:
        """Register the connection so that stopping the server can close it."""
        super().setup()
        self.server.track(self.connection)

    def finish(self) -> None:
        """Unregister the connection."""
        try:
            super().finish()
        except OSError:
            pass
        finally:
            self.server.untrack(self.connection)

    def log_message(self, format: str, *args: Any) -> None:
        """Log to stderr only when the server is verbose (tests stay quiet)."""
        if self.server.verbose:
            sys.stderr.write(f"scripted server: {self.address_string()} {format % args}\n")

    # -- dispatch -----------------------------------------------------------------------------

    def do_GET(self) -> None:
        """Handle ``GET`` requests."""
        self._dispatch()

    def do_POST(self) -> None:
        """Handle ``POST`` requests."""
        self._dispatch()

    def do_PUT(self) -> None:
        """Answer ``PUT`` with an error (recorded like any request)."""
        self._dispatch()

    def do_DELETE(self) -> None:
        """Answer ``DELETE`` with an error (recorded like any request)."""
        self._dispatch()

    def _dispatch(self) -> None:
        raw = self._read_body()
        body_text = raw.decode("utf-8", errors="replace") if raw else None
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
                body_text = None
            except ValueError:
                body = None
        record = self.server.log.start(
            self.command, self.path, dict(self.headers.items()), body, body_text
        )
        try:
            self._route(record)
        except ClientGone:
            self.server.log.mark_closed_early(record)
            self.close_connection = True
        except ServerStopping:
            self._abort()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.server.log.mark_closed_early(record)
            self.close_connection = True
        finally:
            self.server.log.finish(record)

    def _route(self, record: RecordedRequest) -> None:
        path = urlsplit(self.path).path.rstrip("/")
        if path.startswith("/v1/") or path == "/v1":
            path = path[3:]
        if path == "/chat/completions":
            if self.command != "POST":
                self._method_not_allowed(record)
            else:
                self._chat(record)
        elif path == "/models":
            if self.command != "GET":
                self._method_not_allowed(record)
            else:
                record.outcome = "models"
                self._send_json(record, 200, fmt.models_body(self.server.script.models))
        elif path.startswith("/models/") and self.command == "GET":
            name = path[len("/models/") :]
            if name in self.server.script.models:
                record.outcome = "models"
                self._send_json(record, 200, fmt.model_object(name))
            else:
                record.outcome = "not_found"
                error = fmt.error_body(
                    f"The model '{name}' does not exist", "invalid_request_error", "model_not_found"
                )
                self._send_json(record, 404, error)
        else:
            record.outcome = "not_found"
            error = fmt.error_body(
                f"scripted server: unknown path {self.command} {self.path}",
                "invalid_request_error",
                "unknown_url",
            )
            self._send_json(record, 404, error)

    def _method_not_allowed(self, record: RecordedRequest) -> None:
        record.outcome = "bad_request"
        error = fmt.error_body(
            f"scripted server: method {self.command} not allowed on {self.path}",
            "invalid_request_error",
        )
        self._send_json(record, 405, error)

    # -- chat completions ---------------------------------------------------------------------

    def _chat(self, record: RecordedRequest) -> None:
        body = record.body
        if not isinstance(body, Mapping) or not isinstance(body.get("messages"), list):
            record.outcome = "bad_request"
            error = fmt.error_body(
                "scripted server: the body must be a JSON object with a 'messages' list",
                "invalid_request_error",
                param="messages",
            )
            self._send_json(record, 400, error)
            return
        messages: list[Any] = body["messages"]
        stream = bool(body.get("stream"))
        options = body.get("stream_options")
        include_usage = (
            stream and isinstance(options, Mapping) and bool(options.get("include_usage"))
        )
        model = body.get("model")
        record.stream = stream

        reply = self.server.script.take(messages)
        if reply is None:
            record.outcome = "no_reply"
            latest = latest_message_text(messages)
            hint = latest if len(latest) <= 200 else latest[:200] + "..."
            error = fmt.error_body(
                f"{NO_REPLY_MESSAGE} (latest user/tool message: {hint!r})",
                "scripted_server_error",
                "no_reply_left",
            )
            self._send_json(record, 500, error)
            return

        shapes = fmt.CompletionShapes(
            record.index, model if isinstance(model, str) else "scripted", messages, reply
        )
        self._pause(reply.latency)
        self._wait_released()
        fault = reply.fault
        if fault is None:
            record.outcome = "tool_calls" if reply.tool_calls else "text"
            if stream:
                self._stream_reply(record, shapes, reply, include_usage)
            else:
                self._pause(reply.delay * fmt.completion_tokens(reply))
                self._send_json(record, 200, shapes.completion())
            return
        record.outcome = f"fault:{fault.kind}"
        self._fault(record, shapes, reply, fault, stream=stream, include_usage=include_usage)

    def _stream_reply(
        self,
        record: RecordedRequest,
        shapes: fmt.CompletionShapes,
        reply: Reply,
        include_usage: bool,
    ) -> None:
        self._start_stream(record)
        self._send_event(record, shapes.role_chunk(include_usage=include_usage))
        for chunk in shapes.body_chunks(include_usage=include_usage):
            self._pause(reply.delay)
            self._send_event(record, chunk)
        self._send_event(record, shapes.finish_chunk(include_usage=include_usage))
        if include_usage:
            self._send_event(record, shapes.usage_chunk())
        self._send_event(record, "[DONE]")
        self._end_stream()

    def _fault(
        self,
        record: RecordedRequest,
        shapes: fmt.CompletionShapes,
        reply: Reply,
        fault: Fault,
        *,
        stream: bool,
        include_usage: bool,
    ) -> None:
        kind = fault.kind
        if kind == "auth":
            message = fault.message or "Incorrect API key provided (scripted server: simulated)."
            error = fmt.error_body(message, "invalid_request_error", "invalid_api_key")
            self._send_json(record, 401, error)
        elif kind == "rate_limit":
            retry_after = 1.0 if fault.retry_after is None else fault.retry_after
            header = str(int(retry_after)) if retry_after == int(retry_after) else str(retry_after)
            message = fault.message or "scripted server: rate limit reached (simulated)"
            error = fmt.error_body(message, "requests", "rate_limit_exceeded")
            self._send_json(record, 429, error, headers={"Retry-After": header})
        elif kind == "server_error":
            message = fault.message or "scripted server: internal error (simulated)"
            self._send_json(record, 500, fmt.error_body(message, "server_error"))
        elif kind == "http_error":
            status = fault.status or 500
            message = fault.message or f"scripted server: simulated HTTP {status}"
            error_type = "server_error" if status >= 500 else "invalid_request_error"
            self._send_json(record, status, fmt.error_body(message, error_type, fault.code))
        elif kind == "cut_stream":
            self._cut(record, shapes, reply, fault, stream=stream, include_usage=include_usage)
        elif kind == "length":
            # The part of the reply the chunks carry, ended as a whole reply is.
            pieces = fmt.split_tokens(reply.content or "")[: max(fault.after_chunks - 1, 0)]
            cut = replace(reply, content="".join(pieces), tool_calls=())
            shapes = fmt.CompletionShapes(shapes.request_index, shapes.model, shapes.messages, cut)
            if stream:
                self._stream_reply(record, shapes, cut, include_usage)
            else:
                self._send_json(record, 200, shapes.completion())
        elif kind == "malformed_json":
            self._malformed(record, shapes, reply, stream=stream, include_usage=include_usage)
        elif kind == "empty_stream":
            # The body ends properly, then the server closes (announced, so that a keep-alive
            # client does not reuse the connection).
            if stream:
                self._start_stream(record, close=True)
                self._end_stream()
            else:
                self._send_bytes(record, 200, b"", "application/json", {"Connection": "close"})
                self.close_connection = True
        else:  # never_ending
            self._never_ending(record, shapes, reply, fault, stream=stream)

    def _cut(
        self,
        record: RecordedRequest,
        shapes: fmt.CompletionShapes,
        reply: Reply,
        fault: Fault,
        *,
        stream: bool,
        include_usage: bool,
    ) -> None:
        if not stream:
            data = _json_bytes(shapes.completion())
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self._write(data[: len(data) // 2])
            record.status = 200
            self._abort()
            return
        self._start_stream(record, close=fault.graceful)
        chunks = [shapes.role_chunk(include_usage=include_usage)]
        chunks.extend(shapes.body_chunks(include_usage=include_usage))
        chunks.append(shapes.finish_chunk(include_usage=include_usage))
        for n, chunk in enumerate(chunks[: fault.after_chunks]):
            if n:
                self._pause(reply.delay)
            self._send_event(record, chunk)
        if fault.graceful:
            self._end_stream()
        else:
            self._abort()

    def _malformed(
        self,
        record: RecordedRequest,
        shapes: fmt.CompletionShapes,
        reply: Reply,
        *,
        stream: bool,
        include_usage: bool,
    ) -> None:
        broken = '{"id": "' + shapes.id + '", "object": "chat.completion", "choices": [{"ind'
        if not stream:
            self._send_bytes(record, 200, broken.encode(), "application/json")
            return
        self._start_stream(record)
        self._send_event(record, shapes.role_chunk(include_usage=include_usage))
        self._send_event(record, broken)
        for chunk in shapes.body_chunks(include_usage=include_usage):
            self._pause(reply.delay)
            self._send_event(record, chunk)
        self._send_event(record, shapes.finish_chunk(include_usage=include_usage))
        self._send_event(record, "[DONE]")
        self._end_stream()

    def _never_ending(
        self,
        record: RecordedRequest,
        shapes: fmt.CompletionShapes,
        reply: Reply,
        fault: Fault,
        *,
        stream: bool,
    ) -> None:
        if not stream:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            record.status = 200
            while True:
                self._write_chunk(b" ")
                self._pause(fault.interval)
        else:
            self._stream_forever(record, shapes, reply, fault)

    def _stream_forever(
        self, record: RecordedRequest, shapes: fmt.CompletionShapes, reply: Reply, fault: Fault
    ) -> None:
        self._start_stream(record)
        self._send_event(record, shapes.role_chunk())
        pieces = fmt.split_tokens(reply.content or "") or ["tick "]
        for piece in itertools.cycle(pieces):
            self._pause(fault.interval)
            if fault.comments:
                self._write_chunk(b": keepalive\n\n")
            else:
                self._send_event(record, shapes.chunk({"content": piece}))

    # -- low-level writing --------------------------------------------------------------------

    def _send_json(
        self,
        record: RecordedRequest,
        status: int,
        obj: Mapping[str, Any],
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self._send_bytes(record, status, _json_bytes(obj), "application/json", headers)

    def _send_bytes(
        self,
        record: RecordedRequest,
        status: int,
        data: bytes,
        content_type: str,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        record.status = status
        self._write(data)

    def _start_stream(self, record: RecordedRequest, *, close: bool = False) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        if close:
            # send_header also sets close_connection for "Connection: close".
            self.send_header("Connection", "close")
        self.end_headers()
        record.status = 200

    def _send_event(self, record: RecordedRequest, data: Mapping[str, Any] | str) -> None:
        self._write_chunk(fmt.sse(data))
        record.chunks_sent += 1

    def _write_chunk(self, data: bytes) -> None:
        if self.server.stopping.is_set():
            raise ServerStopping
        self._write(f"{len(data):X}\r\n".encode() + data + b"\r\n")

    def _end_stream(self) -> None:
        self._write(b"0\r\n\r\n")

    def _write(self, data: bytes) -> None:
        try:
            self.wfile.write(data)
            self.wfile.flush()
        except OSError as exc:
            if self.server.stopping.is_set():
                raise ServerStopping from exc
            raise ClientGone from exc

    def _abort(self) -> None:
        """Close the socket now, in the middle of whatever was being sent."""
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _pause(self, seconds: float) -> None:
        """Wait ``seconds``, watching for a client hang-up and for the server stopping."""
        deadline = time.monotonic() + seconds
        while True:
            if self.server.stopping.is_set():
                raise ServerStopping
            if self._client_hung_up():
                raise ClientGone
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self.server.stopping.wait(min(left, _POLL))

    def _wait_released(self) -> None:
        """Wait while replies are held (see ``ScriptedModelServer.hold``), watching for a
        client hang-up and for the server stopping."""
        while not self.server.admit():
            if self.server.stopping.is_set():
                raise ServerStopping
            if self._client_hung_up():
                raise ClientGone
            self.server.released.wait(_POLL)

    def _client_hung_up(self) -> bool:
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            if not readable:
                return False
            peeked: bytes = self.connection.recv(1, socket.MSG_PEEK)
            return peeked == b""
        except (OSError, ValueError):
            return True

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts: list[bytes] = []
            while True:
                size_line = self.rfile.readline(65537)
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline(65537)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""


def _json_bytes(obj: Mapping[str, Any]) -> bytes:
    return json.dumps(obj).encode()
