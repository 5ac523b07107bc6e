"""The model's side of a run: ask it, stream its code into a new cell, and tidy a cell it did
not finish (ARCHITECTURE.md, "Cells the model did not finish").
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from ..errors import JupyterCIError
from ..models.base import ModelReply
from .extract import extract_code
from .model_calls import code_of
from .run_base import RunBase, _Finish, _NoStream
from .states import RunState
from .streaming import FenceStream, Piece, code_pieces

#: How long tidying a half-written cell may take after Stop or a cut stream (seconds).
UNFINISHED_TIMEOUT = 10.0


class Generating(RunBase):
    """The model-talking steps of :class:`~jupyter_ci.agent.loop.AgentRun`."""

    async def _generate(
        self,
        messages: list[dict[str, Any]],
        *,
        stream_after: str | _NoStream | None,
        temperature: float | None = None,
    ) -> tuple[ModelReply, str | None, str | None]:
        """Ask the model; stream code into a new cell inserted after ``stream_after``
        (``temperature``: this call's, instead of the model's own).

        Returns the reply, the code it holds (None for prose only) and the id of the cell it
        was streamed into (None when no cell was made). A streamed cell's complete code is
        announced (``cell_updated``, cause ``streamed``) once the reply is whole.
        """
        streaming = not isinstance(stream_after, _NoStream)
        fence = FenceStream()
        pending: list[str] = []
        cell_id: str | None = None
        wake = asyncio.Event()
        done = False

        def show(pieces: list[Piece]) -> None:
            for part, piece in pieces:
                self.emit(
                    "token", text=piece, cell_id=cell_id if part == "code" else None, part=part
                )

        def on_text(text: str) -> None:
            pieces = fence.feed(text)
            show(pieces)
            code = code_pieces(pieces)
            if code and streaming:
                pending.append(code)
                wake.set()

        async def pump() -> None:
            nonlocal cell_id
            while True:
                await wake.wait()
                wake.clear()
                if pending:
                    text = "".join(pending)
                    pending.clear()
                    if cell_id is None:
                        cell_id = await self._insert(stream_after_id, "", len(self.cells.ids) + 1)
                    await self.workspace.append_source(cell_id, text)
                if done and not pending:
                    return

        stream_after_id = stream_after if isinstance(stream_after, str) else None
        pump_task = asyncio.ensure_future(pump()) if streaming else None
        try:
            reply = await self.calls.call(messages, on_text, temperature)
        except (Exception, asyncio.CancelledError) as err:
            # Stopped, or the stream was cut: the cell must not stay half-written and runnable.
            ours = self._stopping or not isinstance(err, asyncio.CancelledError)
            if pump_task is not None and ours:
                # The pump ends by itself too: asyncio.wait_for (3.11) can swallow a cancel
                # that arrives as the awaited call completes.
                done = True
                pending.clear()
                wake.set()
                pump_task.cancel()
                await asyncio.gather(pump_task, return_exceptions=True)
                if cell_id is not None:
                    fence.finish()
                    await self._leave_unfinished(cell_id, fence.code)
            raise
        finally:
            done = True
            wake.set()
            if pump_task is not None:
                if self._stopping:
                    pump_task.cancel()
                await asyncio.gather(pump_task, return_exceptions=True)
        last = fence.finish()
        show(last)
        tail = code_pieces(last)
        if streaming and tail and cell_id is not None:
            await self.workspace.append_source(cell_id, tail)
        code = code_of(reply)
        if cell_id is not None:
            streamed = fence.code
            final = code if code is not None else streamed
            await self.cells.rewrite(cell_id, streamed, final, 1, cause="streamed")
            code = final
        if code is not None:
            # What the model said around its code is part of the conversation too.
            prose = _prose(reply.text)
            if prose:
                self.emit("message", role="assistant", text=prose)
        return reply, code, cell_id

    async def _leave_unfinished(self, cell_id: str, code: str) -> None:
        """The model stopped writing ``cell_id`` before its code was complete (Stop, a cut
        stream): delete the cell when no code came, else comment its code out under a note
        (``cell_updated``, cause ``stopped``), so that it never runs unedited, Run All included.

        Best effort: a notebook that cannot be reached any more (its tab went away) keeps the
        cell as it is, and the run still ends as it must.
        """
        if self._stopping and self._stop_reason == "disconnected":
            return
        with contextlib.suppress(JupyterCIError, asyncio.TimeoutError):
            await asyncio.wait_for(self.cells.leave_unfinished(cell_id, code), UNFINISHED_TIMEOUT)

    def _answered(self, reply: ModelReply, reason: str) -> _Finish:
        """The end of the run with the model's prose as its answer (sent as a message)."""
        answer = reply.text.strip()
        if answer:
            self.emit("message", role="assistant", text=answer)
        return _Finish(RunState.DONE, reason, answer=answer)


def _prose(text: str) -> str:
    """The prose of a reply around its code (the model's explanation of a fix)."""
    return extract_code(text).prose.strip() if text else ""
