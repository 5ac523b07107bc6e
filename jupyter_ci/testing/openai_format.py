"""The OpenAI wire shapes the scripted server speaks: completions, stream chunks, errors, models.

Token counting is a deterministic estimate, not a real tokenizer: a *token* is a run of
non-space characters together with the whitespace that follows it (:func:`split_tokens`), so
``"Hello big world"`` is 3 tokens. Streamed content is sent one such token per chunk, and
``usage.completion_tokens`` counts exactly those pieces (content plus tool-call argument
fragments). ``usage.prompt_tokens`` is the token count of every message's text and tool-call
arguments plus 3 per message.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from .script import Reply, ToolCall, message_text

ARGUMENT_FRAGMENT_CHARS = 8
"""Streamed tool-call arguments are sent in fragments of at most this many characters."""

PER_MESSAGE_TOKENS = 3
"""Fixed prompt-token overhead added for each message."""

_TOKEN_RE = re.compile(r"\S+\s*|\s+")


def split_tokens(text: str) -> list[str]:
    """Cut ``text`` into the pieces streamed one per chunk; ``"".join`` gives ``text`` back."""
    return _TOKEN_RE.findall(text)


def count_tokens(text: str) -> int:
    """The estimated token count of ``text`` (the number of :func:`split_tokens` pieces)."""
    return len(split_tokens(text))


def argument_fragments(arguments: str) -> list[str]:
    """Cut a tool call's argument string into the fragments streamed one per chunk."""
    step = ARGUMENT_FRAGMENT_CHARS
    return [arguments[i : i + step] for i in range(0, len(arguments), step)] or [""]


def prompt_tokens(messages: Sequence[Any]) -> int:
    """The estimated prompt size of a request's ``messages``."""
    total = 0
    for message in messages:
        if not isinstance(message, Mapping):
            continue
        total += PER_MESSAGE_TOKENS + count_tokens(message_text(message))
        for call in message.get("tool_calls") or []:
            if isinstance(call, Mapping):
                function = call.get("function") or {}
                total += count_tokens(str(function.get("arguments", "")))
    return total


def completion_tokens(reply: Reply) -> int:
    """The estimated size of ``reply`` (matches the number of content/argument chunks)."""
    total = count_tokens(reply.content or "")
    for call in reply.tool_calls:
        total += len(argument_fragments(call.arguments_json))
    return total


def usage(messages: Sequence[Any], reply: Reply) -> dict[str, int]:
    """An OpenAI ``usage`` object for answering ``messages`` with ``reply``."""
    prompt = prompt_tokens(messages)
    completion = completion_tokens(reply)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def tool_call_id(call: ToolCall, request_index: int, position: int) -> str:
    """The id sent for a tool call: its own, or ``call_<request>_<position>``."""
    return call.id or f"call_{request_index}_{position}"


class CompletionShapes:
    """Builds the JSON objects of one completion (same id/model/created in every chunk)."""

    def __init__(self, request_index: int, model: str, messages: Sequence[Any], reply: Reply):
        self.request_index = request_index
        self.id = f"chatcmpl-scripted-{request_index}"
        self.model = model
        self.created = int(time.time())
        self.messages = messages
        self.reply = reply

    def completion(self) -> dict[str, Any]:
        """The non-streaming ``chat.completion`` object, with ``usage``."""
        message: dict[str, Any] = {
            "role": "assistant",
            "content": self.reply.content,
            "refusal": None,
        }
        if self.reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": tool_call_id(call, self.request_index, i),
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments_json},
                }
                for i, call in enumerate(self.reply.tool_calls)
            ]
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": self.reply.finish_reason,
                }
            ],
            "usage": usage(self.messages, self.reply),
            "system_fingerprint": None,
        }

    def chunk(
        self,
        delta: dict[str, Any] | None,
        finish_reason: str | None = None,
        *,
        include_usage: bool = False,
    ) -> dict[str, Any]:
        """One ``chat.completion.chunk``; ``delta=None`` makes the final usage-only chunk."""
        out: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
        }
        if delta is None:
            out["choices"] = []
            out["usage"] = usage(self.messages, self.reply)
            return out
        out["choices"] = [
            {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        ]
        if include_usage:
            out["usage"] = None
        return out

    def role_chunk(self, *, include_usage: bool = False) -> dict[str, Any]:
        """The first chunk of a stream: the assistant role and empty content."""
        return self.chunk({"role": "assistant", "content": ""}, include_usage=include_usage)

    def body_chunks(self, *, include_usage: bool = False) -> Iterator[dict[str, Any]]:
        """The content and tool-call chunks (one per token / argument fragment), in order."""
        for piece in split_tokens(self.reply.content or ""):
            yield self.chunk({"content": piece}, include_usage=include_usage)
        for i, call in enumerate(self.reply.tool_calls):
            for n, fragment in enumerate(argument_fragments(call.arguments_json)):
                entry: dict[str, Any] = {"index": i, "function": {"arguments": fragment}}
                if n == 0:
                    entry["id"] = tool_call_id(call, self.request_index, i)
                    entry["type"] = "function"
                    entry["function"] = {"name": call.name, "arguments": fragment}
                yield self.chunk({"tool_calls": [entry]}, include_usage=include_usage)

    def finish_chunk(self, *, include_usage: bool = False) -> dict[str, Any]:
        """The chunk carrying ``finish_reason`` (empty delta)."""
        return self.chunk({}, self.reply.finish_reason, include_usage=include_usage)

    def usage_chunk(self) -> dict[str, Any]:
        """The last chunk when ``stream_options.include_usage`` is true: no choices, usage."""
        return self.chunk(None)


def error_body(
    message: str, error_type: str, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    """An OpenAI-style error object: ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": error_type, "param": param, "code": code}}


def models_body(models: Sequence[str]) -> dict[str, Any]:
    """The ``GET /v1/models`` list object."""
    return {"object": "list", "data": [model_object(name) for name in models]}


def model_object(name: str) -> dict[str, Any]:
    """One model entry of ``GET /v1/models``."""
    return {"id": name, "object": "model", "created": 0, "owned_by": "jupyter-ci-scripted"}


def sse(data: Mapping[str, Any] | str) -> bytes:
    """One server-sent event ``data: ...\\n\\n`` (a mapping is JSON-encoded)."""
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return f"data: {text}\n\n".encode()
