"""What the kernel's output channel says of a run's cell, heard by the server itself.

The tab runs a run's cells and reports each one's outputs and reply. A page reloaded while a cell
runs takes that part with it, but the kernel goes on with the cell. So while a run is active the
server also listens to its kernel's iopub channel (a broadcast: every client of the kernel hears
every request's outputs) and keeps what comes under the execute request of the run's current
cell, whose msg_id the tab says in its ``started`` progress: the execution count and start
(``execute_input``), the outputs (built by the one normaliser,
:class:`~jupyter_ci.execution.outputs.NotebookOutputs`), and the end (``status: idle``). After a
reload the run reads the cell's end from here (ARCHITECTURE.md, Invariants: a run belongs to the
browser tab, across its reloads).

Only kernels this server runs have a channel it can listen to (their connection file is here); a
kernel gateway's kernels have none, and a reload while their cell runs ends the run, saying so.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import nbformat
from jupyter_client.session import Session

from ...execution.outputs import NotebookOutputs, Output
from ...execution.status import KernelFate

log = logging.getLogger("jupyter_ci.server")

#: Requests whose messages are kept until the tab names the cell's (a cell's first messages may
#: come before its ``started`` progress): the latest few, each at most this many messages.
MAX_UNNAMED_REQUESTS = 4
MAX_UNNAMED_MESSAGES = 500
#: iopub messages that add nothing to a cell's outputs (fed to its builder when they are read).
_NO_OUTPUT = frozenset({"status", "execute_input"})


class HeardCell:
    """One execute request as the kernel's output channel told it."""

    def __init__(self, msg_id: str) -> None:
        self.msg_id = msg_id
        # The outputs are built only once a message may change them, or they are read: a cell
        # without outputs (heard while it runs, for a reload that mostly never comes) costs the
        # server's loop no builder then.
        self._builder: NotebookOutputs | None = None
        self._cell = nbformat.NotebookNode(  # type: ignore[no-untyped-call]
            cell_type="code", metadata={}, source="", outputs=[], execution_count=None
        )
        self._unbuilt: list[dict[str, Any]] = []
        #: When the kernel began it (its ``execute_input``), seconds since the epoch.
        self.started_at: float | None = None
        #: Whether an ``error`` output came (the request ended in error).
        self.errored = False
        #: Whether the kernel said it is idle after it, or what became of the kernel says so.
        self.ended = False
        #: What became of the kernel, when that ended it (restarted, died).
        self.fate: KernelFate | None = None
        #: Counts changes, for :meth:`changed`.
        self.version = 0
        self._waiters: list[asyncio.Future[None]] = []

    @property
    def outputs(self) -> list[Output]:
        """The outputs so far, as a notebook shows them."""
        return list(self._built()["outputs"])

    @property
    def execution_count(self) -> int | None:
        """The execution count the kernel gave it."""
        count = self._built().get("execution_count")
        return count if isinstance(count, int) else None

    def take(self, msg: dict[str, Any]) -> None:
        """One iopub message whose parent is this request."""
        if self.ended:
            return
        kind = msg["msg_type"]
        if kind == "execute_input" and self.started_at is None:
            date = msg["header"].get("date")
            self.started_at = date.timestamp() if hasattr(date, "timestamp") else None
        if kind == "error":
            self.errored = True
        self._unbuilt.append(msg)
        if kind not in _NO_OUTPUT:
            self._built()
        content = msg.get("content") or {}
        if kind == "status" and content.get("execution_state") == "idle":
            self.ended = True  # the end of a request's messages (what the builder says too)
        self._bump()

    def end(self, fate: KernelFate | None) -> None:
        """The kernel went away (or the run is over): nothing more will come."""
        if not self.ended:
            self.ended = True
            self.fate = fate
            self._bump()

    async def changed(self, version: int) -> None:
        """Return once :attr:`version` differs from ``version`` (at once if it does now)."""
        if self.version != version:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        await waiter

    def _built(self) -> nbformat.NotebookNode:
        """The cell with every message taken so far in its outputs."""
        if self._builder is None:
            self._builder = NotebookOutputs(store_widget_state=False)
            self._builder.nb["cells"] = [self._cell]
            self._builder.begin(0)
        for msg in self._unbuilt:
            self._builder.feed(msg, 0)
        self._unbuilt.clear()
        return self._cell

    def _bump(self) -> None:
        self.version += 1
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)


