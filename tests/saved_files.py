"""Reading a notebook file that a Jupyter server may be saving at that moment.

The contents manager saves "atomically" by keeping a backup copy and rewriting the file in place
(jupyter_server's ``atomic_writing``), in a worker thread or another process, so a reader can catch
the file half written. Tests that wait for a save read it again in that case, never fail on it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbformat


def whole_notebook(path: Path) -> tuple[Any, str]:
    """The notebook in the file, or None and why while it is empty or caught half written."""
    text = path.read_text(encoding="utf-8")
    if not text.strip():
        return None, "the file is empty"
    try:
        return nbformat.reads(text, as_version=4), ""
    except nbformat.reader.NotJSONError as err:
        return None, str(err)[:200]
