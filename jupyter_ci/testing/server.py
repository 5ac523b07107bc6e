"""The scripted OpenAI-compatible server: a background-thread HTTP server answering from a script.

Usage::

    from jupyter_ci.testing import Reply, Script, ScriptedModelServer

    with ScriptedModelServer([Reply.code("print(1)")]) as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="test-key", max_retries=0)
        ...
        assert srv.requests[0].messages[-1]["content"] == "..."

Stopping is prompt: open streams (even never-ending ones) are abandoned and every connection is
shut down, so ``stop()`` returns within about a second whatever the clients are doing.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
import time
from collections.abc import Iterable
from http.server import ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

from .handler import ScriptedHandler
from .recording import RecordedRequest, RequestLog
from .script import Reply, Script

_STOP_JOIN_SECONDS = 2.0


class ScriptedHTTPServer(ThreadingHTTPServer):
    """The ``http.server`` server underneath :class:`ScriptedModelServer`.

    Holds the current script, the request log and the set of open connections (so that stopping
    can close them all).
    """

    daemon_threads = True
    block_on_close = False

    def __init__(
        self, address: tuple[str, int], script: Script, log: RequestLog, verbose: bool
    ) -> None:
        self.script = script
        self.log = log
        self.verbose = verbose
        self.stopping = threading.Event()
        #: Cleared while replies are held (see ScriptedModelServer.hold), with how many may
        #: still go before the hold applies.
        self.released = threading.Event()
        self.released.set()
        self._passes = 0
        self._gate = threading.Lock()
        self._connections: dict[socket.socket, threading.Thread] = {}
        self._connections_lock = threading.Lock()
        super().__init__(address, ScriptedHandler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that closed its kept-alive connection (litellm's pool does) is not an
        error worth a traceback; anything else is printed as ``http.server`` does."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)

    def track(self, connection: socket.socket) -> None:
        """Remember an open connection and the thread serving it."""
        with self._connections_lock:
            self._connections[connection] = threading.current_thread()

    def untrack(self, connection: socket.socket) -> None:
        """Forget a connection that has been closed."""
        with self._connections_lock:
            self._connections.pop(connection, None)

    def hold(self, after: int) -> None:
        """Hold replies, after letting ``after`` more go (see ScriptedModelServer.hold)."""
        with self._gate:
            self._passes = after
            self.released.clear()

    def release(self) -> None:
        """Let held replies, and later ones, go."""
        with self._gate:
            self.released.set()

    def admit(self) -> bool:
        """Whether a reply may go now: nothing is held, or it is one of those let through."""
        with self._gate:
            if self.released.is_set():
                return True
            if self._passes > 0:
                self._passes -= 1
                return True
            return False

    def close_connections(self) -> list[threading.Thread]:
        """Shut down every open connection; return the threads that were serving them."""
        with self._connections_lock:
            items = list(self._connections.items())
        for connection, _thread in items:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        return [thread for _connection, thread in items]


class ScriptedModelServer:
    """A scripted stand-in for an OpenAI-compatible model provider, for tests.

    ``script`` is a :class:`Script`, or an iterable of replies (strings are text replies), or
    ``None`` for an empty script. The server listens on ``host:port`` (port 0 picks a free
    port) once started, records every request in :attr:`requests` and, with ``record_path``,
    appends each finished request as a JSON line to that file.
    """

    def __init__(
        self,
        script: Script | Iterable[Reply | str] | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        record_path: str | Path | None = None,
        verbose: bool = False,
    ) -> None:
        self._script = _as_script(script)
        self._host = host
        self._port = port
        self._log = RequestLog(record_path)
        self._verbose = verbose
        self._httpd: ScriptedHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> ScriptedModelServer:
        """Bind the socket and start serving in a background thread; returns ``self``."""
        if self._httpd is not None:
            raise RuntimeError("scripted server already started")
        httpd = ScriptedHTTPServer((self._host, self._port), self._script, self._log, self._verbose)
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"scripted-model-server:{httpd.server_address[1]}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, abandon open replies, close all connections; safe to call twice."""
        httpd, thread = self._httpd, self._thread
        if httpd is None or thread is None:
            return
        httpd.stopping.set()
        httpd.shutdown()
        handlers = httpd.close_connections()
        httpd.server_close()
        deadline = time.monotonic() + _STOP_JOIN_SECONDS
        thread.join(max(0.0, deadline - time.monotonic()))
        for handler in handlers:
            handler.join(max(0.0, deadline - time.monotonic()))
        self._thread = None

    close = stop

    def __enter__(self) -> ScriptedModelServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        """True between :meth:`start` and :meth:`stop`."""
        return self._thread is not None

    # -- addresses ----------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The port actually listened on."""
        if self._httpd is None:
            raise RuntimeError("scripted server not started")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """The server root, e.g. ``http://127.0.0.1:41234`` (no ``/v1``)."""
        host = self._host if ":" not in self._host else f"[{self._host}]"
        return f"http://{host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI ``base_url`` / litellm ``api_base``: :attr:`url` + ``/v1``."""
        return f"{self.url}/v1"

    # -- script -------------------------------------------------------------------------------

    @property
    def script(self) -> Script:
        """The script currently answering requests."""
        return self._script

    def set_script(self, script: Script | Iterable[Reply | str] | None) -> Script:
        """Answer subsequent requests from ``script`` (recorded requests are kept)."""
        self._script = _as_script(script)
        if self._httpd is not None:
            self._httpd.script = self._script
        return self._script

    def reset(self, script: Script | Iterable[Reply | str] | None = None) -> Script:
        """Replace the script and forget the recorded requests (the JSONL file is kept)."""
        self._log.clear()
        return self.set_script(script)

    def add(self, *replies: Reply | str) -> Script:
        """Append replies to the current script."""
        return self._script.add(*replies)

    # -- holding replies ----------------------------------------------------------------------

    def hold(self, after: int = 0) -> None:
        """Hold the replies, after the next ``after`` ones: a chat request answered from then
        on is recorded, then waits (after its ``latency``, before sending anything) until
        :meth:`release`, or until a new ``hold(after=n)`` lets ``n`` more go (held ones
        first come, first served as they poll). A reply already being sent goes on. For a
        test that must act while the model is "thinking", whatever the machine's load: it
        waits for the request (:meth:`wait_for_requests`), acts, then releases."""
        self._server().hold(after)

    def release(self) -> None:
        """Let held replies (and later ones) go."""
        self._server().release()

    def _server(self) -> ScriptedHTTPServer:
        if self._httpd is None:
            raise RuntimeError("scripted server not started")
        return self._httpd

    # -- recorded requests --------------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far (all paths), oldest first."""
        return self._log.records

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        """Only the chat completion requests."""
        return [r for r in self._log.records if r.path.rstrip("/").endswith("/chat/completions")]

    @property
    def last_request(self) -> RecordedRequest:
        """The most recent request; raises LookupError when there is none."""
        records = self._log.records
        if not records:
            raise LookupError("scripted server: no request received yet")
        return records[-1]

    def wait_for_requests(self, count: int, timeout: float = 5.0) -> list[RecordedRequest]:
        """Wait until ``count`` requests have arrived; raise TimeoutError otherwise."""
        return self._log.wait_for(count, timeout)

    def wait_for_close(self, timeout: float = 5.0) -> RecordedRequest:
        """Wait until a client hangs up on an unfinished reply; return that request's record.

        Raises TimeoutError if no client did so within ``timeout`` seconds.
        """
        return self._log.wait_for_close(timeout)

    def __repr__(self) -> str:
        where = self.url if self._httpd is not None else "not started"
        return f"ScriptedModelServer({where}, {self._script!r})"


def _as_script(script: Script | Iterable[Reply | str] | None) -> Script:
    if script is None:
        return Script()
    if isinstance(script, Script):
        return script
    return Script(script)
