"""What the scripted server saw: one :class:`RecordedRequest` per HTTP request.

Credentials are never stored: the values of ``Authorization``, ``Proxy-Authorization``,
``api-key``, ``x-api-key`` and ``Cookie`` headers are dropped, and only
``authorization_present`` tells whether the client sent an ``Authorization`` (or ``api-key`` /
``x-api-key``) header.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SECRET_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "api-key", "x-api-key", "cookie", "set-cookie"}
)
"""Header names (lower case) whose values are never recorded."""

_AUTH_HEADERS = frozenset({"authorization", "api-key", "x-api-key"})


@dataclass
class RecordedRequest:
    """One request received by the scripted server, and how it was answered.

    ``body`` is the parsed JSON body (``None`` when absent or not JSON; ``body_text`` then holds
    the raw text). ``outcome`` says what was sent: ``"text"``, ``"tool_calls"``,
    ``"fault:<kind>"``, ``"no_reply"``, ``"models"``, ``"bad_request"`` or ``"not_found"``.
    ``client_closed_early`` becomes True when the client hung up before the reply was complete;
    :meth:`wait_closed` and :meth:`wait_finished` let a test wait for the end of the reply.
    """

    index: int
    time: float
    method: str
    path: str
    headers: dict[str, str]
    authorization_present: bool
    body: Any = None
    body_text: str | None = None
    stream: bool = False
    status: int | None = None
    outcome: str | None = None
    chunks_sent: int = 0
    client_closed_early: bool = False
    finished_at: float | None = None
    _closed: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)
    _finished: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)

    @property
    def messages(self) -> list[Any]:
        """The ``messages`` of a chat completion request (``[]`` otherwise)."""
        if isinstance(self.body, Mapping):
            messages = self.body.get("messages")
            if isinstance(messages, list):
                return messages
        return []

    @property
    def model(self) -> str | None:
        """The ``model`` the request asked for, if any."""
        if isinstance(self.body, Mapping):
            model = self.body.get("model")
            return model if isinstance(model, str) else None
        return None

    @property
    def finished(self) -> bool:
        """True once the server is done with this request (completed, failed or cut)."""
        return self._finished.is_set()

    def wait_finished(self, timeout: float) -> bool:
        """Wait until the server is done answering; False on timeout."""
        return self._finished.wait(timeout)

    def wait_closed(self, timeout: float) -> bool:
        """Wait until the client closed the connection before the reply ended; False on
        timeout (including when the reply simply completed)."""
        return self._closed.wait(timeout)

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable dict of this record (the JSONL line format)."""
        return {
            "index": self.index,
            "time": self.time,
            "method": self.method,
            "path": self.path,
            "headers": self.headers,
            "authorization_present": self.authorization_present,
            "body": self.body,
            "body_text": self.body_text,
            "stream": self.stream,
            "status": self.status,
            "outcome": self.outcome,
            "chunks_sent": self.chunks_sent,
            "client_closed_early": self.client_closed_early,
            "finished_at": self.finished_at,
        }


def scrub_headers(headers: Mapping[str, str]) -> tuple[dict[str, str], bool]:
    """Drop credential headers; return the rest and whether an auth header was present."""
    kept: dict[str, str] = {}
    present = False
    for name, value in headers.items():
        lower = name.lower()
        if lower in _AUTH_HEADERS:
            present = True
        if lower not in SECRET_HEADERS:
            kept[name] = value
    return kept, present


class RequestLog:
    """The thread-safe list of recorded requests, optionally mirrored to a JSON-lines file.

    A request is listed as soon as it arrives; its JSON line is appended when it finishes (so the
    line includes the status and ``client_closed_early``).
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = None if path is None else Path(path)
        self._records: list[RecordedRequest] = []
        self._counter = 0
        self._cond = threading.Condition()
        self._file_lock = threading.Lock()

    def start(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str],
        body: Any,
        body_text: str | None,
    ) -> RecordedRequest:
        """Record a new request (credentials scrubbed) and return its record."""
        kept, present = scrub_headers(headers)
        with self._cond:
            self._counter += 1
            record = RecordedRequest(
                index=self._counter,
                time=time.time(),
                method=method,
                path=path,
                headers=kept,
                authorization_present=present,
                body=body,
                body_text=body_text,
            )
            self._records.append(record)
            self._cond.notify_all()
        return record

    def mark_closed_early(self, record: RecordedRequest) -> None:
        """Note that the client hung up before ``record``'s reply was complete."""
        with self._cond:
            record.client_closed_early = True
            record._closed.set()
            self._cond.notify_all()

    def finish(self, record: RecordedRequest) -> None:
        """Note that the server is done with ``record`` and append it to the JSONL file."""
        with self._cond:
            if record.finished:
                return
            record.finished_at = time.time()
            record._finished.set()
            self._cond.notify_all()
        if self.path is not None:
            line = json.dumps(record.to_json(), default=repr)
            with self._file_lock, self.path.open("a", encoding="utf-8") as handle:
                handle.write(line + "\n")

    @property
    def records(self) -> list[RecordedRequest]:
        """A snapshot of all records, oldest first."""
        with self._cond:
            return list(self._records)

    def clear(self) -> None:
        """Forget the in-memory records (the JSONL file is left as it is)."""
        with self._cond:
            self._records.clear()

    def wait_for(self, count: int, timeout: float) -> list[RecordedRequest]:
        """Wait until at least ``count`` requests are recorded; raise TimeoutError otherwise."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._records) >= count, timeout):
                raise TimeoutError(
                    f"scripted server: {len(self._records)} request(s) recorded, "
                    f"expected {count} within {timeout}s"
                )
            return list(self._records)

    def wait_for_close(self, timeout: float) -> RecordedRequest:
        """Wait until some request's client closed early and return that record."""

        def closed() -> RecordedRequest | None:
            return next((r for r in self._records if r.client_closed_early), None)

        with self._cond:
            record = self._cond.wait_for(closed, timeout)
        if record is None:
            raise TimeoutError(f"scripted server: no client closed a reply early within {timeout}s")
        return record
