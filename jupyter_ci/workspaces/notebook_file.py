"""The notebook file of the headless workspace: loading with cell ids, writing atomically, and
keeping what others wrote to it while a run worked (a lock between runs, a merge on save).

Also the few nbformat constructors the workspace uses, typed (nbformat's own are not).
"""

from __future__ import annotations

import contextlib
import copy
import os
import secrets
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import nbformat

from ..errors import BadNotebookFile


def new_cell_id() -> str:
    """A fresh nbformat cell id (8 hex digits, as nbformat makes them)."""
    return uuid.uuid4().hex[:8]


def new_code_cell(source: str, metadata: dict[str, Any]) -> nbformat.NotebookNode:
    """An nbformat v4.5 code cell with an id."""
    return cast(
        nbformat.NotebookNode,
        nbformat.v4.new_code_cell(source=source, metadata=metadata),  # type: ignore[no-untyped-call]
    )


#: The largest notebook file jupyter-ci reads, in bytes (100 MB): a larger file is refused
#: before it is read (a notebook that size is mostly outputs; clear them first).
MAX_NOTEBOOK_BYTES = 100 * 1024**2


def load_notebook(path: Path) -> nbformat.NotebookNode:
    """The notebook at ``path`` as nbformat 4.5 with unique cell ids, or a new empty one.

    Older notebooks (4.0 to 4.4) are upgraded: cells without an id, or with one another cell
    already has, get a fresh id. The file is read as :func:`read_notebook_bytes` reads it.
    """
    if not path.exists():
        return cast(nbformat.NotebookNode, nbformat.v4.new_notebook())  # type: ignore[no-untyped-call]
    return with_cell_ids(_parsed(read_notebook_bytes(path)))


def read_notebook_bytes(path: Path) -> bytes:
    """The bytes of the notebook file at ``path`` (symlinks followed), read with a bound.

    Raises :class:`BadNotebookFile` with one sentence, before reading anything, for what is
    not a regular file (a FIFO would block for ever, ``/dev/zero`` never ends) and for a file
    larger than :data:`MAX_NOTEBOOK_BYTES`; ``FileNotFoundError`` when there is no file.
    """
    try:
        # Non-blocking: opening a FIFO must not wait for a writer (it is refused just after).
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise
    except OSError as err:
        raise BadNotebookFile(path, f"cannot be read ({err.strerror or err})") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise BadNotebookFile(
                path, f"is not a regular file ({_kind(info.st_mode)}); nothing was run"
            )
        too_big = BadNotebookFile(
            path,
            f"is larger than {MAX_NOTEBOOK_BYTES // 1024**2} MB, the most jupyter-ci reads; "
            "nothing was run",
            hint="Clear its outputs (Edit > Clear Outputs of All Cells), or run on a copy.",
        )
        if info.st_size > MAX_NOTEBOOK_BYTES:
            raise too_big
        data = handle.read(MAX_NOTEBOOK_BYTES + 1)
    if len(data) > MAX_NOTEBOOK_BYTES:
        raise too_big
    return data


def _parsed(data: bytes) -> nbformat.NotebookNode:
    """A notebook file's bytes as nbformat 4, not validated (nbformat.reads would log a
    schema error at length: :func:`check_notebook_file` says it in one sentence)."""
    notebook = nbformat.reader.reads(data.decode("utf-8"))  # type: ignore[no-untyped-call]
    return cast(nbformat.NotebookNode, nbformat.convert(notebook, 4))  # type: ignore[no-untyped-call]


def _kind(mode: int) -> str:
    """What a file that is not a regular one is, in words."""
    for test, word in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return word
    return "not a file"


