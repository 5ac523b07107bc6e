"""``jupyter ci run`` and the Python API, end to end with a real kernel and the scripted model."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat

from jupyter_ci.api import run_notebook
from jupyter_ci.testing import Reply, ScriptedModelServer

from .loop_support import write_notebook

KEY = "sk-cli-secret-abcdef0123456789"


def ci_run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER_CI_")}
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "jupyter", "ci", "run", *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env=environment,
    )


def test_run_appends_cells_with_outputs_and_exits_0(tmp_path: Path) -> None:
    path = write_notebook(tmp_path / "a.ipynb", ["numbers = [3, 1, 2]"])
    script = [Reply.code("total = sum(numbers)\nprint(total)"), Reply.text("The total is 6.")]
    with ScriptedModelServer(script) as server:
        result = ci_run(
            str(path),
            "add up the numbers",
            "--model",
            "openai/scripted",
            "--api-base",
            server.base_url,
            "--restore",
            env={"JUPYTER_CI_API_KEY": KEY},
        )
        assert server.chat_requests[0].authorization_present
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "The total is 6."
    assert "jupyter-ci: done — 1 cell, 1 attempt" in result.stderr
    assert "running cell 1 (attempt 1/3)" in result.stderr
    notebook = nbformat.read(str(path), as_version=4)
    nbformat.validate(notebook)
    assert [cell.source for cell in notebook.cells] == [
        "numbers = [3, 1, 2]",
        "total = sum(numbers)\nprint(total)",
    ]
    assert notebook.cells[1].outputs[0]["text"] == "6\n"
    assert "jupyter_ci" in notebook.cells[1].metadata
    text = path.read_text()
    assert KEY not in text
    assert server.base_url not in text


def test_failed_task_exits_1_and_keeps_the_original_cells(tmp_path: Path) -> None:
    path = write_notebook(tmp_path / "b.ipynb", ["x = 1"])
    with ScriptedModelServer([Reply.code("1/0", times=None)]) as server:
        result = ci_run(
            str(path),
            "divide",
            "--model",
            "openai/scripted",
            "--api-base",
            server.base_url,
            "--max-attempts",
            "2",
        )
    assert result.returncode == 1, result.stderr
    assert "failed (the cell still failed at the last attempt)" in result.stderr
    assert "ZeroDivisionError" in result.stderr
    notebook = nbformat.read(str(path), as_version=4)
    assert notebook.cells[0].source == "x = 1"


def test_configuration_errors_exit_2_and_leave_the_file_alone(tmp_path: Path) -> None:
    path = write_notebook(tmp_path / "c.ipynb", ["x = 1"])
    before = path.read_bytes()
    no_model = ci_run(str(path), "anything")
    assert no_model.returncode == 2
    assert "No model is configured" in no_model.stderr
    bad_flag = ci_run(str(path), "anything", "--model", "openai/x", "--max-attempts", "0")
    assert bad_flag.returncode == 2
    assert "--max-attempts must be at least 1" in bad_flag.stderr
    usage = ci_run(str(path))
    assert usage.returncode == 2
    assert "usage: jupyter ci run NOTEBOOK" in usage.stderr
    assert path.read_bytes() == before


def test_python_api(tmp_path: Path) -> None:
    path = tmp_path / "new.ipynb"  # created by the run
    with ScriptedModelServer([Reply.code("y = 40 + 2"), Reply.text("y is 42")]) as server:
        outcome = run_notebook(
            path,
            "make y",
            options={"model": "openai/scripted", "api_base": server.base_url},
        )
    assert outcome.ok, outcome.error
    assert outcome.answer == "y is 42"
    notebook = nbformat.read(str(path), as_version=4)
    assert [cell.source for cell in notebook.cells] == ["y = 40 + 2"]