class IOPubWatch:
    """A run's ear on its kernel's output channel: the messages of its current cell's request.

    :meth:`expect` says a new cell is about to be sent; :meth:`attach` names its request once the
    tab says it (messages that came before are kept for it); :attr:`heard` is that request as
    heard. :meth:`close` stops listening.
    """

    def __init__(self, stream: Any, session: Session, kernel: Any = None) -> None:
        self._stream = stream
        self._session = session
        self._kernel = kernel
        self._unnamed: dict[str, list[dict[str, Any]]] = {}
        self.heard: HeardCell | None = None
        self._closed = False
        stream.on_recv(self._receive)
        if kernel is not None:
            kernel.add_restart_callback(self._restarted, "restart")
            kernel.add_restart_callback(self._died, "dead")

    @classmethod
    def open(cls, kernel: Any) -> IOPubWatch | None:
        """Listen to a kernel of this server's kernel manager; None when its channels are not
        here (a kernel gateway's kernel has no connection file on this host)."""
        if not getattr(kernel, "connection_file", "") or not hasattr(kernel, "connect_iopub"):
            return None
        try:
            stream = kernel.connect_iopub()
        except Exception:  # a kernel shutting down, or a manager of another kind
            log.debug("jupyter-ci: cannot listen to the kernel's output channel", exc_info=True)
            return None
        session = Session(config=kernel.session.config, key=kernel.session.key)
        return cls(stream, session, kernel)

    def expect(self) -> None:
        """A new cell of the run is about to be sent: forget what was heard before."""
        if self.heard is not None:
            self.heard.end(None)
        self.heard = None
        self._unnamed.clear()

    def attach(self, msg_id: str) -> HeardCell:
        """The current cell's execute request is ``msg_id``: its messages so far, and later."""
        if self.heard is not None and self.heard.msg_id == msg_id:
            return self.heard
        heard = HeardCell(msg_id)
        for msg in self._unnamed.pop(msg_id, []):
            heard.take(msg)
        self._unnamed.clear()
        self.heard = heard
        return heard

    def end(self, fate: KernelFate | None) -> None:
        """The kernel went away (``fate`` says how): the current cell ends with it."""
        if self.heard is not None:
            self.heard.end(fate)

    def close(self) -> None:
        """Stop listening (the run is over)."""
        if self._closed:
            return
        self._closed = True
        self.end(None)
        self._unnamed.clear()
        if self._kernel is not None:
            for callback, event in ((self._restarted, "restart"), (self._died, "dead")):
                try:
                    self._kernel.remove_restart_callback(callback, event)
                except Exception:  # the kernel is gone with its restarter
                    log.debug("jupyter-ci: restart callback not removed", exc_info=True)
        try:
            self._stream.close()
        except Exception:
            log.debug("jupyter-ci: iopub stream not closed", exc_info=True)

    # --- internals --------------------------------------------------------------------------

    def _restarted(self) -> None:
        self.end(KernelFate.RESTARTED)

    def _died(self) -> None:
        self.end(KernelFate.DIED)

    def _receive(self, frames: list[Any]) -> None:
        try:
            _idents, fed = self._session.feed_identities(frames)
            msg = self._session.deserialize(fed, content=False)
        except Exception:  # not a message of this kernel's session (a bad signature)
            log.debug("jupyter-ci: an iopub message could not be read", exc_info=True)
            return
        parent = msg.get("parent_header") or {}
        if parent.get("msg_type") != "execute_request":
            return
        parent_id = str(parent.get("msg_id", ""))
        heard = self.heard
        if heard is not None:
            if parent_id == heard.msg_id:
                heard.take(_unpacked(self._session, msg))
            return
        kept = self._unnamed.get(parent_id)
        if kept is None:
            if len(self._unnamed) >= MAX_UNNAMED_REQUESTS:
                del self._unnamed[next(iter(self._unnamed))]
            kept = self._unnamed[parent_id] = []
        if len(kept) < MAX_UNNAMED_MESSAGES:
            kept.append(_unpacked(self._session, msg))


def _unpacked(session: Session, msg: dict[str, Any]) -> dict[str, Any]:
    """The message with its content read (it was deserialized without it)."""
    content = msg.get("content")
    if isinstance(content, (bytes, memoryview)):
        msg["content"] = session.unpack(bytes(content))
    return msg


#: Opens a watch on a kernel by id (None when it cannot be listened to).
WatchOpener = Callable[[], "IOPubWatch | None"]
