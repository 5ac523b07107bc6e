"""What the scripted model answers: replies, tool calls, faults and the script that holds them.

A :class:`Script` is a list of :class:`Reply` objects plus an optional default. For every chat
completion request the server asks the script for a reply:

1. Among the replies not used up yet, in list order, the first one that has a ``match`` pattern
   matching the request wins. The pattern is searched (``re.search`` with ``re.DOTALL``) in the
   text of the *latest message whose role is "user" or "tool"* (see :func:`latest_message_text`).
2. Otherwise the first reply not used up yet that has no pattern wins (ordered replies).
3. Otherwise the script's ``default`` reply is used; with no default the server answers
   HTTP 500 ``scripted server: no reply left for this request`` so a test fails loudly.

Each reply can be used ``times`` times (default once; ``None`` means without limit).

Scripts are built in Python (``Script([Reply.text("hi"), Reply.code("print(1)")])``) or loaded
from JSON (:meth:`Script.load`); :meth:`Script.to_dict` writes the same format.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast, get_args

FaultKind = Literal[
    "auth",
    "rate_limit",
    "server_error",
    "http_error",
    "cut_stream",
    "malformed_json",
    "empty_stream",
    "never_ending",
]
"""The kinds of failure a reply can simulate (see :class:`Fault`)."""

FAULT_KINDS: tuple[str, ...] = get_args(FaultKind)

DEFAULT_MODELS: tuple[str, ...] = ("scripted",)
"""Model names listed by ``GET /v1/models`` when a script names none."""


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
        """``"tool_calls"`` when the reply calls tools, else ``"stop"``."""
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


def message_text(message: Mapping[str, Any]) -> str:
    """The text of one chat message: its string content, or its text parts joined by newlines."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            str(part.get("text", ""))
            for part in content
            if isinstance(part, Mapping) and part.get("type", "text") == "text"
        ]
        return "\n".join(parts)
    return ""


def latest_message_text(messages: Sequence[Any]) -> str:
    """The text that ``match`` patterns are searched in: the content of the last message whose
    role is ``"user"`` or ``"tool"`` (``""`` when there is none)."""
    for message in reversed(messages):
        if isinstance(message, Mapping) and message.get("role") in ("user", "tool"):
            return message_text(message)
    return ""


class Script:
    """An ordered set of replies plus a default, consumed as requests arrive (thread-safe).

    ``models`` are the names listed by ``GET /v1/models``; requests may name any model.
    """

    def __init__(
        self,
        replies: Iterable[Reply | str] = (),
        *,
        default: Reply | str | None = None,
        models: Iterable[str] = DEFAULT_MODELS,
    ) -> None:
        self._lock = threading.Lock()
        self._replies: list[Reply] = [_as_reply(r) for r in replies]
        self._uses: list[int] = [0] * len(self._replies)
        self.default: Reply | None = None if default is None else _as_reply(default)
        self.models: tuple[str, ...] = tuple(models)
        if not self.models:
            raise ScriptError("a script needs at least one model name")

    def add(self, *replies: Reply | str) -> Script:
        """Append replies (strings become text replies); returns the script for chaining."""
        with self._lock:
            for reply in replies:
                self._replies.append(_as_reply(reply))
                self._uses.append(0)
        return self

    def take(self, messages: Sequence[Any]) -> Reply | None:
        """Pick (and use up) the reply for a request with these ``messages``.

        Returns ``None`` when no reply is left and there is no default.
        """
        text = latest_message_text(messages)
        with self._lock:
            chosen = self._find(lambda r: r.match is not None and r.matches(text))
            if chosen is None:
                chosen = self._find(lambda r: r.match is None)
            if chosen is None:
                return self.default
            self._uses[chosen] += 1
            return self._replies[chosen]

    def _find(self, accept: Callable[[Reply], bool]) -> int | None:
        for index, reply in enumerate(self._replies):
            left = reply.times is None or self._uses[index] < reply.times
            if left and accept(reply):
                return index
        return None

    @property
    def replies(self) -> list[Reply]:
        """All replies of the script, used up or not."""
        with self._lock:
            return list(self._replies)

    @property
    def remaining(self) -> list[Reply]:
        """The replies that can still answer a request (excluding the default)."""
        with self._lock:
            return [
                r
                for r, used in zip(self._replies, self._uses, strict=True)
                if r.times is None or used < r.times
            ]

    @property
    def exhausted(self) -> bool:
        """True when every limited reply has been used (unlimited ones never run out)."""
        return not self.remaining

    def copy(self) -> Script:
        """A fresh script with the same replies, none of them used yet."""
        return Script(self.replies, default=self.default, models=self.models)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | Sequence[Any]) -> Script:
        """Build a script from its JSON form: a list of replies, or an object
        ``{"replies": [...], "default": reply, "models": ["name", ...]}``."""
        if isinstance(data, Sequence) and not isinstance(data, str):
            return cls([Reply.from_dict(r) for r in data])
        if not isinstance(data, Mapping):
            raise ScriptError("a script must be a JSON list of replies or an object")
        _check_keys(data, {"replies", "default", "models"}, "script")
        raw_replies = data.get("replies", [])
        if not isinstance(raw_replies, list):
            raise ScriptError("'replies' must be a list")
        raw_models = data.get("models", list(DEFAULT_MODELS))
        if not isinstance(raw_models, list) or not all(isinstance(m, str) for m in raw_models):
            raise ScriptError("'models' must be a list of strings")
        raw_default = data.get("default")
        return cls(
            [Reply.from_dict(r) for r in raw_replies],
            default=None if raw_default is None else Reply.from_dict(raw_default),
            models=cast("list[str]", raw_models),
        )

    @classmethod
    def load(cls, path: str | Path) -> Script:
        """Read a script from a JSON file (see :meth:`from_dict` for the format)."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ScriptError(f"{path}: not valid JSON: {exc}") from exc
        return cls.from_dict(data)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of this script (use counts are not kept)."""
        out: dict[str, Any] = {
            "replies": [r.to_dict() for r in self.replies],
            "models": list(self.models),
        }
        if self.default is not None:
            out["default"] = self.default.to_dict()
        return out

    def save(self, path: str | Path) -> None:
        """Write the script as JSON to ``path`` (readable by :meth:`load` and the CLI)."""
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")

    def __repr__(self) -> str:
        return f"Script({len(self.remaining)}/{len(self.replies)} replies left)"


def _as_reply(reply: Reply | str) -> Reply:
    if isinstance(reply, Reply):
        return reply
    if isinstance(reply, str):
        return Reply.text(reply)
    raise ScriptError(f"not a reply: {reply!r}")


def _check_keys(data: Mapping[str, Any], known: set[str], what: str) -> None:
    unknown = set(data) - known
    if unknown:
        raise ScriptError(f"unknown {what} field(s) {sorted(unknown)}; known: {sorted(known)}")
