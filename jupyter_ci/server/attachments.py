"""Files the user attaches to a request: their path, and for tables their schema and first rows.

Only the head of a file is read (a data file may be gigabytes): CSV/TSV and text files up to
:data:`HEAD_BYTES`; Parquet through pyarrow's metadata when pyarrow is installed on the server.
Paths are relative to the server's root directory and must stay inside it.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

#: Bytes read from the start of a text file.
HEAD_BYTES = 64 * 1024
#: Rows shown of a table, and characters of one description.
SAMPLE_ROWS = 5
MAX_CHARS = 3000
#: Files up to this size get their lines counted (a full read).
COUNT_LINES_BELOW = 20 * 1024 * 1024

TABLE_SUFFIXES = {".csv": ",", ".tsv": "\t"}
TEXT_SUFFIXES = {".txt", ".json", ".md", ".py", ".yaml", ".yml", ".xml", ".log"}


class AttachmentError(ValueError):
    """The file cannot be attached (outside the root, missing, unreadable)."""


def resolve(root_dir: str | Path, path: str) -> Path:
    """The absolute path of ``path`` under ``root_dir``; refuses anything outside it."""
    if "\x00" in path:
        raise AttachmentError(f"{path!r} is not a file name (it holds a NUL character).")
    try:
        root = Path(root_dir).resolve()
        target = (root / path.lstrip("/")).resolve()
        if target != root and root not in target.parents:
            raise AttachmentError(f"{path} is outside the server's root directory.")
        if not target.is_file():
            raise AttachmentError(f"{path} is not a file.")
    except OSError as err:  # a name too long for the file system, a loop of links
        raise AttachmentError(f"{path[:200]} cannot be read: {err.strerror or err}.") from None
    return target


def describe(root_dir: str | Path, path: str, *, samples: bool = True) -> str:
    """A description of one attached file for the model (never raises: problems are said).

    Without ``samples`` (``share_outputs`` off) a table shows its columns but no rows, and a
    text file only its name and size.
    """
    try:
        target = resolve(root_dir, path)
        suffix = target.suffix.lower()
        if suffix in TABLE_SUFFIXES:
            text = _describe_table(target, path, TABLE_SUFFIXES[suffix], samples)
        elif suffix == ".parquet":
            text = _describe_parquet(target, path, samples)
        elif suffix in TEXT_SUFFIXES and samples:
            text = _describe_text(target, path)
        else:
            text = f"File: {path} ({_size(target)}); its contents are not shown."
    except (AttachmentError, OSError) as err:
        text = f"File: {path} could not be read: {err}"
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 20] + "\n[... cut ...]"


def describe_all(root_dir: str | Path, paths: list[str], *, samples: bool = True) -> str:
    """Descriptions of several attached files, separated by blank lines."""
    return "\n\n".join(describe(root_dir, path, samples=samples) for path in paths)


def _size(target: Path) -> str:
    size = float(target.stat().st_size)
    for unit in ("bytes", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"


def _head(target: Path) -> str:
    with target.open("rb") as stream:
        data = stream.read(HEAD_BYTES)
    text = data.decode("utf-8", errors="replace")
    if len(data) == HEAD_BYTES and "\n" in text:
        text = text[: text.rindex("\n")]  # drop the partial last line
    return text


def _line_count(target: Path) -> str:
    if target.stat().st_size > COUNT_LINES_BELOW:
        return ""
    with target.open("rb") as stream:
        count = sum(chunk.count(b"\n") for chunk in iter(lambda: stream.read(1 << 20), b""))
    return f", {count} lines"


def _describe_table(target: Path, path: str, delimiter: str, samples: bool) -> str:
    rows = list(csv.reader(io.StringIO(_head(target)), delimiter=delimiter))
    rows = [row for row in rows if row]
    kind = "CSV" if delimiter == "," else "TSV"
    header = f"File: {path} ({kind}, {_size(target)}{_line_count(target)})"
    if not rows:
        return f"{header}; empty."
    columns = rows[0]
    lines = [header, f"Columns ({len(columns)}): {', '.join(columns)}"]
    if samples:
        lines.append("First rows:")
        lines.extend(delimiter.join(row) for row in rows[1 : 1 + SAMPLE_ROWS])
    return "\n".join(lines)


def _describe_parquet(target: Path, path: str, samples: bool) -> str:
    header = f"File: {path} (Parquet, {_size(target)})"
    try:
        import pyarrow.parquet as pq  # type: ignore[import-not-found, import-untyped, unused-ignore]
    except ImportError:
        return f"{header}; its schema is not shown (pyarrow is not installed on the server)."
    parquet = pq.ParquetFile(str(target))
    schema = parquet.schema_arrow
    columns = [f"{field.name} ({field.type})" for field in schema]
    lines = [
        f"{header}, {parquet.metadata.num_rows} rows",
        f"Columns ({len(columns)}): {', '.join(columns)}",
    ]
    if samples and parquet.metadata.num_row_groups:
        table = parquet.read_row_group(0).slice(0, SAMPLE_ROWS).to_pylist()
        lines.append("First rows:")
        lines.extend(str(row) for row in table)
    return "\n".join(lines)


def _describe_text(target: Path, path: str) -> str:
    head = _head(target)
    lines = head.splitlines()[:40]
    return f"File: {path} ({_size(target)}); its beginning:\n" + "\n".join(lines)
