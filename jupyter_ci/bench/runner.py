"""Running bench tasks: one fresh temporary directory, notebook and kernel per task.

Each task's data file is copied into a new temporary directory, the agent is asked the question
there (through :func:`jupyter_ci.api.run_notebook_async`, with the bench's settings), the answer
is extracted from the generated cells' outputs and the final prose, and one JSON line is appended
to ``DIR/results.jsonl``. The notebook is kept as ``DIR/notebooks/<id>.ipynb``. A run can be
resumed: tasks that already have a line in ``results.jsonl`` are skipped.

Each record also holds ``first_attempt``: the answers found in the outputs of the first cell's
first execution only (or, when no cell ran, in the model's first prose reply) and whether they
were correct. That is what a one-shot run (``--max-attempts 1 --max-steps 1``) with the same
prompt would have produced when the model is deterministic (temperature 0): its first reply is
the same. The inspecting first cell (``inspect_data``) is jupyter-ci's, not the model's: the
first attempt is the first cell after it (and ``inspected`` says there was one), and neither
``attempts`` nor ``cells`` counts it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import re
import shutil
import string
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from ..agent.digest import error_line
from ..agent.inspect_first import INSPECT_HEADER
from ..agent.loop import (
    EARLIER_TRY_NOTICE,
    KEPT_LINE_NOTICE,
    NO_FIX_NOTICE,
    ONCE_MORE,
    SAME_CODE_NOTICE,
)
from ..agent.retries import LOOK_AGAIN_NOTICE
from ..agent.suspicious import ANSWER_SYNTAX, answer_concerns, output_concerns
from ..errors import ConfigError, exception_text
from ..settings import Settings
from .scoring import Score, extract_answers, score
from .tasks import Task

#: The failure categories, in report order (a correct task has none).
CATEGORIES = ("wrong_answer", "no_answer", "caps_hit", "model_error", "kernel_error", "other")

#: The notices of a fix that repeated a failed try of the cell (the last one or an earlier one).
REPEAT_NOTICES = (SAME_CODE_NOTICE, EARLIER_TRY_NOTICE)

#: Run end reasons that mean a cap stopped the agent.
CAP_REASONS = frozenset({"max_attempts", "max_steps", "budget_exceeded"})

PROMPT = """\
Answer a question about the data file `{file_name}` (in the current directory).
{preview}
Question: {question}
{constraints}
Answer format: {format}

Compute the answer with code, then print the final answer line with print(), exactly in that \
format (one {syntax} for each answer, values as the format asks). Then reply with that \
answer line."""

#: The fields of :data:`PROMPT` that are the same in every request (the others are the task's).
CONSTANT_FIELDS = {"syntax": ANSWER_SYNTAX}


def request_text() -> str:
    """:data:`PROMPT` with its constant fields written in and the task's fields left as
    ``{name}``: the text every request is made of, however the template spells its constants
    (what a paired arm compares, so that moving a constant into a field changes nothing)."""
    fields = {name: f"{{{name}}}" for _, name, _, _ in string.Formatter().parse(PROMPT) if name}
    return PROMPT.format(**{**fields, **CONSTANT_FIELDS})


#: Lines of the data file shown in the request (its header and first rows), and their width.
PREVIEW_LINES = 3
PREVIEW_WIDTH = 200


def file_preview(path: Path | None, lines: int = PREVIEW_LINES, width: int = PREVIEW_WIDTH) -> str:
    """The first ``lines`` lines of a text data file, each cut to ``width`` characters.

    A CSV file's header and first rows tell the model the exact column names and how values are
    written, which it would otherwise guess (``fare`` for ``Fare``). Empty for a missing or
    binary file.
    """
    if path is None or not path.is_file():
        return ""
    try:
        with path.open(encoding="utf-8-sig", newline="") as stream:
            head = [stream.readline() for _ in range(lines)]
    except (OSError, UnicodeDecodeError):
        return ""
    shown = [line.rstrip("\r\n") for line in head if line]
    shown = [line if len(line) <= width else line[: width - 1] + "…" for line in shown]
    return "\n".join(shown)


def build_prompt(task: Task) -> str:
    """The request the agent gets for ``task``: the data file's first lines, the question,
    constraints and answer format."""
    constraints = task.constraints.strip()
    preview = file_preview(task.data_path)
    return PROMPT.format(
        file_name=Path(task.file_name).name,
        preview=f"Its first lines:\n{preview}\n" if preview else "",
        question=task.question.strip(),
        constraints=f"Constraints: {constraints}\n" if constraints else "",
        format=task.format.strip(),
        **CONSTANT_FIELDS,
    )


def generated_outputs(path: Path) -> list[list[dict[str, Any]]]:
    """The outputs of each generated cell of a notebook file, in order ([] without the file)."""
    import nbformat

    if not path.is_file():
        return []
    notebook = nbformat.read(str(path), as_version=4)  # type: ignore[no-untyped-call]
    return [
        [dict(output) for output in cell.get("outputs", [])]
        for cell in notebook.cells
        if cell.cell_type == "code" and "jupyter_ci" in cell.get("metadata", {})
    ]


def notebook_texts(path: Path) -> list[str]:
    """The text outputs of the generated cells of a notebook file, in order.

    Stream text, and the ``text/plain`` of results and displays; tracebacks are left out.
    """
    return output_texts(generated_outputs(path))


def output_texts(cells: list[list[dict[str, Any]]]) -> list[str]:
    """The texts of :func:`notebook_texts` from the cells' outputs."""
    texts: list[str] = []
    for outputs in cells:
        for output in outputs:
            kind = output.get("output_type")
            if kind == "stream":
                texts.append(_joined(output.get("text", "")))
            elif kind in ("execute_result", "display_data"):
                texts.append(_joined(output.get("data", {}).get("text/plain", "")))
    return texts


