"""``jupyter ci bench``: task loading, answer extraction and scoring, sampling, resuming, the suite,
and one end-to-end bench against the scripted model with real kernels."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest

from jupyter_ci.agent.suspicious import ANSWER_SYNTAX
from jupyter_ci.bench import runner
from jupyter_ci.bench.paired import fingerprint, pairing_problems, prompt_hashes, rerun_reason
from jupyter_ci.bench.report import percentile, render_report, summarize
from jupyter_ci.bench.runner import (
    EVEN_START,
    append_result,
    build_prompt,
    categorize,
    file_preview,
    notebook_texts,
    read_results,
    run_bench,
)
from jupyter_ci.bench.scoring import extract_answers, score, values_match
from jupyter_ci.bench.suite import build_suite, suite_questions
from jupyter_ci.bench.suite.checks import CHECKS, fixed
from jupyter_ci.bench.tasks import Task, TaskError, load_tasks, select_tasks
from jupyter_ci.cli import BenchApp
from jupyter_ci.errors import ConfigError
from jupyter_ci.settings import Settings
from jupyter_ci.testing import Reply, ScriptedModelServer

REPO = Path(__file__).resolve().parents[1]


def _dabench_dev() -> Path:
    """Where the dabench-dev data is (never in this repository: its licence is non-commercial):
    ``$JUPYTER_CI_DABENCH_DEV``, else ``../shared/data/dabench-dev`` next to the checkout, else
    the team machines' ``/work/shared/data/dabench-dev``."""
    given = os.environ.get("JUPYTER_CI_DABENCH_DEV")
    candidates = [Path(given)] if given else []
    candidates += [
        REPO.parent / "shared" / "data" / "dabench-dev",
        Path("/work/shared/data/dabench-dev"),
    ]
    return next(
        (path for path in candidates if (path / "questions.jsonl").is_file()), candidates[0]
    )


DABENCH_DEV = _dabench_dev()

FARES = "name,fare\nAnn,30.00\nBob,39.30\nCy,34.65\n"


def write_tasks(root: Path, tasks: list[dict[str, Any]], labels: list[dict[str, Any]]) -> Path:
    """A DABench-format directory with ``fares.csv`` as its only table."""
    (root / "tables").mkdir(parents=True)
    (root / "tables" / "fares.csv").write_text(FARES)
    (root / "questions.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    (root / "labels.jsonl").write_text("".join(json.dumps(x) + "\n" for x in labels))
    return root


def question(task_id: int, text: str, fmt: str) -> dict[str, Any]:
    return {
        "id": task_id,
        "question": text,
        "concepts": ["Summary Statistics"],
        "constraints": "Round to two decimal places.",
        "format": fmt,
        "file_name": "fares.csv",
        "level": "easy",
    }


TINY = [
    question(0, "Calculate the mean fare.", "@mean_fare[value] rounded to two decimals."),
    question(7, "How many passengers are there?", "@count[value] an integer."),
]
TINY_LABELS = [
    {"id": 7, "common_answers": [["count", "3"]]},  # labels need not be in question order
    {"id": 0, "common_answers": [["mean_fare", "34.65"]]},
]


# --- tasks -----------------------------------------------------------------------------------


def test_loads_the_dabench_format(tmp_path: Path) -> None:
    root = write_tasks(tmp_path / "t", TINY, TINY_LABELS)
    tasks = load_tasks(root)
    assert [task.id for task in tasks] == [0, 7]
    first = tasks[0]
    assert first.labels == (("mean_fare", "34.65"),)
    assert first.data_path == root / "tables" / "fares.csv"
    assert first.constraints == "Round to two decimal places."
    assert first.level == "easy"
    assert first.extra == {"concepts": ["Summary Statistics"]}
    prompt = build_prompt(first)
    for part in ("`fares.csv`", "Calculate the mean fare.", "Round to two", "@mean_fare[value]"):
        assert part in prompt
    # The file's header and first rows: exact column names and how values are written.
    assert "Its first lines:\nname,fare\nAnn,30.00\nBob,39.30\n\nQuestion:" in prompt


def test_file_preview_shows_the_head_of_text_files_only(tmp_path: Path) -> None:
    table = tmp_path / "t.csv"
    table.write_bytes(b"\xef\xbb\xbfa,b\r\n1," + b"x" * 300 + b"\r\n2,y\r\n3,z\r\n")
    assert file_preview(table) == "a,b\n1," + "x" * 197 + "…\n2,y"
    assert file_preview(table, lines=1) == "a,b"
    (tmp_path / "short.csv").write_text("only\n")
    assert file_preview(tmp_path / "short.csv") == "only"
    (tmp_path / "book.xlsx").write_bytes(b"PK\x03\x04\xff\xfe\x00binary")
    assert file_preview(tmp_path / "book.xlsx") == ""
    assert file_preview(tmp_path / "missing.csv") == ""
    assert file_preview(None) == ""
    task = Task(1, "q?", "", "@a[x]", "book.xlsx", data_path=tmp_path / "book.xlsx")
    assert "Its first lines" not in build_prompt(task)


def test_malformed_task_directories_say_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match=r"questions\.jsonl does not exist"):
        load_tasks(tmp_path)
    root = write_tasks(tmp_path / "a", TINY, TINY_LABELS[:1])
    with pytest.raises(TaskError, match="task 0 has no label"):
        load_tasks(root)
    root = write_tasks(tmp_path / "b", [{**TINY[0], "file_name": "gone.csv"}], TINY_LABELS)
    with pytest.raises(TaskError, match=r"gone\.csv is missing"):
        load_tasks(root)
    root = write_tasks(tmp_path / "c", [TINY[0], TINY[0]], TINY_LABELS)
    with pytest.raises(TaskError, match="duplicate id 0"):
        load_tasks(root)
    root = write_tasks(tmp_path / "d", TINY, TINY_LABELS)
    (root / "labels.jsonl").write_text("{not json\n")
    with pytest.raises(TaskError, match=r"labels\.jsonl:1: not valid JSON"):
        load_tasks(root)


