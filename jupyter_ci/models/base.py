"""The model interface the agent loop calls: stream one reply, with usage and cost."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

#: Called with each piece of text as the model streams it.
TextCallback = Callable[[str], None]
#: Called when the model waits before trying again (a rate limit): with the seconds it waits,
#: the retry's number and the most retries; then with 0 seconds once the wait is over.
WaitCallback = Callable[[float, int, int], None]


@dataclass(frozen=True)
class TokenUsage:
    """Tokens of one or more model calls; ``cost`` in USD, None when the price is unknown.

    ``estimated`` is True when the provider reported no usage and the counts are ours.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = 0.0
    estimated: bool = False

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: TokenUsage) -> TokenUsage:
        cost = None if self.cost is None or other.cost is None else self.cost + other.cost
        return TokenUsage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            cost,
            self.estimated or other.estimated,
        )


@dataclass(frozen=True)
class ToolCallRequest:
    """A tool call in a model's reply: the function name and its raw JSON arguments."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ModelReply:
    """One reply from the model, as streamed.

    ``finish_reason`` is the provider's own (``"stop"``, ``"length"``, ``"tool_calls"``...), None
    when none came on the wire: then whether the reply is whole is read from the reply itself
    (:func:`jupyter_ci.agent.model_calls.reply_is_complete`).
    """

    text: str
    tool_calls: tuple[ToolCallRequest, ...] = ()
    usage: TokenUsage = field(default_factory=TokenUsage)
    finish_reason: str | None = None


class Model(Protocol):
    """A chat model. Implementations map every failure to :class:`jupyter_ci.errors.ModelError`.

    Cancelling the task awaiting :meth:`complete` must close the HTTP stream, so that a local
    server stops generating.
    """

    name: str

    @property
    def vision(self) -> bool:
        """Whether the model accepts image parts in messages."""
        ...

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        on_text: TextCallback | None = None,
        temperature: float | None = None,
        on_wait: WaitCallback | None = None,
        seed: int | None = None,
    ) -> ModelReply:
        """Stream a reply to ``messages``, calling ``on_text`` with each text delta and
        ``on_wait`` around a wait before a retry.

        ``temperature``: this call's sampling temperature instead of the model's own (a fix's,
        see ``fix_temperatures``); the loop passes it only when it has one. ``seed``: likewise
        this call's sampling seed (see ``seed``), sent only where the model's seed would be.
        """
        ...

    def count_tokens(self, text: str) -> int:
        """Tokens ``text`` costs in a prompt (an estimate where no tokenizer is at hand)."""
        ...
