"""An IPython traceback reduced to what fixing a cell needs (see :func:`compact_traceback`).

The digest of an error (:func:`jupyter_ci.agent.digest.digest_error`) shows the traceback this
way: the user's frames with the line their arrow marks, library frames as one location line
each, long runs of them and repeated frames counted instead of shown.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_RULE = re.compile(r"-{20,}")
_HEADER = re.compile(r"\S+\s+Traceback \(most recent call last\)")
_CHAINED = ("The above exception was the direct cause", "During handling of the above exception")
_USER_FRAME = re.compile(r"\s*(?:Cell In ?\[|Input In ?\[|<ipython-input-)")
_FILE_FRAME = re.compile(r"File (?P<path>[^\n]*?):(?P<line>\d+), in (?P<where>[^\n]*)")
_ARROW = re.compile(r"\s*-*>\s*\d+")
_LIBRARY_PATH = re.compile(r"(?:site|dist)-packages/|/lib/python\d[^/]*/|\.(?:pyx|pxi)$")
#: Library frames shown (first and last) before the rest of a run of them is counted instead.
LIBRARY_FRAMES_SHOWN = 2


_CELL_LINE = re.compile(r"(?:Cell In ?\[[^\]]*\]|Input In ?\[[^\]]*\]), line (\d+)")


def cell_line(pieces: Sequence[str]) -> int | None:
    """The line of the cell that was running when the error was raised: the outermost cell
    frame of the last exception (after "During handling of ...", the one that ended the cell);
    None when the traceback has no cell frame. ``pieces`` are without ANSI colours."""
    line = None
    for piece in pieces:
        if any(marker in piece for marker in _CHAINED):
            line = None  # a later exception's frames follow
        if line is None and (match := _CELL_LINE.search(piece)) is not None:
            line = int(match.group(1))
    return line


def compact_traceback(pieces: Sequence[str], error_line: str) -> list[str]:
    """An IPython traceback (one piece per frame) reduced to what fixing a cell needs.

    - The rule and ``... Traceback (most recent call last)`` header lines are dropped.
    - A frame in the user's code (a cell, or a file outside site-packages and the standard
      library) keeps its location line and the line its arrow marks; frames without an arrow
      (a ``SyntaxError``'s caret) are kept whole.
    - A library frame keeps only its location (``File pandas/core/frame.py:4330, in ...``,
      the path from the package on); of a run of more than two, the first and last are kept
      and the others counted (``[... 3 library frames ...]``).
    - The final ``ename: evalue`` line is dropped when it repeats ``error_line`` (the digest
      starts with it); an earlier exception in a chain whose frames are all in libraries is left
      out with its "The above exception ..." line, unless its message differs, which is kept.

    Tracebacks that do not look like IPython's are returned as they are.
    """
    if not any(_HEADER.fullmatch(piece.strip()) for piece in pieces):
        return list(pieces)
    sections: list[list[str]] = [[]]
    links: list[str] = []
    for piece in pieces:
        if piece.strip().startswith(_CHAINED):
            links.append(piece.strip())
            sections.append([])
        elif not (_RULE.fullmatch(piece.strip()) or _HEADER.fullmatch(piece.strip())):
            sections[-1].append(piece)
    result: list[str] = []
    for index, section in enumerate(sections):
        last = index == len(sections) - 1
        frames = _compact_frames(section)
        has_user_frame = any(_is_user_frame(piece) for piece in section)
        if not last and not has_user_frame:
            message = _exception_line(section)
            if message is not None and message != error_line:
                result.extend([message, links[index]])
            continue
        if last and frames and frames[-1] == error_line:
            frames.pop()
        result.extend(frames)
        if not last:
            result.append(links[index])
    return result


def _is_user_frame(piece: str) -> bool:
    if _USER_FRAME.match(piece):
        return True
    frame = _FILE_FRAME.match(piece.strip())
    return frame is not None and not _LIBRARY_PATH.search(frame["path"])


def _exception_line(section: Sequence[str]) -> str | None:
    others = [p for p in section if not _USER_FRAME.match(p) and not _FILE_FRAME.match(p.strip())]
    return others[-1].strip() if others else None


def _compact_frames(section: Sequence[str]) -> list[str]:
    out: list[str] = []
    library: list[str] = []

    def flush() -> None:
        if len(library) > LIBRARY_FRAMES_SHOWN:
            hidden = len(library) - 2
            plural = "s" if hidden != 1 else ""
            out.extend([library[0], f"[... {hidden} library frame{plural} ...]", library[-1]])
        else:
            out.extend(library)
        library.clear()

    previous: list[str] = []
    repeats = 0

    def flush_repeats() -> None:
        nonlocal repeats
        if repeats:
            plural = "s" if repeats != 1 else ""
            out.append(f"[... the frame above repeated {repeats} more time{plural} ...]")
        repeats = 0

    for piece in section:
        frame = _FILE_FRAME.match(piece.strip())
        if frame is not None and not _is_user_frame(piece):
            flush_repeats()
            previous = []
            library.append(
                f"File {_short_path(frame['path'])}:{frame['line']}, in {frame['where']}"
            )
            continue
        flush()
        lines = piece.strip("\n").split("\n")
        arrow = next((line for line in lines if _ARROW.match(line)), None)
        if _is_user_frame(piece) and arrow is not None:
            shown = [lines[0].strip(), arrow.rstrip()]
        else:
            shown = [piece.strip("\n")]
        if shown == previous:  # recursion: one frame, many times
            repeats += 1
            continue
        flush_repeats()
        out.extend(shown)
        previous = shown
    flush_repeats()
    flush()
    return out


def _short_path(path: str) -> str:
    """A library file's path from its package on (``pandas/core/frame.py``)."""
    for marker in ("site-packages/", "dist-packages/"):
        if marker in path:
            return path.split(marker, 1)[1]
    stdlib = re.search(r"/lib/python\d[^/]*/(.*)", path)
    return stdlib.group(1) if stdlib else path
