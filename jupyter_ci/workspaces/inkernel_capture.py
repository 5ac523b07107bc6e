"""Around one block the in-kernel workspace runs: its outputs captured, its interrupts.

Outputs are captured while they are shown: ``sys.stdout``/``sys.stderr`` are teed, the display
publisher is wrapped (displays, display updates, ``clear_output``), the execute result is
formatted with the shell's display formatter, and tracebacks are taken over
(``shell._showtraceback``, where both ``showtraceback`` and ``showsyntaxerror`` end) so that a
failed attempt becomes an ``error`` output for the model but is shown to the user only as a line
of text: papermill and nbclient do not fail a notebook whose fix succeeded. All of it becomes
outputs through the one normaliser, as kernel messages would.

A block is interrupted (at its timeout, or by Stop) with SIGINT to the kernel's own process:
``interrupt_main`` does not break ``time.sleep``.
"""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Mapping
from typing import Any

from ..execution.outputs import NotebookOutputs, message


class _Tee:
    """A text stream that records what is written and passes it on."""

    def __init__(self, stream: Any, name: str, sink: Callable[[str, str], None]) -> None:
        self._stream = stream
        self._name = name
        self._sink = sink

    def write(self, text: str) -> int:
        if isinstance(text, str) and text:
            self._sink(self._name, text)
        result: int = self._stream.write(text)
        return result

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _json_data(data: Mapping[str, Any]) -> dict[str, Any]:
    """A mime bundle with bytes made base64 text, as nbformat stores them."""
    return {
        mime: base64.b64encode(value).decode("ascii") if isinstance(value, bytes) else value
        for mime, value in data.items()
    }


_MISSING = object()


class OutputCapture:
    """Record the outputs of code run through the shell, while the user sees them.

    What the code shows reaches the one normaliser
    (:class:`~jupyter_ci.execution.outputs.NotebookOutputs`) as the kernel messages a frontend
    would get: the streams from the tee, displays, display updates and ``clear_output`` from the
    display publisher, the result and the error. A failed run is recorded as an ``error`` output
    but not shown (the progress line says what happened in one line of text).
    """

    def __init__(self, shell: Any, outputs: NotebookOutputs, cell_index: int) -> None:
        self.shell = shell
        self._outputs = outputs
        self._index = cell_index
        #: The ``ename`` of the last error recorded, if any.
        self.error_name: str | None = None
        self._saved: list[tuple[Any, str, Any]] = []

    def _feed(self, msg_type: str, **content: Any) -> None:
        self._outputs.feed(message(msg_type, **content), self._index)

    # the hooks

    def _stream(self, name: str, text: str) -> None:
        self._feed("stream", name=name, text=text)

    def _publish(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def publish(data: Any, metadata: Any = None, *args: Any, **kwargs: Any) -> Any:
            if isinstance(data, Mapping):
                with contextlib.suppress(Exception):
                    self._feed(
                        "update_display_data" if kwargs.get("update") else "display_data",
                        data=_json_data(data),
                        metadata=dict(metadata or {}),
                        transient=dict(kwargs.get("transient") or {}),
                    )
            return original(data, metadata, *args, **kwargs)

        return publish

    def _clear_output(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def clear_output(wait: bool = False) -> Any:
            self._feed("clear_output", wait=bool(wait))
            return original(wait)

        return clear_output

    def _showtraceback(self, etype: Any, evalue: Any, stb: Any) -> None:
        lines = [str(line) for line in stb] if isinstance(stb, list) else [str(stb)]
        name = getattr(etype, "__name__", str(etype))
        self.error_name = name
        self._feed("error", ename=name, evalue=str(evalue), traceback=lines)

    # installing and removing them

    def _set(self, owner: Any, name: str, value: Any) -> None:
        self._saved.append((owner, name, owner.__dict__.get(name, _MISSING)))
        setattr(owner, name, value)

    def __enter__(self) -> OutputCapture:
        self._saved_streams = (sys.stdout, sys.stderr)
        sys.stdout = _Tee(sys.stdout, "stdout", self._stream)
        sys.stderr = _Tee(sys.stderr, "stderr", self._stream)
        display_pub = getattr(self.shell, "display_pub", None)
        if display_pub is not None:
            self._set(display_pub, "publish", self._publish(display_pub.publish))
            self._set(display_pub, "clear_output", self._clear_output(display_pub.clear_output))
        self._set(self.shell, "_showtraceback", self._showtraceback)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.stdout, sys.stderr = self._saved_streams
        for owner, name, before in reversed(self._saved):
            if before is _MISSING:
                with contextlib.suppress(AttributeError):
                    delattr(owner, name)
            else:
                setattr(owner, name, before)
        self._saved.clear()

    def add_result(self, value: Any) -> None:
        """Record the cell's result (already shown by the display hook) as an execute_result."""
        try:
            data, metadata = self.shell.display_formatter.format(value)
        except Exception:
            data, metadata = {"text/plain": repr(value)}, {}
        self._feed(
            "execute_result",
            data=_json_data(data),
            metadata=dict(metadata or {}),
            execution_count=None,
        )

    def add_exception(self, exc: BaseException) -> None:
        """Record an exception the shell did not show through ``_showtraceback``."""
        if self.error_name is None:
            lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
            self._showtraceback(type(exc), exc, lines)


class Interrupter:
    """Sends SIGINT to this process while a block runs: at its timeout, or for Stop.

    SIGINT, not ``interrupt_main``, which does not break ``time.sleep``. A signal is sent only
    while the block is running (checked under a lock), never into the magic's own code.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = False
        self._timer: threading.Timer | None = None
        #: Whether the block ran past its timeout and was interrupted.
        self.timed_out = False
        #: Whether Stop interrupted the block.
        self.stopped = False

    def start(self, timeout: float) -> None:
        """A block begins; interrupt it after ``timeout`` seconds (0: never)."""
        self.timed_out = self.stopped = False
        with self._lock:
            self._running = True
        if timeout and timeout > 0:
            self._timer = threading.Timer(timeout, self._signal, args=("timed_out",))
            self._timer.daemon = True
            self._timer.start()

    def stop(self) -> None:
        """Stop: interrupt the block running now, if one is."""
        self._signal("stopped")

    def finish(self) -> None:
        """The block has ended: no signal from now on."""
        with self._lock:
            self._running = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _signal(self, why: str) -> None:
        with self._lock:
            if self._running:
                setattr(self, why, True)
                os.kill(os.getpid(), signal.SIGINT)
