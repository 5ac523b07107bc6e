"""The run's calls to the model: one at a time, within the run's token and cost caps.

:class:`ModelCalls` sends a run's messages, retries once with a smaller prompt when the model
says it did not fit, adds up the usage (announced after every call), enforces
``max_tokens_per_run`` before each call and while its reply streams (the streamed text counted as
it comes), a cap on one reply's size (:data:`MAX_REPLY_CHARS`, also while it streams; at either
cap the stream is closed) and ``max_cost_per_run`` after each call, and can be cancelled (Stop
closes the HTTP stream). :func:`code_of` is the code a reply holds.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from ..errors import BudgetExceeded, ModelError
from ..models.base import Model, ModelReply, TokenUsage, WaitCallback
from ..settings import Settings
from .extract import code_from_tool_arguments, extract_code
from .messages import Conversation
from .outcome import usage_dict

#: The most characters one reply may stream before it is cut (a cap of its own, besides
#: ``max_tokens_per_run``: a reply far past any cell's size is garbage or an attack).
MAX_REPLY_CHARS = 200_000

#: The tool through which a model that calls tools hands over a cell's code.
RUN_PYTHON_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "run_python",
        "description": "Insert a code cell with this Python code into the notebook and run it.",
        "parameters": {
            "type": "object",
            "properties": {"code": {"type": "string", "description": "The cell's code."}},
            "required": ["code"],
        },
    },
}


def code_of(reply: ModelReply) -> str | None:
    """The code a reply holds (a ``run_python`` call, else a fenced block); None for prose."""
    for call in reply.tool_calls:
        if call.name == "run_python":
            return code_from_tool_arguments(call.arguments)
    return extract_code(reply.text).code


#: The finish reasons with which a provider says it cut the reply short: at the tokens it may
#: reply with (``max_tokens``, a server's default) or at the end of its context window (a small
#: local model that rambles on fills llama.cpp's).
CUT_SHORT = frozenset({"length"})


def reply_is_complete(reply: ModelReply) -> bool:
    """Whether a reply came whole: the provider's own finish reason came on the wire, or, when
    none did or it says the reply was cut short (:data:`CUT_SHORT`), the reply shows its own end
    (its code block closed, or its tool calls' arguments complete JSON).

    A provider may end the body cleanly in the middle of a reply (no finish reason, no
    ``[DONE]``), or end it at its token limit: code cut short must never run, and prose cut
    short is not an answer.
    """
    if reply.finish_reason and reply.finish_reason not in CUT_SHORT:
        return True
    if reply.tool_calls:
        return all(_complete_json(call.arguments) for call in reply.tool_calls)
    found = extract_code(reply.text)
    return found.code is not None and not _OPEN_ENDED.intersection(found.repairs)


#: Repairs of a reply whose code may run on past what came: a fence never closed, or bare code.
_OPEN_ENDED = frozenset({"unclosed_fence", "bare_code"})


def _cancelling() -> bool:
    """Whether the running task itself is being cancelled (Python 3.11+ can tell)."""
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)
    return bool(cancelling is not None and cancelling())


def _complete_json(text: str) -> bool:
    try:
        json.loads(text, strict=False)
    except ValueError:
        return False
    return True


class ModelCalls:
    """One run's model calls. ``emit`` sends a run event; ``notice`` says something once."""

    def __init__(
        self,
        model: Model,
        settings: Settings,
        conversation: Conversation,
        *,
        use_tools: bool,
        emit: Callable[..., None],
        notice: Callable[[str], None],
        on_wait: WaitCallback | None = None,
    ) -> None:
        self.model = model
        #: Told when the model waits before a retry (the run's status line says so).
        self.on_wait = on_wait
        self.settings = settings
        self.conversation = conversation
        self.use_tools = use_tools
        self._emit = emit
        self._notice = notice
        #: What the run's calls used so far.
        self.usage = TokenUsage()
        #: Requests the run sent so far (each has its own seed, see :meth:`_next_seed`).
        self._sent = 0
        self._task: asyncio.Task[ModelReply] | None = None
        #: The cap the call in progress reached as its reply streamed (its stream is closed).
        self._capped: BudgetExceeded | None = None
        self._cost_notice_given = False

    def cancel(self) -> None:
        """Abort the call in progress, if any (its stream is closed)."""
        if self._task is not None and not self._task.done():
            self._task.cancel()

    async def call(
        self, messages: list[dict[str, Any]], on_text: Any, temperature: float | None = None
    ) -> ModelReply:
        """Send ``messages``; ``on_text`` gets the streamed text. Raises BudgetExceeded at a cap,
        ModelError for the provider's failures, CancelledError when cancelled (the tokens that
        streamed until then are counted, as an estimate). ``temperature``: this call's, instead
        of the model's own.

        A prompt the model says is too long is sent again shrunk; an empty reply is asked for
        once more, then explained from what is known (the prompt's size).
        """
        self._check_tokens(messages)
        self._check_cost()
        before = self.usage.total_tokens + self.conversation.prompt_tokens(messages)
        cap = self.settings.max_tokens_per_run
        chars = tokens = 0
        self._capped = None

        def heard(text: str) -> None:
            # The caps hold while the reply streams: at either, the stream is closed.
            nonlocal chars, tokens
            if self._capped is not None:
                return
            chars += len(text)
            tokens += self.model.count_tokens(text)
            if chars > MAX_REPLY_CHARS:
                self._capped = BudgetExceeded.reply_too_long(chars, MAX_REPLY_CHARS)
            elif cap and before + tokens > cap:
                self._capped = BudgetExceeded("max_tokens_per_run", before + tokens, cap)
            if self._capped is not None:
                self.cancel()
            elif on_text is not None:
                on_text(text)

        try:
            try:
                reply = await self._send(messages, heard, temperature)
            except ModelError as err:
                if err.kind == "context_overflow" and len(messages) >= 2:
                    self._notice(
                        "The prompt was too long for the model; retrying with a smaller one."
                    )
                    self.conversation.shrink(messages)
                elif err.kind != "empty_reply":
                    raise
                reply = await self._again(messages, heard, temperature)
        except (asyncio.CancelledError, BudgetExceeded):
            self._count_unfinished(messages, tokens)
            raise
        self.usage = self.usage + reply.usage
        self._emit("usage", usage=usage_dict(self.usage))
        self._check_tokens([])
        self._check_cost()
        return reply

    async def _send(
        self, messages: list[dict[str, Any]], on_text: Any, temperature: float | None = None
    ) -> ModelReply:
        tools = [RUN_PYTHON_TOOL] if self.use_tools else None
        extra: dict[str, Any] = {"temperature": temperature} if temperature is not None else {}
        seed = self._next_seed()
        if seed is not None:
            extra["seed"] = seed
        self._task = asyncio.ensure_future(
            self.model.complete(
                messages, tools=tools, on_text=on_text, on_wait=self.on_wait, **extra
            )
        )
        try:
            reply = await self._task
        except asyncio.CancelledError:
            if self._capped is not None and not _cancelling():
                raise self._capped from None
            raise
        finally:
            self._task = None
        if reply_is_complete(reply):
            return reply
        if reply.finish_reason in CUT_SHORT:
            raise ModelError(
                "bad_reply",
                "The model's reply reached its length limit before it was complete; none of "
                "it was run.",
                hint=(
                    "Try again, or ask for less at once. A local model that writes on and on "
                    "fills its context window: raise it (llama.cpp --ctx-size, Ollama num_ctx) "
                    "or pick a larger model."
                ),
            )
        raise ModelError("bad_reply", "The model's reply stream ended before it was complete.")

    def _next_seed(self) -> int | None:
        """The next request's seed: ``seed`` plus the requests the run sent before it (None
        without a seed). A run stays reproducible, and no two of its requests share a seed: with
        one seed for all, a prompt asked again at the same temperature (a fix that repeated the
        failed code asked once more, an empty reply) got the same reply from a server that
        samples by the seed (llama.cpp), so asking again changed nothing."""
        if self.settings.seed < 0:
            return None
        self._sent += 1
        return self.settings.seed + self._sent - 1

    async def _again(
        self, messages: list[dict[str, Any]], on_text: Any, temperature: float | None = None
    ) -> ModelReply:
        """The second and last try of a call; an empty reply now is explained."""
        try:
            return await self._send(messages, on_text, temperature)
        except ModelError as err:
            if err.kind != "empty_reply":
                raise
            raise self._empty(messages) from None

    def _empty(self, messages: list[dict[str, Any]]) -> ModelError:
        """An empty reply, twice: say what is known of why."""
        tokens = self.conversation.prompt_tokens(messages)
        budget = self.settings.context_tokens
        if tokens > budget:
            hint = (
                f"The prompt was about {tokens:,} tokens, more than context_tokens "
                f"({budget:,}) allows: lower it, or raise the model server's context window."
            )
        else:
            hint = (
                f"The prompt was about {tokens:,} tokens. If the model server's context window "
                "is smaller (llama.cpp --ctx-size, Ollama num_ctx), raise it or lower "
                f"context_tokens (now {budget:,}); otherwise the server failed: see its log."
            )
        return ModelError("empty_reply", "The model sent an empty reply, twice.", hint=hint)

    def _count_unfinished(self, messages: list[dict[str, Any]], tokens: int) -> None:
        """A call stopped midway (Stop, a cap) costs the ``tokens`` it streamed: counted as an
        estimate."""
        if not tokens:
            return
        spent = TokenUsage(self.conversation.prompt_tokens(messages), tokens, None, estimated=True)
        self.usage = self.usage + spent
        self._emit("usage", usage=usage_dict(self.usage))

    def _check_tokens(self, messages: list[dict[str, Any]]) -> None:
        """The token cap, counting ``messages`` as the next prompt (none after a call)."""
        cap = self.settings.max_tokens_per_run
        if not cap:
            return
        needed = self.usage.total_tokens + self.conversation.prompt_tokens(messages)
        if needed > cap:
            raise BudgetExceeded("max_tokens_per_run", needed, cap)

    def _check_cost(self) -> None:
        cap = self.settings.max_cost_per_run
        if not cap:
            return
        if self.usage.cost is None:
            if not self._cost_notice_given:
                self._cost_notice_given = True
                self._notice(
                    f"The price of {self.model.name} is unknown, so the cost cap cannot be "
                    "enforced; the token cap (max_tokens_per_run) applies."
                )
            return
        if self.usage.cost > cap:
            raise BudgetExceeded("max_cost_per_run", round(self.usage.cost, 6), cap)
