"""A first look at the data a request names, as a cell of the notebook (``inspect_data``).

Small models guess: a column's name, its type, how a date is written. When the request names a
data file in the kernel's folder, or a data frame whose rows no cell of the notebook shows, the
loop first adds and runs a cell that loads the file (or takes the frame) and shows its shape, its
columns with their types and its first rows; the model writes the next cell having seen them.
What it showed is told in the request's message, with the names of the frames it defined, and
never as a reply of the model's: given the look as its own code, a small model wrote it again.

It is a cell of the notebook, not a silent read (as the fix context is, :mod:`.fix_context`):
the look is what an analyst's first cell would be, the user sees exactly what the model saw, and
the frame it loads is there for the cells after it, in the notebook and on Run All; a silent
read would give the model facts the notebook does not hold. It starts with
:data:`INSPECT_HEADER` (so it reads as jupyter-ci's, and the bench can tell it from the model's
cells), it is a step of the run (within ``max_steps``), and with ``share_outputs`` off it shows
no rows: shape, columns and types only, which is what that setting lets the model see.

The rules (:func:`named_files`, :func:`named_frames`): a file counts when the request names its
path or its name, it exists in the kernel's working folder (the run's first files snapshot) and
its suffix is one of :data:`READERS`; a frame counts when the request names a variable that is a
data frame and no code cell that names it shows a table. At most :data:`MAX_ITEMS` of them.
"""

from __future__ import annotations

import builtins
import keyword
import re
from collections.abc import Iterable, Sequence
from pathlib import PurePosixPath

from .workspace import Cell, Variable

#: The first line of the inspecting cell.
INSPECT_HEADER = "# jupyter-ci: a first look at the data the request names"
#: Most files and frames one inspecting cell looks at.
MAX_ITEMS = 3
#: Rows shown of each (share_outputs on).
ROWS = 5
#: How pandas reads each kind of file the cell may load.
READERS = {
    ".csv": "pd.read_csv({path!r})",
    ".tsv": "pd.read_csv({path!r}, sep='\\t')",
    ".xlsx": "pd.read_excel({path!r})",
    ".xls": "pd.read_excel({path!r})",
    ".json": "pd.read_json({path!r})",
    ".jsonl": "pd.read_json({path!r}, lines=True)",
    ".parquet": "pd.read_parquet({path!r})",
    ".feather": "pd.read_feather({path!r})",
}
#: Names never taken for a loaded frame (common modules' usual names).
_TAKEN = frozenset({"pd", "np", "plt", "sns", "os", "sys", "re", "json", "math", "scipy", "df"})


def _mentions(request: str, word: str) -> bool:
    """Whether ``word`` occurs in ``request`` as a whole (not inside a longer name)."""
    return re.search(rf"(?<![\w.\-/]){re.escape(word)}(?![\w\-])", request) is not None


def named_files(request: str, files: Iterable[str]) -> list[str]:
    """The data files (paths relative to the kernel's folder) the request names, in its order."""
    found: list[tuple[int, str]] = []
    for path in files:
        pure = PurePosixPath(path)
        if pure.suffix.lower() not in READERS:
            continue
        for name in dict.fromkeys((path, pure.name)):
            match = re.search(rf"(?<![\w.\-/]){re.escape(name)}(?![\w\-])", request)
            if match is not None:
                found.append((match.start(), path))
                break
    # A name the request gives once counts once: the shallowest file of that name.
    chosen: dict[str, str] = {}
    for _, path in sorted(found, key=lambda item: (item[0], item[1].count("/"))):
        chosen.setdefault(PurePosixPath(path).name, path)
    return list(chosen.values())[:MAX_ITEMS]


def _shows_table(cell: Cell) -> bool:
    for output in cell.outputs:
        data = output.get("data") or {}
        html = data.get("text/html", "")
        html = "".join(html) if isinstance(html, list) else str(html)
        if 'class="dataframe"' in html:
            return True
    return False


def named_frames(request: str, variables: Sequence[Variable], cells: Sequence[Cell]) -> list[str]:
    """The data frames the request names whose rows no code cell naming them shows."""
    frames = [v.name for v in variables if v.columns is not None and _mentions(request, v.name)]
    unseen = [
        name
        for name in frames
        if not any(
            cell.cell_type == "code" and _mentions(cell.source, name) and _shows_table(cell)
            for cell in cells
        )
    ]
    return unseen[:MAX_ITEMS]


def frame_name(path: str, taken: Iterable[str]) -> str:
    """A variable name for the frame loaded from ``path``: its file name made an identifier,
    never a keyword, a builtin, a usual module name or a name already ``taken``."""
    stem = re.sub(r"\W+", "_", PurePosixPath(path).stem.lower()).strip("_") or "data"
    if stem[0].isdigit():
        stem = "data_" + stem
    used = set(taken) | _TAKEN
    name = stem
    while keyword.iskeyword(name) or hasattr(builtins, name) or name in used:
        name += "_data"
    return name


def inspection_code(
    files: Sequence[str], frames: Sequence[str], *, rows: bool, taken: Iterable[str] = ()
) -> str:
    """The inspecting cell's code: load each file into a frame, then show each frame's shape,
    columns with types and (with ``rows``) first rows."""
    shown = "shape, columns and types, first rows" if rows else "shape, columns and types"
    lines = [f"{INSPECT_HEADER} ({shown})", "import pandas as pd", ""]
    names: list[str] = []
    used = set(taken)
    for path in files:
        name = frame_name(path, used)
        used.add(name)
        reader = READERS[PurePosixPath(path).suffix.lower()].format(path=path)
        lines.append(f"{name} = {reader}")
        names.append(name)
    names.extend(frames)
    for name in names:
        lines.append(f'print(f"{name}: {{{name}.shape[0]}} rows x {{{name}.shape[1]}} columns")')
        lines.append(f"print({name}.dtypes.to_string())")
        if rows:
            lines.append(f"display({name}.head({ROWS}))")
    return "\n".join(lines)


def loaded_names(code: str) -> list[str]:
    """The names an inspecting cell's code shows (those it loads, and the frames it looks at)."""
    return re.findall(r'^print\(f"(\w+): ', code, re.MULTILINE)
