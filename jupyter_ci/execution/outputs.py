"""Kernel messages → nbformat outputs, as a notebook frontend shows them: the one normaliser.

nbclient's :class:`~nbclient.NotebookClient` does most of the work, and :class:`NotebookOutputs`
is one: ``process_message``, ``output``, ``clear_output`` (with ``wait``), ``_update_display_id``
(an ``update_display_data``, or a new display with a known ``display_id``, rewrites every output
showing that id, in any cell of the notebook), Output widgets, and nbformat's ``output_from_msg``.
What nbclient does not do is the thin layer here:

- streams are merged as they come, not after the cell ends (nbclient's ``coalesce_streams``),
  so that the caps protect memory from a runaway cell: consecutive writes to one stream are one
  output, with ``\\r`` and ``\\b`` resolved as JupyterLab's output area resolves them
  (:class:`StreamText`);
- the caps: one stream output keeps at most :data:`MAX_STREAM_CHARS` characters (its head and
  tail, with a line saying how much was cut); a cell keeps at most :data:`MAX_OUTPUTS` outputs,
  then a line says how many more were dropped;
- an error reply that came without an ``error`` output still gives one
  (:meth:`NotebookOutputs.finish`).

:func:`coalesce_streams` applies the same stream rules to outputs already built (read back from a
notebook). nbclient tracks display ids by cell index: whoever inserts or deletes cells of the
notebook says so (:meth:`NotebookOutputs.cell_inserted`, :meth:`NotebookOutputs.cell_deleted`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionComplete
from nbformat import NotebookNode

#: Characters one stream output keeps (head and tail) before its middle is cut.
MAX_STREAM_CHARS = 200_000
#: Outputs one cell keeps; further ones are dropped and counted.
MAX_OUTPUTS = 1_000

_CONTROL = re.compile(r"[\n\r\x08]")

#: An nbformat output (a ``NotebookNode``, or a plain dict where a caller builds its own).
Output = NotebookNode


class StreamText:
    """One stream output's text as JupyterLab shows it, capped at ``limit`` characters.

    As ``@jupyterlab/outputarea`` (4.6, ``Private.processText``): text is written at a cursor,
    overwriting what is there; ``\\r`` moves the cursor to the start of its line; ``\\n`` ends the
    line (the whole line is kept) and moves to the end; ``\\b`` deletes the character before the
    cursor, unless the line starts there (and, as JupyterLab does, also the character under the
    cursor when it is not at the end). The cursor is always on the last line, so only that line
    is ever rewritten. Over the limit, the first half is kept as the head, and of the rest only
    the last half: a runaway cell costs at most ``limit`` characters.
    """

    def __init__(self, limit: int = MAX_STREAM_CHARS) -> None:
        self.limit = limit
        #: The start, frozen once the text went over the limit.
        self.head = ""
        #: Characters cut between the head and the rest.
        self.cut = 0
        self._body = ""  # what follows the head and the cut, up to the last line
        self._line = ""  # the last line, where the cursor is
        self._cursor = 0  # in the last line

    def write(self, text: str) -> None:
        """Add a chunk of the stream."""
        if not _CONTROL.search(text) and self._cursor == len(self._line):
            self._line += text  # the common case: plain text at the end
            self._cursor = len(self._line)
        else:
            self._write_controlled(text)
        if len(self._body) + len(self._line) > (self.limit // 2 if self.cut else self.limit):
            self._cap()

    def render(self) -> str:
        """The text as shown, with a line where the middle was cut."""
        text = self._body + self._line
        if not self.cut:
            return text
        return f"{self.head}\n[... jupyter-ci cut {self.cut} characters of output here ...]\n{text}"

    def _write_controlled(self, text: str) -> None:
        ended: list[str] = []  # lines completed by this chunk, joined once (not one copy each)
        line, cursor, start = self._line, self._cursor, 0
        for match in _CONTROL.finditer(text):
            piece = text[start : match.start()]
            line = line[:cursor] + piece + line[cursor + len(piece) :]
            cursor += len(piece)
            start = match.end()
            char = match.group()
            if char == "\n":
                ended.append(line + "\n")
                line, cursor = "", 0
            elif char == "\r":
                cursor = 0
            elif cursor > 0:  # a backspace, as JupyterLab applies it
                line = line[: cursor - 1] + line[cursor + 1 :]
                cursor -= 1
        piece = text[start:]
        line = line[:cursor] + piece + line[cursor + len(piece) :]
        self._body += "".join(ended)
        self._line, self._cursor = line, cursor + len(piece)

    def _cap(self) -> None:
        half = max(self.limit // 2, 1)
        text = self._body + self._line
        cursor = len(self._body) + self._cursor
        if not self.cut:
            self.head, text, cursor = text[:half], text[half:], cursor - half
        drop = max(0, len(text) - half)
        self.cut += drop
        text, cursor = text[drop:], max(0, cursor - drop)
        line_start = text.rfind("\n") + 1
        self._body, self._line = text[:line_start], text[line_start:]
        self._cursor = max(0, cursor - line_start)


@dataclass
class _Building:
    """What is being built for one cell's outputs list (held by identity)."""

    outputs: list[Output]
    stream: StreamText | None = None
    stream_output: Output | None = None
    dropped: int = 0


