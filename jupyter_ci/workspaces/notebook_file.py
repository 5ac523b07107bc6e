"""The notebook file of the headless workspace: loading with cell ids, writing atomically.

Also the few nbformat constructors the workspace uses, typed (nbformat's own are not).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import uuid
from pathlib import Path
from typing import Any, cast

import nbformat


def new_cell_id() -> str:
    """A fresh nbformat cell id (8 hex digits, as nbformat makes them)."""
    return uuid.uuid4().hex[:8]


def new_code_cell(source: str, metadata: dict[str, Any]) -> nbformat.NotebookNode:
    """An nbformat v4.5 code cell with an id."""
    return cast(
        nbformat.NotebookNode,
        nbformat.v4.new_code_cell(source=source, metadata=metadata),  # type: ignore[no-untyped-call]
    )


def load_notebook(path: Path) -> nbformat.NotebookNode:
    """The notebook at ``path`` as nbformat 4.5 with unique cell ids, or a new empty one.

    Older notebooks (4.0 to 4.4) are upgraded: cells without an id, or with one another cell
    already has, get a fresh id.
    """
    if not path.exists():
        return cast(nbformat.NotebookNode, nbformat.v4.new_notebook())  # type: ignore[no-untyped-call]
    notebook = cast(
        nbformat.NotebookNode,
        nbformat.read(path, as_version=4),  # type: ignore[no-untyped-call]
    )
    if notebook.nbformat_minor < 5:
        notebook.nbformat_minor = 5
    seen: set[str] = set()
    for cell in notebook.cells:
        cell_id = cell.get("id")
        while not isinstance(cell_id, str) or not cell_id or cell_id in seen:
            cell_id = new_cell_id()
        cell["id"] = cell_id
        seen.add(cell_id)
    return notebook


def notebook_text(notebook: nbformat.NotebookNode) -> str:
    """The notebook as ``.ipynb`` JSON text; raises ``nbformat.ValidationError`` if invalid."""
    nbformat.validate(notebook)
    return cast(str, nbformat.writes(notebook))  # type: ignore[no-untyped-call]


def write_atomically(target: Path, text: str) -> None:
    """Write ``text`` to ``target`` through a temporary file in the same folder.

    The target is either left as it was or replaced by the complete new file
    (:func:`os.replace`); the temporary file is removed on failure. An existing file keeps its
    permissions; a new one gets the usual ``0o666`` less the umask.
    """
    temp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        with contextlib.suppress(FileNotFoundError):
            os.chmod(temp, target.stat().st_mode & 0o7777)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
