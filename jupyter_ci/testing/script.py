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

The replies themselves (:class:`Reply`, :class:`ToolCall`, :class:`Fault`) are in
:mod:`jupyter_ci.testing.replies`; this module re-exports them.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from .replies import FAULT_KINDS, Fault, FaultKind, Reply, ScriptError, ToolCall, _check_keys

DEFAULT_MODELS: tuple[str, ...] = ("scripted",)
"""Model names listed by ``GET /v1/models`` when a script names none."""


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


__all__ = [
    "DEFAULT_MODELS",
    "FAULT_KINDS",
    "Fault",
    "FaultKind",
    "Reply",
    "Script",
    "ScriptError",
    "ToolCall",
    "latest_message_text",
    "message_text",
]
