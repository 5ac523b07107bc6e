"""Turning one execute request's kernel messages into nbformat outputs and a status.

No I/O here: :class:`ExecutionCollector` is fed plain message dicts (iopub and shell) and keeps
what a notebook frontend would show, so unit tests can drive it with canned messages. The
kernel workspace does the reading, the waiting and the interrupting.

How messages become outputs (as JupyterLab shows them):

- only messages whose ``parent_header.msg_id`` is our request's are used;
- consecutive stream outputs of the same name merge into one; carriage returns and backspaces
  overwrite what they would on screen (a progress bar ends as its last state);
- ``clear_output`` empties the outputs, or with ``wait`` does so just before the next output;
- a ``display_data``/``execute_result`` carrying a ``display_id`` is registered in a
  :class:`DisplayRegistry` shared by the notebook's cells, and ``update_display_data`` (or a new
  display with the same id) rewrites every registered output with that id, in any cell;
- so that a runaway cell cannot exhaust memory, one stream output keeps at most
  ``max_stream_chars`` characters (its head and tail, with a line saying how much was cut) and a
  cell keeps at most ``max_outputs`` outputs (a last line says how many more were dropped).

The clock: :attr:`ExecutionCollector.started_at` is when the kernel began our request (its
``busy`` status for it, immediately followed by ``execute_input``; silent requests have only the
former), not when the request was sent; the timeout and the duration count from there.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import nbformat

from ..execution.status import CellStatus

#: Characters one stream output keeps (head and tail) before the middle is cut.
MAX_STREAM_CHARS = 200_000
#: Outputs one cell keeps; further ones are dropped and counted.
MAX_OUTPUTS = 1_000

_CR_NEWLINE = re.compile(r"\r+\n")
_OVERWRITTEN = re.compile(r"[^\n]*\r(?=[^\n\r])")
_BACKSPACED = re.compile(r"[^\n\x08]\x08")


def apply_control_characters(text: str) -> str:
    """Resolve ``\\r`` and ``\\b`` the way a notebook's output area displays them.

    A carriage return followed by more text on the same line erases the line so far; a trailing
    one is kept (the next chunk of the stream decides). A backspace erases the character before.
    """
    text = _CR_NEWLINE.sub("\n", text)
    text = _OVERWRITTEN.sub("", text)
    while "\x08" in text:
        shorter = _BACKSPACED.sub("", text)
        if shorter == text:
            break
        text = shorter
    return text


class DisplayRegistry:
    """The outputs that carry a ``display_id``, across a notebook's cells.

    Outputs are held by identity (the very dicts stored in the cells), so an update rewrites
    them in place wherever they are.
    """

    def __init__(self) -> None:
        self._outputs: dict[str, list[dict[str, Any]]] = {}

    def add(self, display_id: str, output: dict[str, Any]) -> None:
        """Remember ``output`` as showing ``display_id``."""
        self._outputs.setdefault(display_id, []).append(output)

    def update(self, display_id: str, data: dict[str, Any], metadata: dict[str, Any]) -> int:
        """Set the data and metadata of every output showing ``display_id``; return how many."""
        outputs = self._outputs.get(display_id, [])
        for output in outputs:
            output["data"] = data
            output["metadata"] = metadata
        return len(outputs)

    def forget(self, outputs: Iterable[dict[str, Any]]) -> None:
        """Drop these outputs (cleared, or replaced by a new run of their cell)."""
        gone = {id(output) for output in outputs}
        if not gone:
            return
        for display_id in list(self._outputs):
            kept = [out for out in self._outputs[display_id] if id(out) not in gone]
            if kept:
                self._outputs[display_id] = kept
            else:
                del self._outputs[display_id]

    def __contains__(self, display_id: object) -> bool:
        return display_id in self._outputs


@dataclass
class _Stream:
    """One stream output being built: ``text`` after an optional frozen ``head`` and a cut."""

    name: str
    text: str = ""
    head: str = ""
    cut: int = 0

    def append(self, text: str, limit: int) -> None:
        # Only the current last line can be rewritten by control characters in the new text.
        start = self.text.rfind("\n") + 1
        self.text = self.text[:start] + apply_control_characters(self.text[start:] + text)
        half = max(limit // 2, 1)
        if self.cut == 0 and len(self.text) > limit:
            self.head, self.text = self.text[:half], self.text[half:]
        if len(self.text) > half and (self.cut or self.head):
            self.cut += len(self.text) - half
            self.text = self.text[-half:]

    def render(self) -> dict[str, Any]:
        text = self.text
        if self.cut:
            note = f"\n[... jupyter-ci cut {self.cut} characters of output here ...]\n"
            text = self.head + note + text
        return _new_output("stream", name=self.name, text=text)


_Entry = _Stream | dict[str, Any]


class ExecutionCollector:
    """What one execute request produced, built from the kernel's messages.

    Feed it every iopub message with :meth:`feed_iopub` and every shell message with
    :meth:`feed_shell`; messages for other requests are ignored (they return False). It is
    :attr:`done` once it has both the shell reply and the ``idle`` status of its request.
    """

    def __init__(
        self,
        msg_id: str,
        *,
        displays: DisplayRegistry | None = None,
        clock: Callable[[], float] = time.monotonic,
        max_stream_chars: int = MAX_STREAM_CHARS,
        max_outputs: int = MAX_OUTPUTS,
    ) -> None:
        self.msg_id = msg_id
        self.displays = displays if displays is not None else DisplayRegistry()
        self._clock = clock
        self._max_stream_chars = max_stream_chars
        self._max_outputs = max_outputs
        self._entries: list[_Entry] = []
        self._clear_pending = False
        self._dropped = 0
        #: Clock time at which the kernel began our request (``busy``/``execute_input``), else None.
        self.started_at: float | None = None
        #: Clock time at which the collector became :attr:`done`.
        self.ended_at: float | None = None
        self.execution_count: int | None = None
        #: The content of the shell reply, once it came.
        self.reply: dict[str, Any] | None = None
        self.idle = False

    # --- state -------------------------------------------------------------------------------

    @property
    def started(self) -> bool:
        """Whether the kernel has begun our cell."""
        return self.started_at is not None

    @property
    def replied(self) -> bool:
        """Whether the shell reply came."""
        return self.reply is not None

    @property
    def done(self) -> bool:
        """Whether both the reply and the ``idle`` status of our request came."""
        return self.reply is not None and self.idle

    @property
    def running(self) -> bool:
        """Whether our cell is the one the kernel is running now (begun, not finished)."""
        return self.started and not self.replied and not self.idle

    def deadline(self, timeout: float) -> float | None:
        """Clock time at which ``timeout`` seconds expire, counted from the start; None if unset.

        ``timeout`` 0 (or less) means none; before the kernel began the cell there is none yet.
        """
        if timeout <= 0 or self.started_at is None:
            return None
        return self.started_at + timeout

    def expired(self, timeout: float, now: float | None = None) -> bool:
        """Whether to interrupt: the timeout ran out and our cell is still the one running."""
        deadline = self.deadline(timeout)
        if deadline is None or not self.running:
            return False
        return (self._clock() if now is None else now) >= deadline

    @property
    def duration(self) -> float | None:
        """Seconds from the start to the end (or to now, while unfinished); None if never begun."""
        if self.started_at is None:
            return None
        end = self.ended_at if self.ended_at is not None else self._clock()
        return max(0.0, end - self.started_at)

    def status(self, *, timed_out: bool = False, interrupted: bool = False) -> CellStatus:
        """How the execution ended.

        ``timed_out``: we interrupted it at the timeout. ``interrupted``: the user interrupted
        the kernel while it ran (Stop); a ``KeyboardInterrupt`` then means aborted, not an error
        for the model to fix.
        """
        if timed_out:
            return CellStatus.TIMED_OUT
        reply_status = (self.reply or {}).get("status")
        if reply_status == "aborted":
            return CellStatus.ABORTED
        error = self._error_output()
        if reply_status == "error" or error is not None:
            ename = (error or self.reply or {}).get("ename")
            if interrupted and ename == "KeyboardInterrupt":
                return CellStatus.ABORTED
            return CellStatus.ERROR
        return CellStatus.OK

    def outputs(self) -> list[dict[str, Any]]:
        """The nbformat outputs so far, in order (stream entries rendered)."""
        rendered = [e.render() if isinstance(e, _Stream) else e for e in self._entries]
        reply = self.reply or {}
        has_error = any(out.get("output_type") == "error" for out in rendered)
        if reply.get("status") == "error" and not has_error:
            rendered.append(_error_from_reply(reply))
        if self._dropped:
            note = f"[jupyter-ci dropped {self._dropped} more outputs of this cell]\n"
            rendered.append(_new_output("stream", name="stderr", text=note))
        return rendered

    # --- messages ----------------------------------------------------------------------------

    def feed_iopub(self, msg: dict[str, Any]) -> bool:
        """Take one iopub message; return whether it belonged to our request."""
        if not self._is_ours(msg):
            return False
        msg_type = msg.get("msg_type") or msg.get("header", {}).get("msg_type", "")
        content = msg.get("content") or {}
        if msg_type == "status":
            state = content.get("execution_state")
            if state == "busy":
                self._start()
            elif state == "idle":
                self.idle = True
                self._maybe_end()
        elif msg_type == "execute_input":
            self._start()
            self._take_count(content)
        elif msg_type == "clear_output":
            self._clear(wait=bool(content.get("wait")))
        elif msg_type == "update_display_data":
            display_id = _display_id(content)
            if display_id:
                data, metadata = content.get("data", {}), content.get("metadata", {})
                self.displays.update(display_id, data, metadata)
        elif msg_type == "stream":
            self._add_stream(str(content.get("name", "stdout")), str(content.get("text", "")))
        elif msg_type in ("execute_result", "display_data", "error"):
            self._take_count(content)
            self._add_output(msg, msg_type, content)
        return True

    def feed_shell(self, msg: dict[str, Any]) -> bool:
        """Take one shell message; return whether it was our request's reply."""
        if not self._is_ours(msg):
            return False
        self.reply = dict(msg.get("content") or {})
        self._take_count(self.reply)
        self._maybe_end()
        return True

    # --- internals ---------------------------------------------------------------------------

    def _is_ours(self, msg: dict[str, Any]) -> bool:
        parent = msg.get("parent_header") or {}
        return bool(parent.get("msg_id") == self.msg_id)

    def _start(self) -> None:
        if self.started_at is None:
            self.started_at = self._clock()

    def _take_count(self, content: dict[str, Any]) -> None:
        count = content.get("execution_count")
        if isinstance(count, int) and not isinstance(count, bool):
            self.execution_count = count

    def _maybe_end(self) -> None:
        if self.done and self.ended_at is None:
            self.ended_at = self._clock()

    def _clear(self, *, wait: bool) -> None:
        if wait:
            self._clear_pending = True
            return
        self._clear_now()

    def _clear_now(self) -> None:
        self._clear_pending = False
        self.displays.forget(e for e in self._entries if not isinstance(e, _Stream))
        self._entries.clear()
        self._dropped = 0

    def _room(self) -> bool:
        if len(self._entries) < self._max_outputs:
            return True
        self._dropped += 1
        return False

    def _add_stream(self, name: str, text: str) -> None:
        if self._clear_pending:
            self._clear_now()
        last = self._entries[-1] if self._entries else None
        if isinstance(last, _Stream) and last.name == name:
            last.append(text, self._max_stream_chars)
        elif self._room():
            stream = _Stream(name)
            stream.append(text, self._max_stream_chars)
            self._entries.append(stream)

    def _add_output(self, msg: dict[str, Any], msg_type: str, content: dict[str, Any]) -> None:
        try:
            output: dict[str, Any] = nbformat.v4.output_from_msg(  # type: ignore[no-untyped-call]
                {"msg_type": msg_type, "header": {"msg_type": msg_type}, "content": content}
            )
        except (ValueError, KeyError, TypeError):  # not an output, or a malformed one
            return
        if self._clear_pending:
            self._clear_now()
        display_id = _display_id(content)
        if display_id and display_id in self.displays:
            # A new display with a known id also updates the earlier ones (as frontends do).
            self.displays.update(display_id, output["data"], output["metadata"])
        if not self._room():
            return
        self._entries.append(output)
        if display_id:
            self.displays.add(display_id, output)

    def _error_output(self) -> dict[str, Any] | None:
        for entry in self._entries:
            if isinstance(entry, dict) and entry.get("output_type") == "error":
                return entry
        return None


def _display_id(content: dict[str, Any]) -> str | None:
    transient = content.get("transient")
    if not isinstance(transient, dict):
        return None
    display_id = transient.get("display_id")
    return display_id if isinstance(display_id, str) and display_id else None


def _error_from_reply(reply: dict[str, Any]) -> dict[str, Any]:
    return _new_output(
        "error",
        ename=str(reply.get("ename", "Error")),
        evalue=str(reply.get("evalue", "")),
        traceback=[str(line) for line in reply.get("traceback", [])],
    )


def _new_output(output_type: str, **fields: Any) -> dict[str, Any]:
    output: dict[str, Any] = nbformat.v4.new_output(  # type: ignore[no-untyped-call]
        output_type, **fields
    )
    return output