def test_the_dabench_dev_set_loads_and_its_labels_are_extractable() -> None:
    if not (DABENCH_DEV / "questions.jsonl").is_file():
        pytest.skip(f"no dabench-dev data at {DABENCH_DEV} (set JUPYTER_CI_DABENCH_DEV)")
    tasks = load_tasks(DABENCH_DEV)
    assert len(tasks) == 159
    # Every label, printed in the answer format, is found again and scores correct.
    for task in tasks:
        line = ", ".join(f"@{name}[{value}]" for name, value in task.labels)
        assert score(extract_answers([line]), task.labels).correct, task.id


def test_sampling_is_deterministic_with_a_seed() -> None:
    tasks = [Task(i, f"q{i}", "", "@x[v]", "f.csv", labels=(("x", "1"),)) for i in range(50)]
    assert [t.id for t in select_tasks(tasks, 5, None)] == [0, 1, 2, 3, 4]
    first = select_tasks(tasks, 10, 42)
    assert [t.id for t in first] == [t.id for t in select_tasks(tasks, 10, 42)]
    assert [t.id for t in first] != list(range(10))
    assert [t.id for t in first] == sorted(t.id for t in first)  # the tasks' own order
    assert [t.id for t in select_tasks(tasks, 10, 43)] != [t.id for t in first]
    assert len(select_tasks(tasks, 500, 1)) == 50
    assert len(select_tasks(tasks, None, None)) == 50


# --- scoring ---------------------------------------------------------------------------------


def test_extracts_pairs_in_order_and_the_last_occurrence_wins() -> None:
    texts = [
        "mean: 34.6\n@mean_fare[ 34.60 ]\n",
        "'@count[3]'",  # the repr of a string result
        "Final answer: @mean_fare[34.65], @median[ 14.45] and @empty[]",
    ]
    assert extract_answers(texts) == {
        "count": "3",
        "mean_fare": "34.65",
        "median": "14.45",
        "empty": "",
    }
    assert extract_answers(["no answer here", "@ bad[1] @also bad[2] @x [3]"]) == {}


def test_scoring_rules() -> None:
    labels = [("mean_fare_elderly", "43.47"), ("mean_fare_child", "31.09")]
    both = {"mean_fare_child": "31.09", "mean_fare_elderly": "43.470", "extra": "1"}
    assert score(both, labels).correct  # order and extra names do not matter
    wrong = score({"mean_fare_child": "31.09", "mean_fare_elderly": "43.48"}, labels)
    assert (wrong.correct, wrong.wrong, wrong.answered) == (False, ("mean_fare_elderly",), True)
    missing = score({"mean_fare_child": "31.09"}, labels)
    assert (missing.correct, missing.missing) == (False, ("mean_fare_elderly",))
    assert not score({}, labels).answered
    assert not score({"x": "1"}, []).correct  # a task without labels is never correct
    # Numbers: the same value in another spelling matches; nothing is rounded for the answer.
    assert values_match("34.650", "34.65")
    assert values_match(" 35 ", "35.0")
    assert values_match("-0.00", "0.00")
    assert values_match("1e-5", "0.00001")
    assert not values_match("34.649", "34.65")
    assert not values_match("34.65%", "34.65")
    assert values_match("nan", " nan ")  # text, not a number: equal after stripping
    # Text: exact after stripping surrounding whitespace.
    assert values_match(" Not Normal ", "Not Normal")
    assert not values_match("not normal", "Not Normal")
    assert not values_match("1.0", "yes")


def test_categories() -> None:
    correct = score({"a": "1"}, [("a", "1")])
    wrong = score({"a": "2"}, [("a", "1")])
    none = score({}, [("a", "1")])
    assert categorize(correct, "failed", "max_attempts") is None
    assert categorize(wrong, "failed", "max_attempts") == "wrong_answer"
    assert categorize(none, "done", "answered") == "no_answer"
    assert categorize(none, "done", "max_steps") == "caps_hit"
    assert categorize(none, "failed", "max_attempts") == "caps_hit"
    assert categorize(none, "failed", "budget_exceeded") == "caps_hit"
    assert categorize(none, "failed", "model_error") == "model_error"
    assert categorize(none, "failed", "kernel_died") == "kernel_error"
    assert categorize(none, "failed", "kernel_error") == "kernel_error"
    assert categorize(none, "failed", "bad_code_block") == "other"


def test_notebook_texts_reads_generated_outputs_only(tmp_path: Path) -> None:
    notebook = nbformat.v4.new_notebook()
    mine = nbformat.v4.new_code_cell("x", metadata={"jupyter_ci": {"step": 1}})
    mine.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="@a[1]\n"),
        nbformat.v4.new_output("execute_result", data={"text/plain": "'@b[2]'"}, execution_count=1),
        nbformat.v4.new_output("error", ename="E", evalue="@c[3]", traceback=[]),
    ]
    theirs = nbformat.v4.new_code_cell("y")
    theirs.outputs = [nbformat.v4.new_output("stream", name="stdout", text="@d[4]")]
    notebook.cells = [theirs, mine]
    path = tmp_path / "n.ipynb"
    nbformat.write(notebook, str(path))
    assert extract_answers(notebook_texts(path)) == {"a": "1", "b": "2"}
    assert notebook_texts(tmp_path / "missing.ipynb") == []


# --- results, resume, summary ----------------------------------------------------------------