@dataclass
class _Pending:
    """The cells being built, by the identity of their outputs list."""

    cells: dict[int, _Building] = field(default_factory=dict)

    def of(self, outputs: list[Output]) -> _Building:
        building = self.cells.get(id(outputs))
        if building is None or building.outputs is not outputs:
            building = _Building(outputs)
            self.cells[id(outputs)] = building
        return building

    def forget(self, outputs: list[Output]) -> _Building | None:
        building = self.cells.pop(id(outputs), None)
        return building if building is not None and building.outputs is outputs else None


class NotebookOutputs(NotebookClient):
    """nbclient's :class:`~nbclient.NotebookClient` with jupyter-ci's output rules.

    Used as nbclient is (the headless workspace runs cells with ``async_execute_cell``), or fed
    message dicts with :meth:`feed` (the in-kernel workspace, the Python test tab). Errors never
    raise (``allow_errors``), and no timing metadata is written into cells.
    """

    def __init__(
        self,
        nb: nbformat.NotebookNode | None = None,
        km: Any = None,
        *,
        max_stream_chars: int = MAX_STREAM_CHARS,
        max_outputs: int = MAX_OUTPUTS,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("allow_errors", True)
        kwargs.setdefault("record_timing", False)
        notebook = nb if nb is not None else nbformat.v4.new_notebook()  # type: ignore[no-untyped-call]
        super().__init__(notebook, km, **kwargs)
        self.max_stream_chars = max_stream_chars
        self.max_outputs = max_outputs
        self.clear_before_next_output = False  # nbclient sets it first in async_execute_cell
        self._pending = _Pending()

    # --- the life of one cell's outputs --------------------------------------------------------

    def begin(self, cell_index: int) -> None:
        """A cell is about to run again: its old outputs no longer take display updates."""
        self.clear_display_id_mapping(cell_index)
        self.clear_before_next_output = False

    def feed(self, msg: Mapping[str, Any], cell_index: int) -> bool:
        """Take one iopub message of the cell at ``cell_index``; True once it says ``idle``."""
        message = dict(msg)
        message.setdefault("msg_type", (msg.get("header") or {}).get("msg_type", ""))
        message.setdefault("parent_header", {})
        message.setdefault("content", {})
        try:
            self.process_message(message, self.nb["cells"][cell_index], cell_index)
        except CellExecutionComplete:
            return True
        return False

    def finish(self, outputs: list[Output], reply: Mapping[str, Any] | None = None) -> list[Output]:
        """End a cell's outputs: the error of an error ``reply`` without one, the dropped count."""
        building = self._pending.forget(outputs)
        errored = reply is not None and reply.get("status") == "error"
        if errored and not any(out.get("output_type") == "error" for out in outputs):
            outputs.append(error_output(reply or {}))
        if building is not None and building.dropped:
            note = f"[jupyter-ci dropped {building.dropped} more outputs of this cell]\n"
            outputs.append(_new_output("stream", name="stderr", text=note))
        return outputs

    def cell_inserted(self, index: int) -> None:
        """A cell was inserted at ``index``: the display ids of the cells after it move down."""
        self._shift(lambda cell: cell + 1 if cell >= index else cell)

    def cell_deleted(self, index: int) -> None:
        """The cell at ``index`` was deleted: its displays go, those after it move up."""
        self._shift(lambda cell: cell - 1 if cell > index else None if cell == index else cell)

    # --- nbclient's hooks ----------------------------------------------------------------------

    def output(
        self,
        outs: list[Output],
        msg: dict[str, Any],
        display_id: str | None,
        cell_index: int,
    ) -> Output | None:
        """One output message: streams merged here, the rest through nbclient, within the caps."""
        if self.output_hook_stack[msg["parent_header"].get("msg_id")]:
            # An Output widget captures it, as nbclient does.
            return super().output(outs, msg, display_id, cell_index)
        if self.clear_before_next_output:
            self._clear(outs, cell_index)
        building = self._pending.of(outs)
        if msg["msg_type"] == "stream":
            return self._stream(building, msg["content"])
        if len(outs) >= self.max_outputs:
            building.dropped += 1
            return None
        return super().output(outs, msg, display_id, cell_index)

    def clear_output(self, outs: list[Output], msg: dict[str, Any], cell_index: int) -> None:
        """nbclient's ``clear_output``; what was counted of the cleared outputs goes too."""
        super().clear_output(outs, msg, cell_index)
        if not outs:
            self._pending.forget(outs)

    # --- internals -----------------------------------------------------------------------------

    def _clear(self, outs: list[Output], cell_index: int) -> None:
        """The clear a ``clear_output(wait=True)`` deferred to this output."""
        outs[:] = []
        self.clear_display_id_mapping(cell_index)
        self.clear_before_next_output = False
        self._pending.forget(outs)

    def _stream(self, building: _Building, content: Mapping[str, Any]) -> Output | None:
        name, text = str(content.get("name", "stdout")), joined(content.get("text"))
        outs = building.outputs
        last = outs[-1] if outs else None
        if (
            building.stream is not None
            and last is building.stream_output
            and last is not None
            and last.get("name") == name
        ):
            building.stream.write(text)
            last["text"] = building.stream.render()
            return last
        if len(outs) >= self.max_outputs:
            building.dropped += 1
            return None
        stream = StreamText(self.max_stream_chars)
        stream.write(text)
        output = _new_output("stream", name=name, text=stream.render())
        outs.append(output)
        building.stream, building.stream_output = stream, output
        return output

    def _shift(self, move: Callable[[int], int | None]) -> None:
        """Move the cell indices of nbclient's display map (None: the cell is gone)."""
        moved: dict[str, dict[int, list[int]]] = {}
        for display_id, cells in self._display_id_map.items():
            places = ((move(cell), indices) for cell, indices in cells.items())
            moved[display_id] = {cell: indices for cell, indices in places if cell is not None}
        self._display_id_map = moved


def coalesce_streams(
    outputs: Iterable[Mapping[str, Any]], max_stream_chars: int = MAX_STREAM_CHARS
) -> list[Mapping[str, Any]]:
    """Outputs already built, with the stream rules applied as they are to live messages.

    Consecutive stream outputs of one name become one, with ``\\r`` and ``\\b`` resolved (as
    JupyterLab does when it loads a notebook); other outputs are kept as they are.
    """
    result: list[Mapping[str, Any]] = []
    streams: dict[int, StreamText] = {}  # by index in ``result``
    for out in outputs:
        if out.get("output_type") != "stream":
            result.append(out)
            continue
        last = result[-1] if result else None
        text = joined(out.get("text"))
        if last is not None and len(result) - 1 in streams and last.get("name") == out.get("name"):
            streams[len(result) - 1].write(text)
            continue
        stream = StreamText(max_stream_chars)
        stream.write(text)
        streams[len(result)] = stream
        result.append(out)
    for index, stream in streams.items():
        result[index] = {**result[index], "text": stream.render()}
    return result


def message(msg_type: str, **content: Any) -> dict[str, Any]:
    """A kernel message as :meth:`NotebookOutputs.feed` takes it (for outputs made in-process)."""
    return {
        "msg_type": msg_type,
        "header": {"msg_type": msg_type},
        "parent_header": {},
        "content": content,
    }


def error_output(content: Mapping[str, Any]) -> Output:
    """An ``error`` output from an error's fields (an ``execute_reply``, or an exception's)."""
    return _new_output(
        "error",
        ename=str(content.get("ename", "Error")),
        evalue=str(content.get("evalue", "")),
        traceback=[str(line) for line in content.get("traceback") or []],
    )


def joined(value: object) -> str:
    """The text of an nbformat multiline string: a string, or a list of strings to join."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(str(item) for item in value)
    return "" if value is None else str(value)


def _new_output(output_type: str, **fields: Any) -> Output:
    output: Output = nbformat.v4.new_output(output_type, **fields)  # type: ignore[no-untyped-call]
    return output
