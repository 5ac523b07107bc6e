"""Our own bench suite: about 20 questions over tables generated here, labels computed here.

:func:`build_suite` writes a DABench-format directory (``questions.jsonl``, ``labels.jsonl``,
``tables/``): the tables come from :mod:`.data` (fixed seeds, the standard library's
``random``, no downloaded data), the questions from ``tasks.jsonl`` next to this file, and each
label from the checker of its question in :mod:`.checks`, run on the CSV files just written, so
labels cannot drift from the data.
"""

from __future__ import annotations

import json
from pathlib import Path

from .checks import CHECKS
from .data import write_tables

TASKS_FILE = Path(__file__).with_name("tasks.jsonl")


def suite_questions() -> list[dict[str, object]]:
    """The suite's questions (without labels), in order."""
    lines = TASKS_FILE.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def build_suite(directory: str | Path) -> Path:
    """Write the suite as a DABench-format directory at ``directory``; return its path."""
    root = Path(directory)
    tables = root / "tables"
    tables.mkdir(parents=True, exist_ok=True)
    write_tables(tables)
    questions = suite_questions()
    labels = []
    for question in questions:
        check = CHECKS[str(question["id"])]
        pairs = check(tables / str(question["file_name"]))
        labels.append({"id": question["id"], "common_answers": [list(pair) for pair in pairs]})
    _write_jsonl(root / "questions.jsonl", questions)
    _write_jsonl(root / "labels.jsonl", labels)
    return root


def _write_jsonl(path: Path, records: list[dict[str, object]]) -> None:
    text = "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records)
    path.write_text(text, encoding="utf-8")