def record(task_id: int | str, correct: bool, seconds: float, **more: Any) -> dict[str, Any]:
    base = {
        "id": task_id,
        "level": "easy",
        "correct": correct,
        "category": None if correct else "wrong_answer",
        "attempts": 1,
        "cells": 1,
        "prompt_tokens": 100,
        "completion_tokens": 10,
        "seconds": seconds,
    }
    return {**base, **more}


def test_resume_skips_tasks_already_done(tmp_path: Path) -> None:
    tasks = [Task(i, f"q{i}", "", "@x[v]", "f.csv", labels=(("x", "1"),)) for i in range(4)]
    results = tmp_path / "results.jsonl"
    append_result(results, record(1, True, 1.0))
    with results.open("a") as stream:
        stream.write('{"id": 2, "corr')  # a line cut by a killed run
    ran: list[int | str] = []

    async def fake(task: Task, settings: Settings, out_dir: Path) -> dict[str, Any]:
        ran.append(task.id)
        return record(task.id, task.id == 0, 2.0)

    records = asyncio.run(run_bench(tasks, Settings(), tmp_path, resume=True, runner=fake))
    assert ran == [0, 2, 3]
    assert [r["id"] for r in records] == [0, 1, 2, 3]
    assert set(read_results(results)) == {"0", "1", "2", "3"}
    lines = results.read_text().splitlines()
    assert len(lines) == 5
    assert lines[1] == '{"id": 2, "corr'
    ran.clear()
    asyncio.run(run_bench(tasks, Settings(), tmp_path, resume=True, runner=fake))
    assert ran == []
    asyncio.run(run_bench(tasks[:1], Settings(), tmp_path, resume=False, runner=fake))
    assert ran == [0]


def test_summary_figures_and_report() -> None:
    records = [
        record(i, i < 3, float(i + 1), category=None if i < 3 else "caps_hit") for i in range(10)
    ]
    records[9]["prompt_tokens"] = 1000
    summary = summarize(records)
    assert (summary["n"], summary["correct"], summary["accuracy"]) == (10, 3, 0.3)
    assert summary["prompt_tokens"] == {"median": 100, "total": 1900}
    assert summary["seconds"] == {"median": 5.5, "p90": 9.0, "total": 55.0}
    assert summary["failures"]["caps_hit"] == 7
    assert summary["failures"]["wrong_answer"] == 0
    assert summary["by_level"] == {"easy": {"n": 10, "correct": 3}}
    assert (summary["rescued"], summary["lost"], summary["suspicious_answers"]) == (0, 0, 0)
    text = render_report(summary)
    assert "accuracy: 3/10 correct (30.0%)" in text
    assert "wall time per task: median 5.5 s, p90 9.0 s" in text
    assert "failures: wrong_answer 0, no_answer 0, caps_hit 7," in text
    assert percentile([], 0.9) == 0.0
    assert percentile([3.0], 0.9) == 3.0
    assert summarize([])["accuracy"] == 0.0


def test_rescued_lost_and_suspicious_answers_are_counted() -> None:
    def first(correct: bool) -> dict[str, Any]:
        return {"answers": {}, "correct": correct}

    records = [
        record(0, True, 1.0, first_attempt=first(False)),  # rescued
        record(1, True, 1.0, first_attempt=first(True)),
        record(2, False, 1.0, first_attempt=first(True)),  # lost
        record(3, False, 1.0, first_attempt=first(False), suspicious={"answer": ["NaN"]}),
        record(4, False, 1.0),  # an older record: no first attempt, no suspicious, no own fix
        record(5, True, 1.0, first_attempt=first(False), own_fixes=2),  # rescued
    ]
    summary = summarize(records)
    assert (summary["rescued"], summary["lost"], summary["suspicious_answers"]) == (2, 1, 1)
    assert summary["own_fixes"] == 2
    text = render_report(summary)
    assert "fixes jupyter-ci wrote itself: 2;" in text
    assert "rescued by the loop (first attempt wrong, final right): 2;" in text
    assert "lost (first attempt right, final wrong): 1" in text
    assert "suspicious final answers (NaN, inf, empty, a placeholder): 1" in text


# --- the builtin suite -----------------------------------------------------------------------


def test_builtin_suite_builds_about_20_labelled_tasks(tmp_path: Path) -> None:
    root = build_suite(tmp_path / "suite")
    tasks = load_tasks(root)
    assert 18 <= len(tasks) <= 25
    assert {str(q["id"]) for q in suite_questions()} == set(CHECKS)
    assert {task.file_name for task in tasks} == {"sales.csv", "sensors.csv", "students.csv"}
    for task in tasks:
        assert task.labels, task.id
        assert all(value for _, value in task.labels), task.id
        names = [name for name, _ in task.labels]
        assert all(f"@{name}[" in task.format for name in names), task.id
    # Deterministic: built again elsewhere, the same bytes.
    again = build_suite(tmp_path / "again")
    for name in ("questions.jsonl", "labels.jsonl", "tables/sales.csv", "tables/sensors.csv"):
        assert (root / name).read_bytes() == (again / name).read_bytes()
    missing = {task.id: task.labels for task in tasks}["sensors_missing_temperature"]
    assert int(missing[0][1]) > 0
    with pytest.raises(ValueError, match="rounding tie"):
        fixed(0.125, 2)
    assert fixed(0.1251, 2) == "0.13"


# --- end to end ------------------------------------------------------------------------------


def ci_bench(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER_CI_")}
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "jupyter", "ci", "bench", *args],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        env=environment,
        cwd=cwd,
    )


MEAN_CODE = (
    "import pandas as pd\ndf = pd.read_csv('fares.csv')\nprint(f'@mean_fare[{df.fare.mean():.2f}]')"
)
COUNT_CODE = "import pandas as pd\ndf = pd.read_csv('fares.csv')\nprint(f'@count[{len(df) + 1}]')"


