"""Run a model's calls on a background event loop, so they never stall the caller's loop.

litellm and the openai SDK do real CPU work on the event loop for every request: building and
validating the request (which grows with the conversation), parsing each streamed chunk, costing
the reply. Measured in the Jupyter server with 20 runs at once, that work stalled the server's
loop for hundreds of milliseconds at a time (every kernel websocket and HTTP request waits
meanwhile). :class:`ThreadedModel` moves each call to one shared background thread with its own
event loop; streamed text is handed back to the caller's loop, and cancelling the caller's task
(Stop) cancels the call there, which closes the HTTP stream. The loop is the process's one
:class:`~jupyter_ci.loop_thread.BackgroundLoop`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from ..loop_thread import BackgroundLoop
from .base import Model, ModelReply, TextCallback, WaitCallback


class ThreadedModel:
    """A :class:`~jupyter_ci.models.base.Model` whose calls run on a :class:`BackgroundLoop`."""

    def __init__(self, model: Model, background: BackgroundLoop | None = None) -> None:
        self.model = model
        self.name = model.name
        self._background = background

    @property
    def vision(self) -> bool:
        """As the wrapped model says."""
        return self.model.vision

    def count_tokens(self, text: str) -> int:
        """As the wrapped model counts (cheap: no tokenizer download, no I/O)."""
        return self.model.count_tokens(text)

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
        """The wrapped model's reply, computed on the background loop."""
        caller = asyncio.get_running_loop()
        background = self._background or BackgroundLoop.shared()

        def relay(text: str) -> None:
            if on_text is not None:
                caller.call_soon_threadsafe(on_text, text)

        def waiting(seconds: float, retry: int, retries: int) -> None:
            if on_wait is not None:
                caller.call_soon_threadsafe(on_wait, seconds, retry, retries)

        extra: dict[str, Any] = {"temperature": temperature} if temperature is not None else {}
        if seed is not None:
            extra["seed"] = seed
        call = self.model.complete(
            list(messages), tools=tools, on_text=relay, on_wait=waiting, **extra
        )
        future = asyncio.run_coroutine_threadsafe(call, background.loop)
        try:
            reply = await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            future.cancel()  # cancels the coroutine there: the stream is closed
            raise
        # Text relayed just before the reply came is delivered before the caller goes on.
        done = asyncio.Event()
        caller.call_soon(done.set)
        await done.wait()
        return reply