def with_cell_ids(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """``notebook`` as nbformat 4.5, each cell with an id of its own (a cell without one, or
    with one another cell already has, gets a fresh id; the others keep theirs)."""
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


# --- the file while a headless run works on it ------------------------------------------------


def check_notebook_file(path: Path) -> bytes | None:
    """The notebook file's bytes as they are now (None when there is no file yet), or
    :class:`BadNotebookFile` with one sentence when it cannot be run on: a folder, a symbolic
    link to nothing, not a regular file or too large (:func:`read_notebook_bytes`), unreadable,
    not JSON, not a valid notebook (nbformat's schema, as the run would save it), or read-only.
    Nothing is changed either way, and nothing has run: this comes before the model is asked.
    """
    if path.is_symlink() and not path.exists():
        raise BadNotebookFile(
            path,
            f"is a symbolic link to {os.readlink(path)}, which does not exist",
            hint="Point the link at a notebook, or run on the notebook itself.",
        )
    if path.is_dir():
        raise BadNotebookFile(path, "is a folder, not a notebook file")
    if not path.exists():
        if not path.parent.is_dir():
            raise BadNotebookFile(path, f"its folder {path.parent} does not exist")
        return None
    data = read_notebook_bytes(path)
    try:
        nbformat.validate(with_cell_ids(_parsed(data)))
    except UnicodeDecodeError:
        raise BadNotebookFile(path, "is not a text file (not a notebook)") from None
    except Exception as err:  # nbformat's NotJSONError, ValidationError, KeyError, ...
        why = str(err).splitlines()[0][:200] if str(err) else type(err).__name__
        raise BadNotebookFile(path, f"is not a valid notebook ({why})") from None
    if not path.stat().st_mode & 0o222:
        raise BadNotebookFile(
            path,
            "is read-only; nothing was run",
            hint="Make it writable (chmod u+w) to let jupyter-ci add cells to it.",
        )
    return data


@contextlib.contextmanager
def exclusive_run(path: Path) -> Iterator[None]:
    """Hold the notebook's run lock (a file next to it) while the block runs.

    A second run on the same notebook meanwhile is refused at once with
    :class:`BadNotebookFile`: two runs writing one file would lose one's cells.
    """
    # The notebook itself, whatever symbolic links lead to it: one lock per file.
    real = Path(os.path.realpath(path))
    lock_path = real.with_name(f".{real.name}.jupyter-ci-lock")
    try:
        import fcntl
    except ImportError:  # Windows: no advisory locks here; runs are not serialised
        yield
        return
    with open(lock_path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BadNotebookFile(
                path,
                "another jupyter-ci run is working on this notebook",
                hint="Wait for it to finish, then run again.",
            ) from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
            with contextlib.suppress(OSError):
                lock_path.unlink()


def merge_run(
    disk: nbformat.NotebookNode,
    ours: nbformat.NotebookNode,
    run_cell_ids: list[str],
    anchor_id: str | None,
) -> nbformat.NotebookNode:
    """``disk`` (the file as another program left it) with the run's cells from ``ours``.

    Every cell of ``disk`` is kept as it is there (added or edited meanwhile); the run's cells, in
    their order in ``ours``, go after ``anchor_id`` (the cell they followed) or at the end when
    that cell is gone. A run cell whose id ``disk`` already has gets a fresh id.
    """
    wanted = set(run_cell_ids)
    generated = [copy.deepcopy(cell) for cell in ours.cells if cell.get("id") in wanted]
    merged = copy.deepcopy(disk)
    taken = {cell.get("id") for cell in merged.cells}
    for cell in generated:
        while cell.get("id") in taken:
            cell["id"] = new_cell_id()
        taken.add(cell["id"])
    ids = [cell.get("id") for cell in merged.cells]
    at = ids.index(anchor_id) + 1 if anchor_id in ids else len(ids)
    merged.cells[at:at] = generated
    return merged


def save_run(
    path: Path,
    original: bytes | None,
    ours: nbformat.NotebookNode,
    run_cell_ids: list[str],
    anchor_id: str | None,
) -> str:
    """Write the run's notebook to ``path``, keeping whatever others wrote there meanwhile.

    ``original`` is the file as the run found it. Unchanged since: ``ours`` replaces it. Changed:
    the run's cells are merged into the file's new version (:func:`merge_run`) and a note says
    so (returned). Changed into something that is not a notebook: nothing is written over it,
    the run's notebook goes to a new file next to it, and :class:`BadNotebookFile` says where.
    """
    try:
        current: bytes | None = read_notebook_bytes(path)
    except FileNotFoundError:
        current = None
    except BadNotebookFile:
        current = b""  # changed into something that is not a notebook file: written aside
    target = Path(os.path.realpath(path))
    if current == original:
        write_atomically(target, notebook_text(ours))
        return ""
    try:
        if current is None:
            raise ValueError("it was deleted")
        disk = with_cell_ids(_parsed(current))
    except Exception as err:
        aside = _free_name(path.with_name(f"{path.stem}.jupyter-ci{path.suffix or '.ipynb'}"))
        write_atomically(aside, notebook_text(ours))
        raise BadNotebookFile(
            path,
            f"changed during the run and cannot be read now ({err}); it was left as it is and "
            f"the run's notebook was written to {aside}",
        ) from None
    write_atomically(target, notebook_text(merge_run(disk, ours, run_cell_ids, anchor_id)))
    return (
        f"{path.name} changed during the run: the run's cells were merged in after the cell they "
        "follow, and the cells others added or edited were kept."
    )


def _free_name(path: Path) -> Path:
    """``path``, or ``name (2).ipynb``, ``name (3).ipynb``, ... if it exists: never overwrite."""
    candidate, number = path, 1
    while candidate.exists():
        number += 1
        candidate = path.with_name(f"{path.stem} ({number}){path.suffix}")
    return candidate