def test_bench_end_to_end_with_the_scripted_model(tmp_path: Path) -> None:
    root = write_tasks(tmp_path / "tiny", TINY, TINY_LABELS)
    script = [
        Reply.code(MEAN_CODE, match=r"Question: Calculate the mean fare"),
        Reply.text("The mean fare is @mean_fare[34.65].", match=r"@mean_fare\[34\.65\]"),
        Reply.code("print(undefined_name)", match=r"Question: How many passengers"),
        # The first fix repeats the code that failed: not run, and counted in the record; it is
        # asked once more without an attempt, and keeps the line that failed (not run either,
        # and counted apart).
        Reply.code("print(undefined_name)", match=r"NameError"),
        Reply.code("print(undefined_name)\nprint(1)", match=r"NameError"),
        # The second replies without code: not run either, and counted apart.
        Reply.text("Check that the name is defined.", match=r"Take a different approach"),
        Reply.code(COUNT_CODE, match=r"Your reply had no code"),
        Reply.text("There are @count[4] passengers.", match=r"@count\[4\]"),
    ]
    out = tmp_path / "out"
    with ScriptedModelServer(script) as server:
        model = ("--model", "openai/scripted", "--api-base", server.base_url)
        # ResourceWarning shown: an HTTP client left open at exit would say so.
        warnings = {"PYTHONWARNINGS": "default"}
        result = ci_bench(
            str(root),
            *model,
            "--out",
            str(out),
            "--max-steps",
            "2",
            "--max-attempts",
            "4",
            # The long conversation's prompts, which the script matches (a fresh fix tells the
            # same tries in its account: tests/test_levers.py).
            "--no-fresh-fixes",
            cwd=tmp_path,
            env=warnings,
        )
        assert result.returncode == 0, result.stderr
        assert server.script.exhausted
        first_request = server.chat_requests[0].messages[-1]["content"]
    assert "`fares.csv`" in first_request
    assert "Its first lines:\nname,fare\nAnn,30.00\n" in first_request
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [line["id"] for line in lines] == [0, 7]
    mean, count = lines
    assert mean["correct"] is True
    assert mean["category"] is None
    assert mean["answers"] == {"mean_fare": "34.65"}
    assert mean["expected"] == {"mean_fare": "34.65"}
    assert (mean["state"], mean["reason"], mean["attempts"], mean["cells"]) == (
        "done",
        "answered",
        1,
        1,
    )
    assert mean["prompt_tokens"] > 0
    assert mean["completion_tokens"] > 0
    assert mean["seconds"] > 0
    assert count["correct"] is False
    assert count["category"] == "wrong_answer"
    assert count["answers"] == {"count": "4"}
    # The attempts used: the fix that kept the line that failed and the one without code used
    # 2 and 3.
    assert (count["attempts"], count["cells"]) == (4, 1)
    # Each try's code, so that what the retries did can be read afterwards.
    assert [(t["code"], t["status"], t["error"]) for t in count["tries"]] == [
        ("print(undefined_name)", "error", "NameError: name 'undefined_name' is not defined"),
        (COUNT_CODE, "ok", ""),
    ]
    assert count["tries"][0]["cell"] == count["tries"][1]["cell"]
    assert (mean["repeated_fixes"], count["repeated_fixes"]) == (0, 1)
    assert (mean["kept_failed_line"], count["kept_failed_line"]) == (0, 1)
    assert (mean["fixes_without_code"], count["fixes_without_code"]) == (0, 1)
    assert (mean["asked_once_more"], count["asked_once_more"]) == (0, 1)
    assert (mean["own_fixes"], count["own_fixes"]) == (0, 0)  # undefined_name: the model's
    assert mean["first_attempt"] == {"answers": {"mean_fare": "34.65"}, "correct": True}
    assert count["first_attempt"] == {"answers": {}, "correct": False}
    # One prompt size per model call; the conversation grows from call to call.
    assert (mean["model_calls"], count["model_calls"]) == (2, 6)
    for line in lines:
        calls = line["call_prompt_tokens"]
        assert len(calls) == line["model_calls"]
        assert sum(calls) == line["prompt_tokens"]
        assert calls == sorted(calls)
        assert calls[0] < calls[-1]
    for line in lines:
        notebook = nbformat.read(str(out / line["notebook"]), as_version=4)
        assert len(notebook.cells) == 1
        assert notebook.cells[0].outputs
    assert (out / "notebooks" / "0.ipynb").is_file()
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["n"], summary["correct"], summary["accuracy"]) == (2, 1, 0.5)
    assert summary["attempts_mean"] == 2.5  # (1 + 4) / 2
    assert (summary["repeated_fixes"], summary["fixes_without_code"]) == (1, 1)
    assert summary["kept_failed_line"] == 1
    assert summary["asked_once_more"] == 1
    assert (
        "fixes that repeated the failed code (not run): 1 (an earlier try's: 0), without code: 1,"
        " that kept the line that failed (not run): 1 (asked once more, without an attempt: 1);"
        " fixes jupyter-ci wrote itself: 0;" in result.stdout
    )
    assert summary["first_attempt_correct"] == 1
    assert summary["failures"]["wrong_answer"] == 1
    assert "accuracy: 1/2 correct (50.0%)" in result.stdout
    assert "failures: wrong_answer 1, no_answer 0" in result.stdout
    assert "first attempt only (a one-shot estimate): 1/2 correct" in result.stdout
    assert "[1/2] id=0 correct" in result.stderr
    assert "[2/2] id=7 wrong_answer" in result.stderr
    # Nothing but the bench's own lines: no kernel's encryption warning, no unclosed client.
    assert "without encryption" not in result.stderr
    assert "nclosed" not in result.stderr
    bench = json.loads((out / "bench.json").read_text())
    assert bench["task_ids"] == [0, 7]
    assert server.base_url not in json.dumps(bench)

    # A second run into the same directory needs --resume; with it, nothing runs again.
    again = ci_bench(str(root), "--model", "openai/scripted", "--out", str(out), cwd=tmp_path)
    assert again.returncode == 2
    assert "--resume" in again.stderr
    resumed = ci_bench(
        str(root), "--model", "openai/scripted", "--out", str(out), "--resume", cwd=tmp_path
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "accuracy: 1/2 correct (50.0%)" in resumed.stdout
    assert len((out / "results.jsonl").read_text().splitlines()) == 2


def test_bench_usage_and_configuration_errors_exit_2(tmp_path: Path) -> None:
    root = write_tasks(tmp_path / "tiny", TINY, TINY_LABELS)
    usage = ci_bench(cwd=tmp_path)
    assert usage.returncode == 2
    assert "usage: jupyter ci bench TASKS" in usage.stderr
    no_model = ci_bench(str(root), cwd=tmp_path)
    assert no_model.returncode == 2
    assert "No model is configured" in no_model.stderr
    missing = ci_bench(str(tmp_path / "nowhere"), "--model", "openai/x", cwd=tmp_path)
    assert missing.returncode == 2
    assert "questions.jsonl does not exist" in missing.stderr
    resume = ci_bench(str(root), "--model", "openai/x", "--resume", cwd=tmp_path)
    assert resume.returncode == 2
    assert "--resume needs --out" in resume.stderr
    review = ci_bench(str(root), "--model", "openai/x", "--review", cwd=tmp_path)
    assert review.returncode == 2
    assert "--mode auto" in review.stderr
    assert not (tmp_path / "bench-results").exists()


def test_bench_builtin_suite_sample_in_process(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [name for name in os.environ if name.startswith("JUPYTER_CI_")]:
        monkeypatch.delenv(name)
    out = tmp_path / "b"
    with ScriptedModelServer([Reply.text("I cannot tell.", times=None)]) as server:
        app = BenchApp()
        model = ["--model", "openai/scripted", "--api-base", server.base_url]
        app.initialize(["builtin", *model, "--limit", "2", "--sample-seed", "3", "--out", str(out)])
        assert app.run() == 0
        prompts = [request.messages[-1]["content"] for request in server.chat_requests]
    captured = capsys.readouterr()
    tasks = load_tasks(out / "suite")
    chosen = select_tasks(tasks, 2, 3)
    assert json.loads((out / "bench.json").read_text())["task_ids"] == [t.id for t in chosen]
    # An answer that is none (check_results, on by default) gets one more look: two requests
    # a task, the second asking for code.
    assert len(prompts) == 4
    for task, prompt in zip(chosen, prompts[::2], strict=True):
        assert f"Question: {task.question}" in prompt
    assert all(prompt.startswith("Your answer looks wrong:") for prompt in prompts[1::2])
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["n"], summary["correct"], summary["failures"]["no_answer"]) == (2, 0, 2)
    assert "accuracy: 0/2 correct (0.0%)" in captured.out
    assert f"[2/2] id={chosen[1].id} no_answer" in captured.err
    assert not list((out / "notebooks").glob("*.ipynb"))  # no cells, no notebook kept


# --- jobs ------------------------------------------------------------------------------------


def test_jobs_run_tasks_at_once_each_record_on_its_own_line(tmp_path: Path) -> None:
    tasks = [Task(i, f"q{i}", "", "@x[v]", "f.csv", labels=(("x", "1"),)) for i in range(7)]
    append_result(tmp_path / "results.jsonl", record(6, True, 1.0))  # done before: resumed
    running: list[int | str] = []
    most = 0
    three_at_once = asyncio.Event()
    ran: list[int | str] = []

    async def fake(task: Task, settings: Settings, out_dir: Path) -> dict[str, Any]:
        nonlocal most
        running.append(task.id)
        most = max(most, len(running))
        if len(running) == 3:
            three_at_once.set()
        # One task at a time would wait here forever: the timeout only turns that into a failure.
        await asyncio.wait_for(three_at_once.wait(), 30)
        running.remove(task.id)
        ran.append(task.id)
        return record(task.id, True, 1.0, padding="x" * 20000)  # long lines, written whole

    records = asyncio.run(run_bench(tasks, Settings(), tmp_path, resume=True, runner=fake, jobs=3))
    assert most == 3
    assert sorted(ran, key=int) == [0, 1, 2, 3, 4, 5]
    assert [r["id"] for r in records] == [0, 1, 2, 3, 4, 5, 6]
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    assert len(lines) == 7
    assert sorted(json.loads(line)["id"] for line in lines) == list(range(7))


def test_a_config_error_in_one_job_cancels_the_others(tmp_path: Path) -> None:
    tasks = [Task(i, f"q{i}", "", "@x[v]", "f.csv", labels=(("x", "1"),)) for i in range(4)]
    cancelled: list[int | str] = []
    never = asyncio.Event()

    async def fake(task: Task, settings: Settings, out_dir: Path) -> dict[str, Any]:
        if task.id == 1:
            raise ConfigError("The model is not configured.")
        try:
            await never.wait()
        except asyncio.CancelledError:
            cancelled.append(task.id)
            raise
        return record(task.id, True, 1.0)

    with pytest.raises(ConfigError):
        asyncio.run(run_bench(tasks, Settings(), tmp_path, runner=fake, jobs=3))
    assert sorted(cancelled, key=int) == [0, 2]
    assert not read_results(tmp_path / "results.jsonl")


# --- paired arms -----------------------------------------------------------------------------


def test_the_paired_rule_reruns_failures_and_suspicious_results_only(tmp_path: Path) -> None:
    ok = [{"cell": "c", "code": "x", "status": "ok"}]
    request = "Answer format: @mean[value] rounded."
    assert rerun_reason(None, tmp_path) == "no record in OUT"
    assert rerun_reason(record(1, True, 1.0), tmp_path) == "its record in OUT has no tries"
    assert rerun_reason(record(1, False, 1.0, tries=ok, reason="model_error"), tmp_path) == (
        "the run ended with model_error"
    )
    failed = [{"cell": "c", "code": "x", "status": "error"}, *ok]
    assert rerun_reason(record(1, True, 1.0, tries=failed), tmp_path) == "a cell ended error"
    # A wrong answer without a failure or anything suspicious runs the same: carried over.
    wrong = record(1, False, 1.0, tries=ok, answers={"mean": "3.5"}, reason="answered")
    assert rerun_reason(wrong, tmp_path, request) is None
    odd = {**wrong, "answers": {"mean": "nan"}}
    assert "an answer's value cannot be right" in str(rerun_reason(odd, tmp_path, request))
    placeholder = {**wrong, "answers": {"mean": "value"}}
    assert rerun_reason(placeholder, tmp_path, request) is not None
    # The final text not in the request's format (no answers read from it); no cell at all.
    unformatted = {**wrong, "answers": {}, "answer": "The result is @mean 3.5."}
    assert "request's format" in str(rerun_reason(unformatted, tmp_path, request))
    assert rerun_reason({**wrong, "tries": []}, tmp_path, request) == "no cell ran"
    # A generated cell's final outputs: an error printed and swallowed.
    notebook = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("try: ...", metadata={"jupyter_ci": {"step": 1}})
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="Error: no such column\n")]
    notebook.cells = [cell]
    (tmp_path / "notebooks").mkdir()
    nbformat.write(notebook, str(tmp_path / "notebooks" / "1.ipynb"))
    swallowed = {**wrong, "notebook": "notebooks/1.ipynb"}
    assert "an error was printed" in str(rerun_reason(swallowed, tmp_path, request))


