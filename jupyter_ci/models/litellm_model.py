"""The :class:`~jupyter_ci.models.base.Model` for any provider, through litellm.

litellm is imported on first use, in a worker thread (its import takes seconds and must not block
an event loop), with ``LITELLM_LOCAL_MODEL_COST_MAP`` set first so nothing is fetched from the
network. Key, ``api_base`` and parameters are passed per call: other extensions in the same
process share the litellm module, so its globals are left alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import math
import os
import re
import sys
import threading
from collections.abc import Sequence
from typing import Any

from ..errors import ConfigError, JupyterCIError, ModelError, error_text, exception_text
from ..model_names import MODEL_HINT, model_problem
from ..settings import Settings
from .base import ModelReply, TextCallback, TokenUsage, ToolCallRequest, WaitCallback
from .scrub import scrub

_import_lock = threading.Lock()
#: Sent to a custom api_base when no key is configured (local servers accept anything).
NO_KEY = "no-key"
#: Rate-limit retries: how many, and the longest wait honoured from a Retry-After.
MAX_RATE_LIMIT_RETRIES = 2
MAX_RETRY_WAIT = 20.0


#: Set by long-lived processes that import litellm once and serve many requests (the Jupyter
#: server): after the import, move every object alive to the garbage collector's permanent
#: generation. litellm brings millions of objects; without this, each full collection walks them
#: all and stalls the process (measured: 0.35-0.7 s pauses every few seconds in a busy server).
#: Not for kernels: it would also pin whatever garbage the user's code holds at that moment.
FREEZE_AFTER_IMPORT = False


def _load_litellm() -> Any:
    with _import_lock:
        already = "litellm" in sys.modules
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        try:
            module: Any = importlib.import_module("litellm")
        except Exception as error:
            # A failed import leaves litellm's submodules behind, and a second try would then
            # get a litellm without them ("no attribute 'exceptions'"): forget them all.
            for name in [n for n in sys.modules if n == "litellm" or n.startswith("litellm.")]:
                del sys.modules[name]
            raise ConfigError(
                f"The model library litellm could not be imported: {exception_text(error)}",
                hint="Check the server's Python environment (pip install -U litellm); the next "
                "request tries again.",
            ) from error
        module.suppress_debug_info = True
        if FREEZE_AFTER_IMPORT and not already:
            gc.collect()
            gc.freeze()
        return module


async def import_litellm() -> Any:
    """The litellm module, imported once, off the event loop."""
    return await asyncio.to_thread(_load_litellm)


async def close_clients() -> None:
    """Close the HTTP clients litellm keeps for reuse (its aiohttp sessions), on the event loop
    that made them. A command that ends its loop without this leaves them to the garbage
    collector, which prints "Unclosed client session" at exit: litellm's own exit hook closes
    them on a new loop, too late for connections a server kept alive. Nothing when litellm was
    never imported; never raises."""
    litellm = sys.modules.get("litellm")
    close = getattr(litellm, "close_litellm_async_clients", None)
    if close is None:
        return
    with contextlib.suppress(Exception):
        await close()


def estimate_tokens(text: str) -> int:
    """A tokenizer-free estimate: about four characters a token."""
    return math.ceil(len(text) / 4)


class LiteLLMModel:
    """A chat model reached through litellm (any provider, any OpenAI-compatible endpoint)."""

    def __init__(
        self,
        settings: Settings,
        *,
        api_key: str | None = None,
        request_timeout: float = 600.0,
        vision: bool | None = None,
    ) -> None:
        self.name = settings.model
        self.api_base = settings.api_base or None
        if api_key is None:
            api_key = os.environ.get(settings.api_key_env) or None
        if api_key is None and self.api_base:
            # A custom endpoint gets only the key named for it (api_key_env), never a provider's
            # variable such as OPENAI_API_KEY; local servers need none, but the client wants one.
            api_key = NO_KEY
        self._api_key = api_key
        self.request_timeout = request_timeout
        if vision is None and settings.vision != "auto":
            vision = settings.vision == "on"
        self._vision = vision
        self._litellm: Any = None
        #: None: the provider's default.
        self.temperature = settings.temperature if settings.temperature >= 0 else None
        #: None: no seed sent.
        self.seed = settings.seed if settings.seed >= 0 else None
        #: Whether the provider takes a seed: None until the first request asks litellm.
        self._seed_taken: bool | None = None

    @classmethod
    def from_settings(cls, settings: Settings, *, where: str = "kernel") -> LiteLLMModel:
        """The model the settings name, with the key from ``settings.api_key_env`` if set.

        ``where``: who calls it, for the no-model hint (see ``ConfigError.no_model``).
        """
        if not settings.model:
            raise ConfigError.no_model(where)
        return cls(settings)

    @property
    def vision(self) -> bool:
        """Whether images can go to the model: as given (or set by the ``vision`` option),
        else litellm's model table once loaded.

        Before the first call litellm is not imported yet, and the answer is False.
        """
        if self._vision is None and self._litellm is not None:
            try:
                self._vision = bool(self._litellm.supports_vision(model=self.name))
            except Exception:
                self._vision = False
        return bool(self._vision)

    def count_tokens(self, text: str) -> int:
        """An estimate (exact counting needs a tokenizer that may not be available offline)."""
        return estimate_tokens(text)

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
        """Stream one reply; before any text arrived, rate limits are retried (bounded, after
        the provider's Retry-After, said to ``on_wait``) and a connection the server reset is
        retried once. ``temperature`` and ``seed`` override the settings' for this call (a seed
        only where the settings have one)."""
        litellm = self._litellm or await import_litellm()
        self._litellm = litellm
        streamed = False

        def relay(text: str) -> None:
            nonlocal streamed
            streamed = True
            if on_text is not None:
                on_text(text)

        rate_limited = 0
        reset_retried = False
        while True:
            try:
                return await self._stream(litellm, messages, tools, relay, temperature, seed)
            except ModelError as err:
                if streamed:
                    raise
                if isinstance(err, _ConnectionReset) and not reset_retried:
                    # A kept-alive connection the server had closed (llama.cpp's server does
                    # so after a request it aborted): nothing was sent or received.
                    reset_retried = True
                    continue
                if err.kind != "rate_limit" or rate_limited >= MAX_RATE_LIMIT_RETRIES:
                    raise
                rate_limited += 1
                wait = min(err.retry_after or 1.0, MAX_RETRY_WAIT)
                if on_wait is not None:
                    on_wait(wait, rate_limited, MAX_RATE_LIMIT_RETRIES)
                await asyncio.sleep(wait)
                if on_wait is not None:
                    on_wait(0.0, rate_limited, MAX_RATE_LIMIT_RETRIES)

    async def _stream(
        self,
        litellm: Any,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]] | None,
        on_text: TextCallback | None,
        temperature: float | None = None,
        seed: int | None = None,
    ) -> ModelReply:
        kwargs: dict[str, Any] = {
            "model": self.name,
            "messages": list(messages),
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_retries": 0,
            "timeout": self.request_timeout,
        }
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if temperature is None:
            temperature = self.temperature
        if temperature is not None:
            kwargs["temperature"] = temperature
        if self.seed is not None:
            if self._seed_taken is None:  # asked once per model: the answer cannot change
                self._seed_taken = self._takes_seed(litellm)
            if self._seed_taken:
                kwargs["seed"] = self.seed if seed is None else seed
        if self._api_key:
            kwargs["api_key"] = self._api_key
        if tools:
            kwargs["tools"] = list(tools)
            # Without this, litellm 1.106 imports its MCP server module for any tools= call and
            # fails unless the mcp package (not a dependency of ours) is installed.
            # tests/test_models.py checks tool calls still work, so a litellm release that drops
            # it is caught.
            kwargs["_skip_mcp_handler"] = True
        text_parts: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        usage: Any = None
        finish_reason: str | None = None
        stream: Any = None
        try:
            stream = await litellm.acompletion(**kwargs)
            async for chunk in stream:
                usage = getattr(chunk, "usage", None) or usage
                for choice in chunk.choices or []:
                    finish_reason = choice.finish_reason or finish_reason
                    delta = choice.delta
                    if delta is None:
                        continue
                    if delta.content:
                        text_parts.append(delta.content)
                        if on_text is not None:
                            on_text(delta.content)
                    for call in getattr(delta, "tool_calls", None) or []:
                        _merge_tool_call(calls, call)
        except asyncio.CancelledError:
            raise
        except JupyterCIError:
            raise
        except Exception as exc:
            raise self._map_error(litellm, exc) from None
        finally:
            if stream is not None and hasattr(stream, "aclose"):
                # Closing the HTTP stream on Stop (cancellation) makes a local server stop too.
                await asyncio.shield(_close_quietly(stream))
        text = "".join(text_parts)
        tool_calls = tuple(
            ToolCallRequest(c.get("id", ""), c.get("name", ""), c.get("arguments", ""))
            for _, c in sorted(calls.items())
        )
        if not text.strip() and not tool_calls:
            # Why is not known here: the caller retries once, then says what it knows.
            raise ModelError("empty_reply", "The model sent an empty reply.")
        return ModelReply(
            text,
            tool_calls,
            self._usage(litellm, usage, messages, text),
            _provider_finish_reason(stream, finish_reason),
        )

    def _takes_seed(self, litellm: Any) -> bool:
        """Whether litellm says this model's provider takes a seed (one that does not would
        fail the request for it)."""
        try:
            model, provider, _, _ = litellm.get_llm_provider(self.name, api_base=self.api_base)
            params = litellm.get_supported_openai_params(model=model, custom_llm_provider=provider)
        except Exception:  # litellm does not know the provider: send no seed
            return False
        return "seed" in (params or ())

    def _usage(
        self, litellm: Any, usage: Any, messages: Sequence[dict[str, Any]], text: str
    ) -> TokenUsage:
        if usage is not None and (usage.prompt_tokens or usage.completion_tokens):
            prompt, completion, estimated = usage.prompt_tokens, usage.completion_tokens, False
        else:
            prompt = sum(estimate_tokens(str(m.get("content", ""))) for m in messages)
            completion, estimated = estimate_tokens(text), True
        try:
            prompt_cost, completion_cost = litellm.cost_per_token(
                model=self.name, prompt_tokens=prompt, completion_tokens=completion
            )
            cost: float | None = float(prompt_cost + completion_cost)
        except Exception:
            cost = None  # unknown price: not zero
        return TokenUsage(int(prompt or 0), int(completion or 0), cost, estimated)

    def _map_error(self, litellm: Any, exc: Exception) -> JupyterCIError:
        message = provider_text(scrub(exception_text(exc), [self._api_key]))
        if "LLM Provider NOT provided" in message:
            return ConfigError(
                model_problem(self.name) or f"The model {self.name!r} names no provider.",
                hint=MODEL_HINT,
                option="model",
            )
        if "No module named 'mcp'" in message:
            return ConfigError(
                "Tool calling through litellm needs the 'mcp' package, which is not installed.",
                hint="Install it (pip install mcp), or set tool_calling to off.",
                option="tool_calling",
            )
        status = getattr(exc, "status_code", None)
        exceptions = litellm.exceptions
        mid_stream = getattr(exceptions, "MidStreamFallbackError", None)
        if mid_stream is not None and isinstance(exc, mid_stream):
            # The stream broke off or carried garbage after it had started.
            return ModelError("bad_reply", f"The model's reply stream broke off: {message}")
        kind = "provider"
        retry_after: float | None = None
        if isinstance(exc, exceptions.ContextWindowExceededError):
            kind = "context_overflow"
        elif (
            isinstance(exc, exceptions.AuthenticationError | exceptions.PermissionDeniedError)
            or "Missing credentials" in message
        ):
            kind = "auth"
        elif isinstance(exc, exceptions.RateLimitError):
            kind = "rate_limit"
            retry_after = _retry_after(exc)
        elif isinstance(exc, exceptions.NotFoundError):
            message = f"Model {self.name!r} was not found by the provider. {message}"
        elif isinstance(exc, exceptions.Timeout):
            kind = "connection"
            message = f"The model did not answer in time. {message}"
        elif isinstance(exc, exceptions.APIConnectionError) or "Connection error" in message:
            if _was_reset(exc):
                return _ConnectionReset("connection", message.strip(), status=status)
            kind = "connection"
        elif isinstance(exc, exceptions.BadRequestError) and "context" in message.lower():
            kind = "context_overflow"
        return ModelError(kind, message.strip(), status=status, retry_after=retry_after)


def provider_text(message: str) -> str:
    """A provider's error message as the user reads it: each exception name once, without
    litellm's wrapper names ("OpenAIException - ")."""
    return re.sub(r"\b\w+Exception - ", "", error_text(message)).strip()


