"""Which files a run's cells created or changed, seen from the kernel, in every workspace.

Before a run's first cell runs and after each cell, the workspace takes a snapshot of the
kernel's working folder (the notebook's folder unless the code changed it): every file's size
and modification time, read by :data:`SNAPSHOT_SOURCE` inside the kernel, as the variables are
(a ``user_expressions`` entry of a silent, empty request: nothing in ``In``/``Out``, the history
or the user's namespace). The loop compares each snapshot with the first (:func:`changed_files`)
and says the list in a ``files`` event when it changed. The snapshot after a cell goes with the
cell's own execute request where the workspace can (:attr:`FileWatch.expression`, evaluated by the
kernel only after a cell that ended well); otherwise it is taken by a request of its own, in the
background while the model writes the next step (:meth:`FileWatch.check_soon`). The next cell, and
the run's end, wait for that first (:meth:`FileWatch.settle`), so the list is said before the cell
that follows runs and before the run's ``finished``.

What is looked at is bounded, so that a run in a big folder costs little: folders down to
:data:`MAX_DEPTH` levels, not hidden ones (a leading ``.``) nor caches and environments
(:data:`SKIPPED_DIRS`), at most :data:`MAX_ENTRIES` files and about a quarter second. Notebooks
that already existed are left out (JupyterLab saves them itself).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import JupyterCIError

if TYPE_CHECKING:
    from .workspace import Workspace

#: Folders below the working folder looked into: 0 is the folder itself.
MAX_DEPTH = 2
#: Files listed at most in one snapshot.
MAX_ENTRIES = 5000
#: The most files a ``files`` event names (newest first).
MAX_LISTED = 50
#: Folder names never looked into.
SKIPPED_DIRS = ("__pycache__", "node_modules", "site-packages", "venv", "env")

#: Python source run inside the user's kernel (standard library only, old Pythons too). It reads
#: ``root`` from its globals (None: the working folder) and leaves ``result``, whose ``repr()`` is
#: JSON: ``{"root": ..., "files": {path: [size, mtime_ns]}, "complete": bool}``. It never raises.
SNAPSHOT_SOURCE = r"""
import json
import os
import time


class Report(str):
    def __repr__(self):
        return str(self)


def snapshot(root, max_depth, max_entries, skipped, budget):
    root = root or os.getcwd()
    files = {}
    complete = True
    deadline = time.monotonic() + budget
    pending = [(root, 0)]
    while pending:
        folder, depth = pending.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            if len(files) >= max_entries or time.monotonic() > deadline:
                return root, files, False
            try:
                if entry.is_dir(follow_symlinks=False):
                    if depth < max_depth and entry.name not in skipped:
                        pending.append((entry.path, depth + 1))
                    continue
                if not entry.is_file():
                    continue
                stat = entry.stat()
            except OSError:
                continue
            path = os.path.relpath(entry.path, root).replace(os.sep, "/")
            files[path] = [stat.st_size, stat.st_mtime_ns]
    return root, files, complete


try:
    found = snapshot(root, MAX_DEPTH, MAX_ENTRIES, SKIPPED_DIRS, 0.25)
    result = Report(json.dumps({"root": found[0], "files": found[1], "complete": found[2]}))
except Exception as error:
    result = Report(json.dumps({"root": None, "files": {}, "error": type(error).__name__}))
"""


@dataclass(frozen=True)
class Snapshot:
    """The files of the kernel's working folder at one moment: path → (size, mtime in ns)."""

    root: str | None
    files: dict[str, tuple[int, int]]
    complete: bool = True


def snapshot_scope(root: str | None) -> dict[str, Any]:
    """The globals :data:`SNAPSHOT_SOURCE` runs with."""
    return {
        "root": root,
        "MAX_DEPTH": MAX_DEPTH,
        "MAX_ENTRIES": MAX_ENTRIES,
        "SKIPPED_DIRS": SKIPPED_DIRS,
    }


def snapshot_expression(root: str | None) -> str:
    """One Python expression that evaluates to a snapshot's JSON text, adding nothing to the
    user's namespace (it runs :data:`SNAPSHOT_SOURCE` in a fresh globals dict)."""
    return (
        "(lambda g: (__import__('builtins').exec("
        + repr(SNAPSHOT_SOURCE)
        + ", g), g['result'])[1])("
        + repr(snapshot_scope(root))
        + ")"
    )