def test_a_paired_arm_must_not_change_first_attempts() -> None:
    here = {
        "tasks": "/d",
        "settings": Settings(model="m").public_dict(),
        "fingerprint": fingerprint(),
    }
    same = json.loads(json.dumps(here))
    assert pairing_problems(same, here) == ([], [])
    # Options that act only after a failure may differ; the others may not.
    levers = {"max_attempts": 1, "fix_temperatures": "0.6,0.9", "fresh_fixes": True}
    fewer = {**here, "settings": {**here["settings"], **levers, "check_results": True}}
    assert pairing_problems(same, fewer) == ([], [])
    looking = {**here, "settings": {**here["settings"], "inspect_data": True}}
    assert pairing_problems(same, looking)[0] == [
        "--inspect-data is True here but False in OUT: it can change first attempts, so only a "
        "full arm measures it"
    ]
    hotter = {**here, "settings": {**here["settings"], "temperature": 0.5}}
    errors, _ = pairing_problems(same, hotter)
    assert errors == [
        "--temperature is 0.5 here but -1.0 in OUT: it can change first attempts, so only a "
        "full arm measures it"
    ]
    # A seed changes first attempts, unless both runs are at temperature 0 (greedy).
    seeded = {**here, "settings": {**here["settings"], "seed": 3}}
    assert pairing_problems(same, seeded)[0] == [
        "--seed is 3 here but -1 in OUT: it can change first attempts, so only a full arm "
        "measures it"
    ]
    greedy = {**same, "settings": {**same["settings"], "temperature": 0.0}}
    assert pairing_problems(greedy, {**seeded, "settings": {**greedy["settings"], "seed": 3}}) == (
        [],
        [],
    )
    # A setting an older run did not record had its default there.
    older = {**same, "settings": {k: v for k, v in same["settings"].items() if k != "timeout"}}
    assert pairing_problems(older, here) == ([], [])
    # Prompts: changed ones are refused; a run that did not record them is warned about.
    edited = json.loads(json.dumps(same))
    edited["fingerprint"]["prompts"]["system"] = "0" * 16
    errors, _ = pairing_problems(edited, here)
    assert errors == ["the prompts that write first attempts changed since OUT (system)"]
    unknown = {k: v for k, v in same.items() if k != "fingerprint"}
    errors, warnings = pairing_problems(unknown, here)
    assert errors == []
    assert "does not record the hashes of its prompts" in warnings[0]
    moved = {**same, "tasks": "/elsewhere"}
    assert pairing_problems(moved, here)[1] == ["OUT's tasks came from /elsewhere, these from /d"]