def suspicious(
    answers: dict[str, str], outputs: list[list[dict[str, Any]]], request: str
) -> dict[str, list[str]]:
    """What looks wrong (:mod:`jupyter_ci.agent.suspicious`) in a task's final answers
    (``answer``) and in its generated cells' final outputs (``outputs``), described."""
    line = " ".join(f"@{name}[{value}]" for name, value in answers.items())
    in_outputs = [c for cell in outputs for c in output_concerns(cell, request)]
    return {
        "answer": [concern.describe() for concern in answer_concerns(line, request)],
        "outputs": list(dict.fromkeys(concern.describe() for concern in in_outputs)),
    }


def _joined(value: Any) -> str:
    if isinstance(value, list):
        return "".join(str(part) for part in value)
    return str(value)


def categorize(result: Score, state: str, reason: str) -> str | None:
    """The failure category of a task (None when correct).

    A wrong value for any labelled name is ``wrong_answer`` whatever the run's end; with no
    labelled name answered, the run's end decides: a cap (attempts, steps, tokens or cost) is
    ``caps_hit``, a model failure ``model_error``, a dead or unstartable kernel
    ``kernel_error``, a run that finished without the answer ``no_answer``, anything else
    ``other``.
    """
    if result.correct:
        return None
    if result.answered:
        return "wrong_answer"
    if reason in CAP_REASONS:
        return "caps_hit"
    if reason == "model_error":
        return "model_error"
    if reason in ("kernel_died", "kernel_error"):
        return "kernel_error"
    if state == "done":
        return "no_answer"
    return "other"


