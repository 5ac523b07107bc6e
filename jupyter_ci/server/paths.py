"""The one canonical form of a notebook path (ARCHITECTURE.md, One fact, one source).

Conversations and runs are found by notebook path, so two spellings of one file must be one path,
and two files one path never. The form is the contents API's: relative to the server's root,
"/"-separated, without empty or "." segments, ".." resolved (never above the root). A backslash
separates folders only where the operating system says so (Windows); elsewhere it is a character
of a file's name, and ``back\\slash.ipynb`` is not ``back/slash.ipynb``.

Paths enter the server in websocket messages (:mod:`.dispatch`), in the HTTP routes' query
(:mod:`.handlers`) and in the contents manager's events (:mod:`.app`); each applies
:func:`notebook_path` there, and the store applies it again to what it keeps.
"""

from __future__ import annotations

import os


class BadPath(ValueError):
    """A notebook path that names no notebook (empty, or above the server's root)."""


def notebook_path(path: str, *, separator: str = os.sep) -> str:
    """The canonical form of ``path`` (:class:`BadPath` when it names no notebook).

    ``separator`` is the operating system's (a test may name another).
    """
    text = str(path)
    if separator == "\\":
        text = text.replace("\\", "/")
    parts: list[str] = []
    for part in text.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise BadPath(f"The notebook path {path!r} goes above the server's root.")
            parts.pop()
            continue
        parts.append(part)
    if not parts:
        raise BadPath("A notebook path is required.")
    return "/".join(parts)