class _ConnectionReset(ModelError):
    """The connection was reset or closed by the server before any reply (retried once)."""


#: Exceptions (by class name, across the httpx and aiohttp transports) of a dropped connection.
_RESET_ERRORS = frozenset(
    {"ConnectionResetError", "BrokenPipeError", "ServerDisconnectedError", "RemoteProtocolError"}
)


def _was_reset(exc: BaseException) -> bool:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if type(current).__name__ in _RESET_ERRORS:
            return True
        current = current.__cause__ or current.__context__
    return False


def _provider_finish_reason(stream: Any, seen: str | None) -> str | None:
    """The finish reason the provider itself sent, None when none came on the wire.

    When a body ends cleanly without one, litellm's stream wrapper invents ``"stop"`` (the
    ``seen`` of the last chunk); it keeps what the provider sent in ``received_finish_reason``
    (and ``intermittent_finish_reason``). ``tests/test_models.py`` checks both readings, so a
    litellm release that renames them is caught.
    """
    if seen is None:
        return None
    own = getattr(stream, "received_finish_reason", None)
    own = own or getattr(stream, "intermittent_finish_reason", None)
    return own if isinstance(own, str) and own else None


def _merge_tool_call(calls: dict[int, dict[str, str]], delta: Any) -> None:
    index = getattr(delta, "index", None) or 0
    slot = calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
    if getattr(delta, "id", None):
        slot["id"] = delta.id
    function = getattr(delta, "function", None)
    if function is not None:
        if getattr(function, "name", None):
            slot["name"] = function.name
        if getattr(function, "arguments", None):
            slot["arguments"] += function.arguments


def _retry_after(exc: Exception) -> float | None:
    # litellm keeps the provider's headers here; the wrapped response's headers are empty.
    headers = getattr(exc, "litellm_response_headers", None) or {}
    if not headers:
        headers = getattr(getattr(exc, "response", None), "headers", None) or {}
    value = headers.get("retry-after") if hasattr(headers, "get") else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


async def _close_quietly(stream: Any) -> None:
    # A stream that fails to close is already closed for our purposes.
    with contextlib.suppress(Exception):
        await stream.aclose()
