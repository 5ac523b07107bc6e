"""Bench tasks in the DABench format, and seeded samples of them.

A task directory holds:

- ``questions.jsonl``: one task a line: ``id``, ``question``, ``constraints``, ``format`` (the
  answer written as ``@name[value]``, possibly several), ``file_name`` (a table in ``tables/``),
  ``level`` (other keys, such as ``concepts``, are kept but not used);
- ``labels.jsonl``: ``id`` and ``common_answers``, a list of ``[name, value]`` pairs;
- ``tables/``: the data files the questions name.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class TaskError(ValueError):
    """A task directory is missing or malformed; the message says which file and line."""


@dataclass(frozen=True)
class Task:
    """One question with its data file and its labelled answer pairs."""

    id: int | str
    question: str
    constraints: str
    format: str
    file_name: str
    level: str = ""
    #: The labelled ``(name, value)`` pairs; every one must be matched for the task to count.
    labels: tuple[tuple[str, str], ...] = ()
    #: Where the data file is.
    data_path: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def key(self) -> str:
        """The id as a string (ids are numbers in DABench, names in our suite)."""
        return str(self.id)


def load_tasks(directory: str | Path) -> list[Task]:
    """Read the tasks of a DABench-format directory, in the order of ``questions.jsonl``.

    Every question needs a label and a data file; :class:`TaskError` says what is missing.
    """
    root = Path(directory)
    questions_path = root / "questions.jsonl"
    labels_path = root / "labels.jsonl"
    for required in (questions_path, labels_path):
        if not required.is_file():
            raise TaskError(
                f"{required} does not exist: a task directory holds questions.jsonl, "
                "labels.jsonl and tables/"
            )
    labels: dict[str, tuple[tuple[str, str], ...]] = {}
    for number, record in _read_jsonl(labels_path):
        try:
            pairs = tuple((str(name), str(value)) for name, value in record["common_answers"])
            labels[str(record["id"])] = pairs
        except (KeyError, TypeError, ValueError):
            raise TaskError(
                f"{labels_path}:{number}: expected id and common_answers [[name, value], ...]"
            ) from None
    tasks: list[Task] = []
    seen: set[str] = set()
    for number, record in _read_jsonl(questions_path):
        try:
            task_id = record["id"]
            file_name = str(record["file_name"])
            task = Task(
                id=task_id if isinstance(task_id, int) else str(task_id),
                question=str(record["question"]),
                constraints=str(record.get("constraints") or ""),
                format=str(record["format"]),
                file_name=file_name,
                level=str(record.get("level") or ""),
                labels=labels.get(str(task_id), ()),
                data_path=root / "tables" / file_name,
                extra={k: v for k, v in record.items() if k not in _KNOWN},
            )
        except KeyError as err:
            raise TaskError(f"{questions_path}:{number}: missing {err.args[0]!r}") from None
        if task.key in seen:
            raise TaskError(f"{questions_path}:{number}: duplicate id {task.id!r}")
        seen.add(task.key)
        if not task.labels:
            raise TaskError(f"{questions_path}:{number}: task {task.id!r} has no label")
        if task.data_path is None or not task.data_path.is_file():
            raise TaskError(f"{questions_path}:{number}: data file {task.data_path} is missing")
        tasks.append(task)
    return tasks


_KNOWN = {"id", "question", "constraints", "format", "file_name", "level"}


def _read_jsonl(path: Path) -> Iterable[tuple[int, dict[str, Any]]]:
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise TaskError(f"{path}:{number}: not valid JSON: {err}") from None
        if not isinstance(record, dict):
            raise TaskError(f"{path}:{number}: expected a JSON object")
        yield number, record


def select_tasks(tasks: Sequence[Task], limit: int | None, seed: int | None) -> list[Task]:
    """The tasks to run: the first ``limit`` tasks, or with ``seed`` a seeded random sample.

    A seeded sample is ``random.Random(seed).sample`` of the tasks (``limit`` of them, all when
    there is no limit), returned in the tasks' own order, so the same seed and limit always pick
    the same tasks from the same file.
    """
    count = len(tasks) if limit is None else min(limit, len(tasks))
    if seed is None:
        return list(tasks[:count])
    rng = random.Random(seed)  # noqa: S311 (a reproducible sample, not a secret)
    chosen = set(rng.sample(range(len(tasks)), count))
    return [task for index, task in enumerate(tasks) if index in chosen]