def test_a_paired_arm_compares_the_request_text_not_how_its_template_spells_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A constant moved into a field of the template (1817bb1: the answer syntax) leaves every
    # request the same, so a paired arm against a run from before it stays valid.
    hashes = prompt_hashes()
    text = runner.request_text()
    assert "{syntax}" not in text
    assert ANSWER_SYNTAX in text
    assert "{question}" in text
    monkeypatch.setattr(runner, "PROMPT", text)
    assert prompt_hashes() == hashes
    task = Task(3, "How many?", "", "@n[count]", "t.csv")
    assert build_prompt(task) == runner.request_text().format(
        file_name="t.csv", preview="", question="How many?", constraints="", format="@n[count]"
    )
    # A change to what the model reads is one.
    monkeypatch.setattr(runner, "PROMPT", text.replace("Compute", "Work out"))
    assert prompt_hashes()["bench"] != hashes["bench"]
    monkeypatch.setattr(runner, "CONSTANT_FIELDS", {"syntax": "@key=value"})
    monkeypatch.setattr(runner, "PROMPT", text.replace(ANSWER_SYNTAX, "{syntax}"))
    assert "@key=value" in build_prompt(task)
    assert prompt_hashes()["bench"] != hashes["bench"]


FOUR = [
    question(0, "Zero: the mean fare.", "@mean_fare[value]"),
    question(1, "One: the mean fare.", "@mean_fare[value]"),
    question(2, "Two: the mean fare.", "@mean_fare[value]"),
    question(3, "Three: the mean fare.", "@mean_fare[value]"),
]
FOUR_LABELS = [{"id": i, "common_answers": [["mean_fare", "34.65"]]} for i in range(4)]


