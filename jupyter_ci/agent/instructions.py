"""Project instructions, read the way coding agents read them: ``AGENTS.md`` and configuration.

The instructions of a request are ``c.JupyterCI.instructions`` (the ``instructions`` option) and
the ``AGENTS.md`` nearest the notebook: in its folder, else in the closest of its parents, up to
and including the root (the Jupyter server's root folder; for ``jupyter ci`` the current folder
when the notebook is under it; for ``%%ci`` in a kernel, its working folder). They become part of
the system prompt (``prompts/instructions.txt``), at most :data:`MAX_INSTRUCTIONS_CHARS`
characters, so the Preview shows them as the model gets them.
"""

from __future__ import annotations

import os
from pathlib import Path

from .prompts import render

#: The file name agents look for.
AGENTS_FILE = "AGENTS.md"
#: The most characters of instructions a request carries (about a thousand tokens).
MAX_INSTRUCTIONS_CHARS = 4000


def find_agents_file(folder: Path, root: Path) -> Path | None:
    """The ``AGENTS.md`` nearest ``folder``, looking up to ``root`` (None if there is none, or
    if ``folder`` is not under ``root``: nothing above the root is read)."""
    try:
        folder, root = folder.resolve(), root.resolve()
        folder.relative_to(root)
    except (OSError, ValueError):
        return None
    for place in (folder, *folder.parents):
        candidate = place / AGENTS_FILE
        if candidate.is_file():
            return candidate
        if place == root:
            return None
    return None


def project_instructions(configured: str, folder: Path | None, root: Path | None) -> str:
    """The system prompt's part for the project's instructions ('' when there are none)."""
    parts: list[tuple[str, str]] = []
    if configured.strip():
        parts.append(("the configuration (instructions)", configured.strip()))
    found = find_agents_file(folder, root) if folder is not None and root is not None else None
    if found is not None:
        text = _read(found)
        if text.strip():
            shown = os.path.relpath(found, root) if root is not None else found.name
            parts.append((shown.replace(os.sep, "/"), text.strip()))
    if not parts:
        return ""
    text = "\n\n".join(f"From {source}:\n{body}" for source, body in parts)
    if len(text) > MAX_INSTRUCTIONS_CHARS:
        cut = len(text) - MAX_INSTRUCTIONS_CHARS
        text = text[:MAX_INSTRUCTIONS_CHARS].rstrip() + f"\n[... {cut:,} more characters not read]"
    return render("instructions", instructions=text)


def _read(path: Path) -> str:
    """The start of a file as text (never more than the cap needs; '' if it cannot be read)."""
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_INSTRUCTIONS_CHARS * 4 + 4)
    except OSError:
        return ""
    return data.decode("utf-8", errors="replace")


def server_instructions(configured: str, root_dir: str, notebook_path: str) -> str:
    """The instructions of a request about ``notebook_path`` (a contents path under the Jupyter
    server's ``root_dir``): AGENTS.md is looked for from its folder up to the root."""
    if not root_dir:
        return project_instructions(configured, None, None)
    root = Path(root_dir)
    folder = (root / notebook_path.replace("\\", "/").lstrip("/")).parent
    return project_instructions(configured, folder, root)


def file_instructions(configured: str, notebook: Path) -> str:
    """The instructions of a request about the notebook file ``notebook`` (``jupyter ci``, the
    Python API): AGENTS.md is looked for from its folder up to the current folder when the
    notebook is under it, else in its folder only."""
    folder = notebook.resolve().parent
    here = Path.cwd().resolve()
    root = here if folder == here or here in folder.parents else folder
    return project_instructions(configured, folder, root)
