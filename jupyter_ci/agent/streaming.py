"""Following a streamed reply, to put code into a cell while the model is still writing it.

The first fenced Python block of a reply is streamed into the new cell line by line; the final
code is decided afterwards by :func:`jupyter_ci.agent.extract.extract_code`, which also repairs
malformed replies.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .extract import PYTHON_TAGS


@dataclass
class FenceStream:
    """Feed text deltas; get back the code lines of the first Python block as they complete."""

    _line: str = ""
    _state: str = "before"  # before → code → after
    _lines: int = 0
    code: str = field(default="")

    @property
    def in_code(self) -> bool:
        """Whether the stream is inside the first code block."""
        return self._state == "code"

    def feed(self, text: str) -> str:
        """Consume ``text``; return the code completed by it (whole lines), possibly ``""``."""
        out: list[str] = []
        self._line += text
        while "\n" in self._line:
            line, self._line = self._line.split("\n", 1)
            out.append(self._take(line))
        return "".join(out)

    def finish(self) -> str:
        """The end of the reply: return the last unterminated code line, if any."""
        line, self._line = self._line, ""
        return self._take(line) if line else ""

    def _take(self, line: str) -> str:
        stripped = line.strip()
        if self._state == "before":
            if stripped.startswith(("```", "~~~")) and stripped[3:].strip().lower() in PYTHON_TAGS:
                self._state = "code"
            return ""
        if self._state == "code":
            if stripped in ("```", "~~~"):
                self._state = "after"
                return ""
            # Each line after the first brings the newline before it: the cell never ends
            # with an empty line while the model writes, nor after.
            piece = ("\n" if self._lines else "") + line
            self._lines += 1
            self.code += piece
            return piece
        return ""
