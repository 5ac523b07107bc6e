"""Fuzz the websocket message dispatcher of a real server with hypothesis.

Each example is one message (raw text, any JSON value, or an object shaped like the protocol's
requests with arbitrary field values) sent by a fresh connection, after a valid ``hello`` half
of the time. Whatever comes, the dispatcher must not raise, and must answer: a request with a
``request_id`` gets exactly one reply to it, anything else that is not a valid message gets an
error notice. The server still serves a well-formed tab afterwards.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jupyter_ci.server import hub
from jupyter_ci.server.app import JupyterCIServer

#: The request kinds the protocol knows, and a few it does not.
KINDS = [
    "hello",
    "subscribe",
    "expect_handoff",
    "start_run",
    "stop_run",
    "review",
    "preview",
    "replay",
    "",
    "unknown",
]
FIELDS = [
    "request_id",
    "client_id",
    "notebook_paths",
    "kernel_id",
    "notebook_path",
    "prompt",
    "run_id",
    "cell_id",
    "decision",
    "source",
    "after_seq",
    "code",
    "call_id",
    "ok",
    "result",
    "error",
    "progress",
    "options",
    "attachments",
    "client_secret",
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63),
    st.floats(allow_nan=False),
    st.text(max_size=40),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def request_like(draw: st.DrawFn) -> dict[str, Any]:
    """An object with the protocol's field names and arbitrary values."""
    message: dict[str, Any] = {"request": draw(st.sampled_from(KINDS))}
    for name in draw(st.lists(st.sampled_from(FIELDS), max_size=8, unique=True)):
        message[name] = draw(values)
    if draw(st.booleans()):
        message["request_id"] = draw(st.text(min_size=1, max_size=20))
    return message


@st.composite
def call_reply_like(draw: st.DrawFn) -> dict[str, Any]:
    """An object shaped like a call's reply (the bulk of real traffic)."""
    message: dict[str, Any] = {"call_id": draw(st.text(max_size=20))}
    for name in draw(st.lists(st.sampled_from(FIELDS), max_size=5, unique=True)):
        message[name] = draw(values)
    return message


raw_messages = st.one_of(
    st.text(max_size=200),
    st.binary(max_size=200),
    values.map(json.dumps),
    request_like().map(json.dumps),
    call_reply_like().map(json.dumps),
    st.integers(min_value=1, max_value=3000).map(lambda depth: "[" * depth + "]" * depth),
)


class Collecting:
    """A connection that keeps what the server sends it."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.user = f"user-{uuid.uuid4().hex}"
        self.closed: str | None = None

    def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    def close(self, reason: str) -> None:
        self.closed = reason


def _request_id(raw: str | bytes) -> str | None:
    try:
        message = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if isinstance(message, dict) and "request" in message:
        request_id = message.get("request_id")
        if isinstance(request_id, str) and request_id:
            return request_id
    return None


@settings(
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    deadline=None,
)
@given(raw=raw_messages, greet=st.booleans())
def test_every_message_is_answered_and_none_breaks_the_dispatcher(
    app: JupyterCIServer,
    jp_asyncio_loop: asyncio.AbstractEventLoop,
    monkeypatch: pytest.MonkeyPatch,
    raw: str | bytes,
    greet: bool,
) -> None:
    # Each example is a new tab of a new user: thousands in a minute (the limit is tested in
    # test_attacks.py).
    monkeypatch.setattr(hub, "NEW_CLIENTS_PER_MINUTE_ALL", 10**9)
    jp_asyncio_loop.run_until_complete(app.ensure_started())
    dispatcher = app.dispatcher
    connection = Collecting()
    if greet:
        hello = {
            "request": "hello",
            "request_id": "h",
            "client_id": f"fuzz-{uuid.uuid4().hex}",
            "protocol_version": 1,
            "notebook_paths": [],
        }
        jp_asyncio_loop.run_until_complete(dispatcher.handle(connection, json.dumps(hello)))
        assert [m.get("ok") for m in connection.sent] == [True]
        connection.sent.clear()
    # Must not raise, whatever the message.
    jp_asyncio_loop.run_until_complete(dispatcher.handle(connection, raw))
    request_id = _request_id(raw)
    if request_id is not None:
        replies = [m for m in connection.sent if m.get("reply_to") == request_id]
        assert len(replies) == 1, connection.sent
        if replies[0]["ok"] is False:
            assert replies[0]["error"]["code"]
            assert replies[0]["error"]["message"]
        return
    try:
        message = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        message = None
    if not isinstance(message, dict):
        # Not a JSON object: one error notice says so.
        assert [m["notice"] for m in connection.sent] == ["error"], connection.sent
        assert connection.sent[0]["error"]["code"] == "bad_message"
    for sent in connection.sent:
        json.dumps(sent)  # everything sent is JSON


def test_the_server_still_serves_a_tab_after_the_fuzzing(
    app: JupyterCIServer, jp_asyncio_loop: asyncio.AbstractEventLoop
) -> None:
    jp_asyncio_loop.run_until_complete(app.ensure_started())
    connection = Collecting()
    for raw in ("[" * 100_000 + "]" * 100_000, b"\xff\xfe", '{"request": "hello"}'):
        jp_asyncio_loop.run_until_complete(app.dispatcher.handle(connection, raw))
    assert [m["error"]["code"] for m in connection.sent] == ["bad_message"] * 3
    connection.sent.clear()
    hello = {
        "request": "hello",
        "request_id": "h",
        "client_id": "tab-after-the-fuzzing",
        "protocol_version": 1,
        "notebook_paths": [],
    }
    jp_asyncio_loop.run_until_complete(app.dispatcher.handle(connection, json.dumps(hello)))
    assert connection.sent[0]["reply_to"] == "h"
    assert connection.sent[0]["ok"] is True