@contextlib.contextmanager
def task_folder(task: Task, seed: int) -> Iterator[Path]:
    """The new folder ``task`` runs in, removed after it: a random temporary one; in a seeded
    arm one named from the task and the seed, the same in every arm, since the kernel's facts
    tell the model its working folder's path (a missing file's)."""
    if seed < 0:
        with tempfile.TemporaryDirectory(prefix="jupyter-ci-bench-") as tmp:
            yield Path(tmp)
        return
    name = hashlib.sha256(f"folder\0{task.key}\0{seed}".encode()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / f"jupyter-ci-bench-{name}"
    shutil.rmtree(folder, ignore_errors=True)  # left by a bench that was killed
    folder.mkdir(mode=0o700)  # never one that is there still (a link: it fails)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def task_nonce(task: Task, seed: int) -> str | None:
    """The marker id of ``task``'s prompts in a seeded arm (None without a seed: a random one).

    Kernel output reaches the model inside ``<untrusted-data id=...>`` markers whose id is
    random per run. Two arms' prompts for the same question then differ by it, and at a fix's
    temperature a few different tokens give a different sample whatever the seed. The bench's
    questions and data are the repository's own, so a seeded arm derives the id from the task
    and the seed: the same prompts in every arm, until a lever changes them.
    """
    if seed < 0:
        return None
    return hashlib.sha256(f"{task.key}\0{seed}".encode()).hexdigest()[:16]


#: What a seeded arm sends before each task (:func:`even_start`): one word, whose prompt shares
#: only the chat template's first tokens with any task's.
EVEN_START = ({"role": "user", "content": "."},)


async def even_start(settings: Settings) -> None:
    """Before a task of a seeded arm: one short request, cut at its first words, so that every
    task starts from the same cached prompt on a server that reuses the previous request's
    prompt beginning (llama.cpp). Such a server evaluates the rest of the prompt in other
    batches after another task's prompt, and at temperature 0 that changed the same question's
    first attempt between two arms. A failure here is the task's to meet."""
    from ..models.litellm_model import LiteLLMModel

    model = LiteLLMModel.from_settings(settings, where="cli")
    began = asyncio.Event()
    reply = asyncio.ensure_future(model.complete(EVEN_START, on_text=lambda _: began.set()))
    waiting = asyncio.ensure_future(began.wait())
    await asyncio.wait({reply, waiting}, return_when=asyncio.FIRST_COMPLETED)
    for future in (reply, waiting):
        future.cancel()
    await asyncio.gather(reply, waiting, return_exceptions=True)


def safe_name(key: str) -> str:
    """A file name for a task id."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", key) or "task"


def read_results(path: Path) -> dict[str, dict[str, Any]]:
    """The records of ``results.jsonl`` by task id (the last line of an id wins).

    Lines that are not complete JSON objects (a run killed while writing) are ignored.
    """
    records: dict[str, dict[str, Any]] = {}
    if not path.is_file():
        return records
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and "id" in record:
            records[str(record["id"])] = record
    return records


def append_result(path: Path, record: dict[str, Any]) -> None:
    """Append one record as a JSON line (after a newline if the file ends without one)."""
    prefix = ""
    if path.is_file() and path.stat().st_size:
        with path.open("rb") as existing:
            existing.seek(-1, 2)
            if existing.read(1) != b"\n":
                prefix = "\n"
    with path.open("a", encoding="utf-8") as stream:
        stream.write(prefix + json.dumps(record, ensure_ascii=False) + "\n")
        stream.flush()


async def run_task(task: Task, settings: Settings, out_dir: Path) -> dict[str, Any]:
    """Run one task in a fresh directory, notebook and kernel; return its result record.

    Raises :class:`~jupyter_ci.errors.ConfigError` when the settings cannot work at all (the
    same error would end every task).
    """
    from ..api import run_notebook_async

    name = safe_name(task.key)
    request = build_prompt(task)
    kept = out_dir / "notebooks" / f"{name}.ipynb"
    kept.parent.mkdir(parents=True, exist_ok=True)
    if settings.seed >= 0:  # not in the task's time
        await even_start(settings)
    started = time.monotonic()
    state, reason, error, answer = "failed", "other", "", ""
    attempts, cells = 0, 0
    prompt_tokens = completion_tokens = 0
    estimated = False
    cost: float | None = None
    texts: list[str] = []
    outputs: list[list[dict[str, Any]]] = []
    first_digest: list[str] = []
    #: Prompt tokens of each model call (usage events carry the run's running totals).
    call_prompts: list[int] = []
    #: Each execution: the cell, the code that ran, how it ended and its error line (what the
    #: retries did).
    tries: list[dict[str, Any]] = []
    sources: dict[str, str] = {}
    first_prose: list[str] = []
    #: The model's first reply was a final answer without code, asked to look again
    #: (check_results): that answer is the first attempt's, whatever cells came after.
    answered_first = False
    #: Fixes that repeated the code of a failed try (``earlier``: of a try before the last)
    #: or had no code (the loop runs neither), and results that looked wrong, which the model
    #: was asked to look at again (check_results); fixes jupyter-ci wrote itself (own_fixes).
    repeated = earlier = without_code = looked_again = once_more = own = kept_line = 0
    #: The inspecting first cells (inspect_data): jupyter-ci's cells, not the model's attempts.
    inspecting: set[str] = set()

    def on_event(event: dict[str, Any]) -> None:
        nonlocal repeated, earlier, without_code, looked_again, once_more, own, kept_line
        nonlocal answered_first
        kind = event["type"]
        text = str(event.get("text") or "")
        if kind in ("cell_inserted", "cell_updated"):
            sources[str(event["cell_id"])] = str(event.get("source") or "")
            own += event.get("cause") == "own_fix"
            if kind == "cell_inserted" and sources[str(event["cell_id"])].startswith(
                INSPECT_HEADER
            ):
                inspecting.add(str(event["cell_id"]))
        elif kind == "execution_finished":
            cell_id = str(event["cell_id"])
            failed = event["status"] == "error"
            tries.append(
                {
                    "cell": cell_id,
                    "code": sources.get(cell_id, ""),
                    "status": event["status"],
                    "error": error_line(str(event.get("digest") or ""))[:200] if failed else "",
                }
            )
            # The first execution's outputs: what a one-shot run (one cell, one try) would have.
            if not first_digest and cell_id not in inspecting:
                first_digest.append(str(event.get("digest") or ""))
        elif kind == "message" and event.get("role") == "assistant":
            if not first_digest and not first_prose:
                first_prose.append(text)
        elif kind == "message" and text.startswith(
            (*REPEAT_NOTICES, NO_FIX_NOTICE, KEPT_LINE_NOTICE)
        ):
            repeated += text.startswith(REPEAT_NOTICES)
            kept_line += text.startswith(KEPT_LINE_NOTICE)
            earlier += text.startswith(EARLIER_TRY_NOTICE)
            without_code += text.startswith(NO_FIX_NOTICE)
            once_more += ONCE_MORE in text
        elif kind == "message" and ONCE_MORE in text:  # a result kept that cannot be right
            once_more += 1
        elif kind == "message" and text.startswith(LOOK_AGAIN_NOTICE):
            looked_again += 1
            if not first_digest:
                answered_first = True
        elif kind == "usage":
            total = int(event["usage"].get("prompt_tokens") or 0)
            call_prompts.append(total - sum(call_prompts))

    with task_folder(task, settings.seed) as work:
        if task.data_path is not None:
            shutil.copy2(task.data_path, work / Path(task.file_name).name)
        notebook = work / f"{name}.ipynb"
        try:
            outcome = await run_notebook_async(
                notebook,
                request,
                settings=settings,
                on_event=on_event,
                nonce=task_nonce(task, settings.seed),
            )
        except ConfigError:
            raise
        except Exception as exc:  # outside the loop: the kernel or the notebook file failed
            reason, error = "kernel_error", exception_text(exc)
        else:
            if outcome.reason == "config_error" and outcome.error is not None:
                raise outcome.error
            state, reason, answer = outcome.state.value, outcome.reason, outcome.answer
            error = str(outcome.error) if outcome.error is not None else ""
            # The model's: the inspecting cell (one execution) is jupyter-ci's.
            attempts = outcome.attempts - len(inspecting)
            cells = len(outcome.cells) - len(inspecting)
            prompt_tokens = outcome.usage.prompt_tokens
            completion_tokens = outcome.usage.completion_tokens
            estimated, cost = outcome.usage.estimated, outcome.usage.cost
        outputs = generated_outputs(notebook)
        texts = output_texts(outputs)
        if notebook.is_file():
            shutil.copy2(notebook, kept)
    answers = extract_answers([*texts, answer])
    result = score(answers, task.labels)
    # Without any cell of the model's before its first answer, that answer is the first
    # attempt's (a one-shot run would have ended there).
    if answered_first:
        first = extract_answers(first_prose[:1])
    elif first_digest:
        first = extract_answers(first_digest)
    else:
        first = extract_answers(first_prose[:1] if cells == 0 else [])
    return {
        "id": task.id,
        "level": task.level,
        "correct": result.correct,
        "category": categorize(result, state, reason),
        "answers": answers,
        "expected": dict(task.labels),
        "first_attempt": {"answers": first, "correct": score(first, task.labels).correct},
        "attempts": attempts,
        "cells": cells,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "model_calls": len(call_prompts),
        "call_prompt_tokens": call_prompts,
        "tokens_estimated": estimated,
        "cost": cost,
        "seconds": round(time.monotonic() - started, 3),
        "state": state,
        "reason": reason,
        "error": error,
        "answer": answer[:2000],
        "notebook": f"notebooks/{name}.ipynb" if kept.is_file() else None,
        "tries": tries,
        "repeated_fixes": repeated,
        "repeated_earlier": earlier,
        "fixes_without_code": without_code,
        "kept_failed_line": kept_line,
        "asked_once_more": once_more,
        "own_fixes": own,
        "looked_again": looked_again,
        "inspected": bool(inspecting),
        "suspicious": suspicious(answers, outputs, request),
    }


#: Runs one task: ``(task, settings, out_dir) → record``; replaceable in tests.
TaskRunner = Callable[[Task, Settings, Path], Awaitable[dict[str, Any]]]


class ProgressLine:
    """``[12/40] id=5 correct 23.1s`` lines on a stream (stderr) as tasks finish."""

    def __init__(self, stream: TextIO, total: int) -> None:
        self.stream = stream
        self.total = total
        self.done = 0

    def started(self, task: Task) -> None:
        """Say which task is running (on a terminal only, overwritten by its result)."""
        if self.stream.isatty():
            self.stream.write(f"[{self.done + 1}/{self.total}] id={task.key} running…\r")
            self.stream.flush()

    def finished(self, record: dict[str, Any]) -> None:
        """One line for a finished task."""
        self.done += 1
        verdict = "correct" if record["correct"] else str(record["category"])
        clear = "\x1b[2K" if self.stream.isatty() else ""
        self.stream.write(
            f"{clear}[{self.done}/{self.total}] id={record['id']} {verdict} "
            f"{record['seconds']:.1f}s\n"
        )
        self.stream.flush()


def _prepare(out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    return out_dir / "results.jsonl"


async def run_bench(
    tasks: Sequence[Task],
    settings: Settings,
    out_dir: Path,
    *,
    resume: bool = False,
    progress: ProgressLine | None = None,
    runner: TaskRunner | None = None,
    warm_up: Callable[[], Awaitable[Any]] | None = None,
    jobs: int = 1,
    carried: dict[str, dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Run ``tasks`` (skipping, with ``resume``, those already in ``results.jsonl``).

    ``carried`` are records taken as they are instead of running their tasks (a paired arm's,
    see :mod:`.paired`): written to ``results.jsonl`` first, unless it holds them already.
    ``jobs`` tasks run at once, each with its own directory, notebook and kernel; their records
    are appended as they finish, by this one event loop (never two writes at once). The first
    error that ends a task's runner (a configuration that cannot work) cancels the others.
    ``warm_up`` is awaited once before the first task runs (not at all when none is left), so
    one-time costs such as importing the model client are not counted in a task's time.
    Returns the records of all ``tasks``, earlier ones included, in the tasks' order.
    """
    results_path = _prepare(out_dir)
    done = read_results(results_path) if resume else {}
    for key, record in (carried or {}).items():
        if key not in done:
            append_result(results_path, record)
            done[key] = record
    todo = [task for task in tasks if task.key not in done]
    if progress is not None:
        progress.total = len(todo)
    run_one = runner or run_task
    if todo and warm_up is not None:
        await warm_up()
    waiting = iter(todo)

    async def work() -> None:
        for task in waiting:  # shared: each task is taken by one worker
            if progress is not None and jobs == 1:
                progress.started(task)
            record = await run_one(task, settings, out_dir)
            append_result(results_path, record)
            done[task.key] = record
            if progress is not None:
                progress.finished(record)

    workers = [asyncio.ensure_future(work()) for _ in range(max(1, min(jobs, len(todo))))]
    try:
        await asyncio.gather(*workers)
    except BaseException:
        for worker in workers:
            worker.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        raise
    return [done[task.key] for task in tasks if task.key in done]