def test_paired_arm_end_to_end_reruns_only_what_the_levers_can_change(tmp_path: Path) -> None:
    root = write_tasks(tmp_path / "four", FOUR, FOUR_LABELS)
    base, arm = tmp_path / "base", tmp_path / "arm"
    right = "print('@mean_fare[34.65]')"
    script = [
        Reply.code(right, match="Question: Zero"),  # right at once: carried over
        Reply.code("print(fare_mean)", match="Question: One"),  # fails, then fixed: re-run
        Reply.code(right, match="NameError"),
        Reply.code("print('@mean_fare[nan]')", match="Question: Two"),  # NaN: re-run
        Reply.code("print('@mean_fare[30.00]')", match="Question: Three"),  # wrong: carried
        Reply.text("Done.", times=None),
    ]
    with ScriptedModelServer(script) as server:
        model = ("--model", "openai/scripted", "--api-base", server.base_url)
        first = ci_bench(str(root), *model, "--out", str(base), cwd=tmp_path)
        assert first.returncode == 0, first.stderr
    assert "accuracy: 2/4 correct" in first.stdout
    # The arm: one attempt per cell (an option that acts after a failure), two tasks at once.
    script = [
        Reply.code("print(fare_mean)", match="Question: One"),
        Reply.code(right, match="Question: Two"),
        Reply.text("Done.", times=None),
    ]
    with ScriptedModelServer(script) as server:
        model = ("--model", "openai/scripted", "--api-base", server.base_url)
        paired = ("--paired-with", str(base), "--max-attempts", "1", "--jobs", "2")
        result = ci_bench(str(root), *model, "--out", str(arm), *paired, cwd=tmp_path)
        asked = sorted(
            re.search(r"Question: (\w+)", str(r.messages[-1]["content"])).group(1)  # type: ignore[union-attr]
            for r in server.chat_requests
            if "Question:" in str(r.messages[-1]["content"])
        )
    assert result.returncode == 0, result.stderr
    assert asked == ["One", "Two"]
    assert "paired with" in result.stderr
    assert "2 tasks to run, 2 carried over" in result.stderr
    records = {
        r["id"]: r for r in map(json.loads, (arm / "results.jsonl").read_text().splitlines())
    }
    assert {i: r["paired"] for i, r in records.items()} == {
        0: "carried",
        1: "rerun",
        2: "rerun",
        3: "carried",
    }
    assert records[1]["rerun_reason"] == "a cell ended error"
    assert records[2]["rerun_reason"].startswith("suspicious: an answer's value")
    assert (records[1]["correct"], records[2]["correct"]) == (False, True)
    # One's first try is OUT's; Two's is not (this model is not deterministic): it is said.
    assert (records[1]["first_try_as_in_out"], records[2]["first_try_as_in_out"]) == (True, False)
    assert (arm / "notebooks" / "0.ipynb").is_file()  # carried over with its record
    summary = json.loads((arm / "summary.json").read_text())
    assert (summary["n"], summary["correct"]) == (4, 2)
    assert summary["paired"]["rerun"] == 2
    assert summary["paired"]["carried"] == 2
    assert summary["paired"]["warnings"] == []
    assert summary["paired"]["first_tries_differ"] == 1
    assert "the first try of 1 re-run task(s) differs from OUT's" in result.stdout
    assert "paired with" in result.stdout
    assert "2 tasks re-run, 2 carried over" in result.stdout
    assert json.loads((arm / "bench.json").read_text())["paired_with"]["with"] == str(base)

    # Resumed, nothing runs again (no model is even reachable).
    again = ci_bench(
        str(root),
        "--model",
        "openai/scripted",
        "--api-base",
        "http://127.0.0.1:9/v1",
        "--out",
        str(arm),
        "--paired-with",
        str(base),
        "--resume",
        cwd=tmp_path,
    )
    assert again.returncode == 0, again.stderr
    assert len((arm / "results.jsonl").read_text().splitlines()) == 4

    # What changes first attempts is refused, before anything runs.
    hotter = ci_bench(
        str(root),
        "--model",
        "openai/scripted",
        "--out",
        str(tmp_path / "hot"),
        "--paired-with",
        str(base),
        "--temperature",
        "0.7",
        cwd=tmp_path,
    )
    assert hotter.returncode == 2
    assert "would not be valid: --temperature is 0.7 here" in hotter.stderr
    assert "Run a full arm" in hotter.stderr
    assert not (tmp_path / "hot").exists()
    nowhere = ci_bench(
        str(root),
        "--model",
        "openai/scripted",
        "--out",
        str(tmp_path / "x"),
        "--paired-with",
        str(tmp_path / "nothing"),
        cwd=tmp_path,
    )
    assert nowhere.returncode == 2
    assert "is not a bench run" in nowhere.stderr


