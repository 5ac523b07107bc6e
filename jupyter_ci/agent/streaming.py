"""Following a streamed reply, to put code into a cell while the model is still writing it.

The first fenced Python block of a reply is streamed into the new cell line by line; the final
code is decided afterwards by :func:`jupyter_ci.agent.extract.extract_code`, which also repairs
malformed replies. The rest of the reply is prose, shown as it comes: :meth:`FenceStream.feed`
splits each delta into ``("prose", text)`` and ``("code", text)`` pieces (the fence lines of the
streamed block are neither), so that what is shown as prose never holds a half-written cell.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .extract import PYTHON_TAGS

#: What a piece of a reply is: part of the prose, or of the code streamed into the cell.
Piece = tuple[str, str]
_FENCES = ("```", "~~~")


def _is_fence(line: str) -> bool:
    return line.strip().startswith(_FENCES)


def _may_become_fence(partial: str) -> bool:
    """Whether an unfinished line could still turn out to be a fence line."""
    text = partial.lstrip()
    return any(text.startswith(fence) or fence.startswith(text) for fence in _FENCES)


@dataclass
class FenceStream:
    """Feed text deltas; get back the pieces they complete, in order."""

    _line: str = ""
    #: Characters of the current line already given out as prose.
    _shown: int = 0
    _state: str = "before"  # before → code → after; "other" inside a non-Python fence before
    _lines: int = 0
    #: The code of the first Python block so far (whole lines).
    code: str = field(default="")

    @property
    def in_code(self) -> bool:
        """Whether the stream is inside the first code block."""
        return self._state == "code"

    def feed(self, text: str) -> list[Piece]:
        """Consume ``text``; return the pieces it completes (code comes as whole lines)."""
        pieces: list[Piece] = []
        self._line += text
        while "\n" in self._line:
            line, self._line = self._line.split("\n", 1)
            self._take(line, pieces, ended=True)
            self._shown = 0
        if self._line and self._state != "code" and not _may_become_fence(self._line):
            # Prose streams as it comes; only a line that may be a fence waits for its end.
            pieces.append(("prose", self._line[self._shown :]))
            self._shown = len(self._line)
        return [piece for piece in pieces if piece[1]]

    def finish(self) -> list[Piece]:
        """The end of the reply: the pieces of its last, unterminated line."""
        pieces: list[Piece] = []
        line, self._line = self._line, ""
        if line:
            self._take(line, pieces, ended=False)
        self._shown = 0
        return [piece for piece in pieces if piece[1]]

    def _take(self, line: str, pieces: list[Piece], *, ended: bool) -> None:
        newline = "\n" if ended else ""
        if self._state == "code":
            if line.strip() in _FENCES:
                self._state = "after"
                return
            # Each line after the first brings the newline before it: the cell never ends
            # with an empty line while the model writes, nor after.
            piece = ("\n" if self._lines else "") + line
            self._lines += 1
            self.code += piece
            pieces.append(("code", piece))
            return
        if self._state == "before" and _is_fence(line):
            if line.strip()[3:].strip().lower() in PYTHON_TAGS:
                self._state = "code"
                return
            self._state = "other"
        elif self._state == "other" and line.strip() in _FENCES:
            self._state = "before"
        pieces.append(("prose", line[self._shown :] + newline))


def code_pieces(pieces: list[Piece]) -> str:
    """The code among ``pieces``, joined."""
    return "".join(text for part, text in pieces if part == "code")