def parse_snapshot(text: str) -> Snapshot | None:
    """Read the JSON text of a snapshot; None when it is not one (another language's kernel)."""
    try:
        data = json.loads(text)
    except (TypeError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("files"), dict):
        return None
    files: dict[str, tuple[int, int]] = {}
    for path, stamp in data["files"].items():
        if (
            isinstance(path, str)
            and isinstance(stamp, list)
            and len(stamp) == 2
            and all(isinstance(part, int) and part >= 0 for part in stamp)
        ):
            files[path] = (stamp[0], stamp[1])
    root = data.get("root")
    return Snapshot(root if isinstance(root, str) else None, files, data.get("complete") is True)


def changed_files(before: Snapshot, after: Snapshot) -> list[dict[str, Any]]:
    """The files created or changed from ``before`` to ``after``, newest first, at most
    :data:`MAX_LISTED` (the protocol's ChangedFile). Notebooks that existed before are left out.
    """
    changed: list[tuple[int, dict[str, Any]]] = []
    for path, (size, mtime) in after.files.items():
        earlier = before.files.get(path)
        if earlier is None:
            if not before.complete:
                continue  # not looked at before: whether it is new is not known
            change = "created"
        elif earlier != (size, mtime):
            if path.endswith(".ipynb"):
                continue
            change = "modified"
        else:
            continue
        changed.append((mtime, {"path": path, "change": change, "size": size}))
    changed.sort(key=lambda item: (-item[0], item[1]["path"]))
    return [entry for _, entry in changed[:MAX_LISTED]]


class FileWatch:
    """One run's view of the kernel's working folder: a snapshot before its first cell runs,
    then, after each cell, the ``files`` event when the list of changed files is new.

    Never fails the run: a kernel that cannot say (another language, a snapshot that raised)
    gives no list; a kernel that died is the cell's status to report, not this.
    """

    def __init__(self, workspace: Workspace, emit: Callable[..., None]) -> None:
        self.workspace = workspace
        self._emit = emit
        self._first: Snapshot | None = None
        self._started = False
        self._pending: asyncio.Future[None] | None = None
        #: What a cell's own request may evaluate for the snapshot after it (once started).
        self.expression: str | None = None
        self.changed: list[dict[str, Any]] = []
        #: The latest snapshot taken (the first, then each one after a cell).
        self.latest: Snapshot | None = None

    async def start(self) -> None:
        """Take the first snapshot (once, before the run's first cell runs)."""
        if self._started:
            return
        self._started = True
        self.seed(await self._snapshot(None))

    def seed(self, first: Snapshot | None) -> None:
        """Take ``first`` as the snapshot before the run's first cell (one a caller already
        has: an outside agent's previous cell in the kernel left it), instead of asking."""
        self._started = True
        self._first = self.latest = first
        if first is not None:
            self.expression = snapshot_expression(first.root)

    @property
    def listed(self) -> list[str]:
        """The files of the first snapshot (paths relative to the kernel's working folder); []
        before :meth:`start`, or when the kernel could not say."""
        return sorted(self._first.files) if self._first is not None else []

    async def _check(self) -> None:
        """Compare the folder with the first snapshot; say the list when it changed."""
        if self._first is None:
            return
        self._compare(await self._snapshot(self._first.root))

    def after_cell(self, value: str | None) -> None:
        """After a cell: compare the snapshot its own request brought (the text of
        :attr:`expression`'s value), or start a check in the background when there is none."""
        now = parse_snapshot(value) if value is not None else None
        if now is None:
            self.check_soon()
        else:
            self._compare(now)

    def _compare(self, now: Snapshot | None) -> None:
        if self._first is None or now is None:
            return
        self.latest = now
        changed = changed_files(self._first, now)
        if changed != self.changed:
            self.changed = changed
            self._emit("files", files=changed)

    def check_soon(self) -> None:
        """Start :meth:`_check` in the background: the model's next call need not wait for it."""
        if self._first is not None and self._pending is None:
            self._pending = asyncio.ensure_future(self._check())

    async def settle(self, drop: bool = False) -> None:
        """Wait for the check :meth:`check_soon` started, if any; ``drop`` cancels it instead
        (the run was stopped, or its kernel or tab is gone: nothing to wait for)."""
        task, self._pending = self._pending, None
        if task is None:
            return
        if drop:
            task.cancel()
        await asyncio.wait({task})  # never raises the task's own cancel into this one
        if not task.cancelled():
            task.result()  # a bug of ours is raised, never lost

    async def _snapshot(self, root: str | None) -> Snapshot | None:
        try:
            return await self.workspace.snapshot_files(root)
        except JupyterCIError:
            return None
