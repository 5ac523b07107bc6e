"""What the scripted model can answer: a :class:`Reply` (text, code, tool calls) or a
:class:`Fault` it simulates, each buildable in Python or from JSON.

:class:`~jupyter_ci.testing.script.Script` holds them and picks one for each request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

FaultKind = Literal[
    "auth",
    "rate_limit",
    "server_error",
    "http_error",
    "cut_stream",
    "length",
    "malformed_json",
    "empty_stream",
    "never_ending",
]
"""The kinds of failure a reply can simulate (see :class:`Fault`)."""

FAULT_KINDS: tuple[str, ...] = get_args(FaultKind)


class ScriptError(ValueError):
    """Raised when a script (Python objects or a JSON file) is malformed."""


@dataclass(frozen=True)
class Fault:
    """A failure the server simulates instead of (or in the middle of) a normal reply.

    Use the factory methods rather than the constructor:

    - :meth:`auth` -- HTTP 401, OpenAI-style error with code ``invalid_api_key``.
    - :meth:`rate_limit` -- HTTP 429 with a ``Retry-After`` header.
    - :meth:`server_error` -- HTTP 500.
    - :meth:`http_error` -- any other status with an OpenAI-style error body.
    - :meth:`cut_stream` -- some chunks, then the connection closes without ``[DONE]``.
    - :meth:`length` -- some chunks, then the provider's own end for a reply that reached its
      token limit: ``finish_reason`` ``"length"`` and ``[DONE]``.
    - :meth:`malformed_json` -- HTTP 200 with a body (or SSE chunk) that is not valid JSON.
    - :meth:`empty_stream` -- HTTP 200 and an empty body: no chunks, no ``[DONE]``.
    - :meth:`never_ending` -- a reply that keeps coming until the client hangs up.
    """

    kind: FaultKind
    status: int | None = None
    message: str | None = None
    code: str | None = None
    retry_after: float | None = None
    after_chunks: int = 2
    graceful: bool = False
    interval: float = 0.05
    comments: bool = False

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ScriptError(f"unknown fault kind {self.kind!r}; expected one of {FAULT_KINDS}")
        if self.after_chunks < 0:
            raise ScriptError("after_chunks must be >= 0")
        if self.interval <= 0:
            raise ScriptError("interval must be > 0")
        if self.kind == "http_error" and (self.status is None or not 400 <= self.status <= 599):
            raise ScriptError("an http_error fault needs a status between 400 and 599")

    @classmethod
    def auth(cls, message: str | None = None) -> Fault:
        """HTTP 401 with an OpenAI ``invalid_api_key`` error body."""
        return cls("auth", message=message)

    @classmethod
    def rate_limit(cls, retry_after: float = 1, message: str | None = None) -> Fault:
        """HTTP 429 with ``Retry-After: <retry_after>`` (seconds) and a rate-limit error body."""
        return cls("rate_limit", retry_after=retry_after, message=message)

    @classmethod
    def server_error(cls, message: str | None = None) -> Fault:
        """HTTP 500 with an OpenAI-style ``server_error`` body."""
        return cls("server_error", message=message)

    @classmethod
    def http_error(cls, status: int, message: str | None = None, code: str | None = None) -> Fault:
        """Any HTTP error status (400-599) with an OpenAI-style error body."""
        return cls("http_error", status=status, message=message, code=code)

    @classmethod
    def cut_stream(cls, after_chunks: int = 2, *, graceful: bool = False) -> Fault:
        """Send ``after_chunks`` SSE data chunks (the first is the role chunk), then stop.

        With ``graceful=False`` the socket is closed in the middle of the chunked body (the client
        sees an incomplete read); with ``graceful=True`` the HTTP body ends properly but without a
        ``finish_reason`` chunk and without ``data: [DONE]``. A non-streaming request gets half
        of its JSON body and then the socket closes.
        """
        return cls("cut_stream", after_chunks=after_chunks, graceful=graceful)

    @classmethod
    def length(cls, after_chunks: int = 2) -> Fault:
        """Send ``after_chunks`` chunks of the reply (the first is the role chunk), then end it
        as a provider ends a reply that reached the tokens it may have (``max_tokens``, or the
        end of llama.cpp's context window): ``finish_reason`` ``"length"``, usage, ``[DONE]``.
        A non-streaming request gets the same part of the reply, with that finish reason."""
        return cls("length", after_chunks=after_chunks)

    @classmethod
    def malformed_json(cls) -> Fault:
        """HTTP 200 whose JSON is broken: a truncated body, or one SSE chunk that is not JSON.

        When streaming, the role chunk is sent, then ``data: {"id": ...`` (broken), then the
        rest of the stream and ``data: [DONE]``.
        """
        return cls("malformed_json")

    @classmethod
    def empty_stream(cls) -> Fault:
        """HTTP 200 followed by an empty body: no chunks and no ``[DONE]``.

        This is what llama.cpp's server does when a prompt overflows its context window.
        """
        return cls("empty_stream")

    @classmethod
    def never_ending(cls, interval: float = 0.05, *, comments: bool = False) -> Fault:
        """A reply that never ends: content chunks every ``interval`` seconds until the client
        closes the connection (or the server stops).

        The chunks cycle through the reply's text (``"tick "`` when it has none). With
        ``comments=True`` only SSE comment keepalives (``: keepalive``) are sent. A non-streaming
        request gets its headers and then a space every ``interval`` seconds (JSON allows leading
        whitespace), forever. Note that such a trickle never trips httpx's (per-read) timeouts:
        only an overall deadline or closing the response ends it on the client side.
        """
        return cls("never_ending", interval=interval, comments=comments)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | str) -> Fault:
        """Build a fault from its JSON form: ``"auth"`` or ``{"kind": "rate_limit", ...}``."""
        if isinstance(data, str):
            data = {"kind": data}
        known = {
            "kind",
            "status",
            "message",
            "code",
            "retry_after",
            "after_chunks",
            "graceful",
            "interval",
            "comments",
        }
        _check_keys(data, known, "fault")
        if "kind" not in data:
            raise ScriptError("a fault needs a 'kind'")
        try:
            return cls(**dict(data))
        except TypeError as exc:
            raise ScriptError(f"bad fault {dict(data)!r}: {exc}") from exc

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of this fault (only the fields that differ from the defaults)."""
        out: dict[str, Any] = {"kind": self.kind}
        defaults = Fault("server_error")
        for name in (
            "status",
            "message",
            "code",
            "retry_after",
            "after_chunks",
            "graceful",
            "interval",
            "comments",
        ):
            value = getattr(self, name)
            if value != getattr(defaults, name):
                out[name] = value
        return out


@dataclass(frozen=True)
class ToolCall:
    """One function call the scripted model asks the client to make.

    ``arguments`` is a JSON-serialisable mapping, or a string sent verbatim (which lets a test
    send arguments that are not valid JSON). ``id`` defaults to ``call_<request>_<index>``.
    """

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = None

    @property
    def arguments_json(self) -> str:
        """The arguments as the string sent on the wire."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolCall:
        """Build a tool call from ``{"name": ..., "arguments": {...}, "id": ...}``."""
        _check_keys(data, {"name", "arguments", "id"}, "tool call")
        if not isinstance(data.get("name"), str):
            raise ScriptError("a tool call needs a string 'name'")
        return cls(name=data["name"], arguments=data.get("arguments", {}), id=data.get("id"))

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of this tool call."""
        out: dict[str, Any] = {"name": self.name, "arguments": self.arguments}
        if self.id is not None:
            out["id"] = self.id
        return out


@dataclass(frozen=True)
class Reply:
    """One scripted answer of the model.

    - ``content``: the assistant text (``None`` for a pure tool-call reply).
    - ``tool_calls``: function calls; their presence makes ``finish_reason`` ``"tool_calls"``.
    - ``match``: a regex; the reply is only used for requests whose latest user/tool message
      matches it (see the module docstring). ``None`` makes it an ordered reply.
    - ``times``: how many requests this reply answers (``None``: any number).
    - ``delay``: seconds to wait before each streamed token (non-streaming replies wait the
      total up front).
    - ``latency``: seconds to wait before sending anything at all.
    - ``fault``: a :class:`Fault` to simulate instead of a clean answer.
    """

    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    match: str | None = None
    times: int | None = 1
    delay: float = 0.0
    latency: float = 0.0
    fault: Fault | None = None

    def __post_init__(self) -> None:
        if self.times is not None and self.times < 1:
            raise ScriptError("times must be >= 1 (or None for no limit)")
        if self.delay < 0 or self.latency < 0:
            raise ScriptError("delay and latency must be >= 0")
        if self.match is not None:
            try:
                re.compile(self.match)
            except re.error as exc:
                raise ScriptError(f"bad match pattern {self.match!r}: {exc}") from exc
        if not isinstance(self.tool_calls, tuple):
            object.__setattr__(self, "tool_calls", tuple(self.tool_calls))

    @classmethod
    def text(
        cls,
        content: str,
        *,
        match: str | None = None,
        times: int | None = 1,
        delay: float = 0.0,
        latency: float = 0.0,
        fault: Fault | None = None,
    ) -> Reply:
        """A plain text answer."""
        return cls(
            content=content, match=match, times=times, delay=delay, latency=latency, fault=fault
        )

    @classmethod
    def code(
        cls,
        source: str,
        *,
        prose: str | None = None,
        language: str = "python",
        match: str | None = None,
        times: int | None = 1,
        delay: float = 0.0,
        latency: float = 0.0,
        fault: Fault | None = None,
    ) -> Reply:
        """An answer holding ``source`` in a fenced code block (```` ```python ````), optionally
        preceded by a line of prose."""
        content = f"```{language}\n{source.rstrip(chr(10))}\n```"
        if prose:
            content = f"{prose}\n\n{content}"
        return cls.text(
            content, match=match, times=times, delay=delay, latency=latency, fault=fault
        )

    @classmethod
    def tool_call(
        cls,
        name: str,
        arguments: Mapping[str, Any] | str | None = None,
        *,
        id: str | None = None,
        content: str | None = None,
        match: str | None = None,
        times: int | None = 1,
        delay: float = 0.0,
        latency: float = 0.0,
        fault: Fault | None = None,
    ) -> Reply:
        """An answer that calls one function ``name`` with ``arguments``."""
        call = ToolCall(name, {} if arguments is None else arguments, id)
        return cls.calls(
            [call],
            content=content,
            match=match,
            times=times,
            delay=delay,
            latency=latency,
            fault=fault,
        )

    @classmethod
    def calls(
        cls,
        calls: Iterable[ToolCall],
        *,
        content: str | None = None,
        match: str | None = None,
        times: int | None = 1,
        delay: float = 0.0,
        latency: float = 0.0,
        fault: Fault | None = None,
    ) -> Reply:
        """An answer that calls several functions (in parallel, as OpenAI models may)."""
        return cls(
            content=content,
            tool_calls=tuple(calls),
            match=match,
            times=times,
            delay=delay,
            latency=latency,
            fault=fault,
        )

    @classmethod
    def fail(
        cls,
        fault: Fault,
        *,
        content: str | None = None,
        match: str | None = None,
        times: int | None = 1,
        delay: float = 0.0,
        latency: float = 0.0,
    ) -> Reply:
        """A reply that simulates ``fault`` (``content`` feeds the chunks sent before a cut)."""
        return cls(
            content=content, match=match, times=times, delay=delay, latency=latency, fault=fault
        )

    def matches(self, text: str) -> bool:
        """Whether this reply's ``match`` pattern is found in ``text`` (False without one)."""
        return self.match is not None and re.search(self.match, text, re.DOTALL) is not None

    @property
    def finish_reason(self) -> str:
        """``"length"`` for a reply cut at its token limit (:meth:`Fault.length`), else
        ``"tool_calls"`` when the reply calls tools, else ``"stop"``."""
        if self.fault is not None and self.fault.kind == "length":
            return "length"
        return "tool_calls" if self.tool_calls else "stop"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | str) -> Reply:
        """Build a reply from its JSON form.

        A bare string is a text reply. A mapping may hold ``content`` or ``code`` (wrapped in a
        python fence, with optional ``prose``), ``tool_calls`` (list of ``{"name", "arguments",
        "id"}``), ``match``, ``times``, ``delay``, ``latency`` and ``fault`` (a kind name or a
        mapping, see :meth:`Fault.from_dict`).
        """
        if isinstance(data, str):
            return cls.text(data)
        if not isinstance(data, Mapping):
            raise ScriptError(f"a reply must be a string or an object, not {data!r}")
        known = {
            "content",
            "code",
            "prose",
            "language",
            "tool_calls",
            "match",
            "times",
            "delay",
            "latency",
            "fault",
        }
        _check_keys(data, known, "reply")
        if "code" in data and "content" in data:
            raise ScriptError("a reply has either 'content' or 'code', not both")
        content = data.get("content")
        if "code" in data:
            content = cls.code(
                str(data["code"]), prose=data.get("prose"), language=data.get("language", "python")
            ).content
        if content is not None and not isinstance(content, str):
            raise ScriptError("'content' must be a string")
        raw_calls = data.get("tool_calls", [])
        if not isinstance(raw_calls, list):
            raise ScriptError("'tool_calls' must be a list")
        raw_fault = data.get("fault")
        try:
            return cls(
                content=content,
                tool_calls=tuple(ToolCall.from_dict(c) for c in raw_calls),
                match=data.get("match"),
                times=data.get("times", 1),
                delay=float(data.get("delay", 0.0)),
                latency=float(data.get("latency", 0.0)),
                fault=None if raw_fault is None else Fault.from_dict(raw_fault),
            )
        except (TypeError, ValueError) as exc:
            if isinstance(exc, ScriptError):
                raise
            raise ScriptError(f"bad reply {dict(data)!r}: {exc}") from exc

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of this reply (accepted by :meth:`from_dict`)."""
        out: dict[str, Any] = {}
        if self.content is not None:
            out["content"] = self.content
        if self.tool_calls:
            out["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        if self.match is not None:
            out["match"] = self.match
        if self.times != 1:
            out["times"] = self.times
        if self.delay:
            out["delay"] = self.delay
        if self.latency:
            out["latency"] = self.latency
        if self.fault is not None:
            out["fault"] = self.fault.to_dict()
        return out


def _check_keys(data: Mapping[str, Any], known: set[str], what: str) -> None:
    unknown = set(data) - known
    if unknown:
        raise ScriptError(f"unknown {what} field(s) {sorted(unknown)}; known: {sorted(known)}")