def test_bench_records_the_levers_inspecting_and_looking_again(tmp_path: Path) -> None:
    root = write_tasks(tmp_path / "tiny", TINY[:1], TINY_LABELS)
    nan = "print('@mean_fare[nan]')"
    script = [
        # The model's first request comes after the inspecting cell ran, and shows it.
        Reply.code(
            nan, match=r"looked at the data the request names(.|\n)*fares: 3 rows x 2 columns"
        ),
        Reply.code(MEAN_CODE, match=r"its result looks wrong"),
        Reply.text("The mean fare is @mean_fare[34.65].", match=r"@mean_fare\[34\.65\]"),
    ]
    out = tmp_path / "out"
    with ScriptedModelServer(script) as server:
        levers = ("--inspect-data", "--check-results")
        model = ("--model", "openai/scripted", "--api-base", server.base_url)
        result = ci_bench(str(root), *model, *levers, "--out", str(out), cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert server.script.exhausted
    (line,) = [json.loads(text) for text in (out / "results.jsonl").read_text().splitlines()]
    assert line["correct"] is True
    assert line["inspected"] is True
    # The model's one cell, tried twice: the look is jupyter-ci's, counted in neither.
    assert (line["cells"], line["attempts"]) == (1, 2)
    # The first attempt is the model's first cell, not jupyter-ci's look at the data.
    assert line["first_attempt"] == {"answers": {"mean_fare": "nan"}, "correct": False}
    assert line["looked_again"] == 1
    assert line["suspicious"] == {"answer": [], "outputs": []}
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["rescued"], summary["looked_again"]) == (1, 1)
    assert "results that looked wrong, looked at again: 1" in result.stdout
    bench = json.loads((out / "bench.json").read_text())
    assert (bench["settings"]["inspect_data"], bench["settings"]["check_results"]) == (True, True)


def test_a_first_answer_without_code_is_the_first_attempt(tmp_path: Path) -> None:
    """The model answers at once, no cell run; check_results asks it to look again and its cell
    gets the answer right. A one-shot run would have ended on the first answer: that is the
    first attempt, however many cells came after it."""
    root = write_tasks(tmp_path / "tiny", TINY[:1], TINY_LABELS)
    script = [
        Reply.text("The mean fare is @mean_fare[12.00]."),
        Reply.code(MEAN_CODE, match=r"Your answer looks wrong"),
        Reply.text("Done."),
    ]
    out = tmp_path / "out"
    with ScriptedModelServer(script) as server:
        model = ("--model", "openai/scripted", "--api-base", server.base_url)
        result = ci_bench(str(root), *model, "--check-results", "--out", str(out), cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert server.script.exhausted
    (line,) = [json.loads(text) for text in (out / "results.jsonl").read_text().splitlines()]
    assert line["correct"] is True
    assert line["first_attempt"] == {"answers": {"mean_fare": "12.00"}, "correct": False}
    assert (line["cells"], line["looked_again"]) == (1, 1)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rescued"] == 1


def test_a_seeded_arm_sends_the_same_prompts_for_the_same_question(tmp_path: Path) -> None:
    """Kernel output reaches the model inside a marker whose id is random per run, and a
    missing file's facts name the working folder's path, a new temporary one per run. In a
    seeded arm both are the task's own, so two arms send the same fix prompt for the same
    failure (a sample at a fix's temperature then depends on the seed only); unseeded, they
    differ."""
    root = write_tasks(tmp_path / "tiny", TINY[:1], TINY_LABELS)

    def fix_prompt(out: str, *seed: str) -> str:
        script = [
            Reply.text("Hello! How can I help you today?", match=r"^\.$", times=None),
            Reply.code("open('fares_2020.csv')", match="Question:"),
            Reply.code(MEAN_CODE, match="FileNotFoundError"),
            Reply.text("The mean fare is @mean_fare[34.65].", times=None),
        ]
        with ScriptedModelServer(script) as server:
            model = ("--model", "openai/scripted", "--api-base", server.base_url)
            result = ci_bench(str(root), *model, *seed, "--out", str(tmp_path / out), cwd=tmp_path)
            assert result.returncode == 0, result.stderr
            requests = server.chat_requests
        # A seeded task starts with the even start, cut at its first words (llama.cpp then
        # begins every task from the same cached prompt); an unseeded one does not.
        evened = [r.messages == [dict(m) for m in EVEN_START] for r in requests]
        assert evened == [bool(seed), False, False, False][: len(requests)]
        fix = requests[2 if seed else 1]
        # The run's second request: the seed's next number (a prompt asked again differs).
        assert fix.body.get("seed") == (int(seed[1]) + 1 if seed else None)
        if seed:
            assert [r.body.get("seed") for r in requests[:2]] == [int(seed[1])] * 2
        text = json.dumps(fix.messages)
        assert "FileNotFoundError" in text
        assert "untrusted-data id=" in text
        assert re.search(r"files in the working folder \(/\S+jupyter-ci-bench-", text), text
        return text

    seeded = fix_prompt("a", "--seed", "1")
    assert fix_prompt("b", "--seed", "1") == seeded
    assert fix_prompt("c", "--seed", "2") != seeded  # another seed, another marker
    assert fix_prompt("d") != fix_prompt("e")  # unseeded: a random marker each run


def test_a_fix_that_goes_back_to_an_earlier_try_is_counted_apart(tmp_path: Path) -> None:
    root = write_tasks(tmp_path / "tiny", TINY[1:], TINY_LABELS)
    script = [
        Reply.code("print(undefined_name)", match="Question:"),
        Reply.code("print(other_name)", match="'undefined_name' is not defined"),
        # Back to try 1's code: not run, asked once more (free), then the code that runs.
        Reply.code("print(undefined_name)", match="'other_name' is not defined"),
        Reply.code(COUNT_CODE, match="'other_name' is not defined"),
        Reply.text("There are @count[4] passengers.", match=r"@count\[4\]"),
    ]
    out = tmp_path / "out"
    with ScriptedModelServer(script) as server:
        model = ("--model", "openai/scripted", "--api-base", server.base_url)
        result = ci_bench(str(root), *model, "--out", str(out), cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert server.script.exhausted
    (line,) = [json.loads(text) for text in (out / "results.jsonl").read_text().splitlines()]
    assert (line["repeated_fixes"], line["repeated_earlier"], line["asked_once_more"]) == (1, 1, 1)
    assert [t["code"] for t in line["tries"]] == [
        "print(undefined_name)",
        "print(other_name)",
        COUNT_CODE,
    ]
    assert "(not run): 1 (an earlier try's: 1)," in result.stdout
