"""``jupyter ci run`` and the Python API, end to end with a real kernel and the scripted model."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import nbformat

from jupyter_ci.agent.loop import KEPT_NOTICE
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


def test_in_a_terminal_the_answer_shows_once(tmp_path: Path) -> None:
    """stdout and stderr on one terminal: the answer the progress printed is not printed again
    (piped, stdout has it: the test above)."""
    path = write_notebook(tmp_path / "a.ipynb", ["numbers = [3, 1, 2]"])
    script = [Reply.code("print(sum(numbers))"), Reply.text("The total is 6.")]
    environment = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER_CI_")}
    with ScriptedModelServer(script) as server:
        main, terminal = pty.openpty()
        model = ["--model", "openai/scripted", "--api-base", server.base_url]
        run = [sys.executable, "-m", "jupyter", "ci", "run", str(path), "add up", "--restore"]
        command = [*run, *model]
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=terminal, stderr=terminal, env=environment
        )
        os.close(terminal)
        shown = b""
        while True:
            try:
                chunk = os.read(main, 4096)
            except OSError:  # the terminal closed: the process ended
                break
            if not chunk:
                break
            shown += chunk
        os.close(main)
        assert process.wait(timeout=180) == 0, shown
    text = shown.decode()
    assert "jupyter-ci: done — 1 cell, 1 attempt" in text
    assert text.count("The total is 6.") == 1, text


def test_run_prints_no_kernel_encryption_warning_nor_unclosed_clients(tmp_path: Path) -> None:
    """ipykernel 7's "Kernel is running over TCP without encryption" (once per kernel started)
    and the HTTP clients litellm keeps, left open at exit ("Unclosed client session", an
    unclosed transport), are noise on the command's stderr."""
    path = write_notebook(tmp_path / "q.ipynb")
    script = [Reply.code("print(6 * 7)"), Reply.text("It is 42.")]
    with ScriptedModelServer(script) as server:
        model = ("--model", "openai/scripted", "--api-base", server.base_url)
        # ResourceWarning is ignored by default: shown, an unclosed session or socket says so.
        result = ci_run(str(path), "multiply", *model, env={"PYTHONWARNINGS": "default"})
    assert result.returncode == 0, result.stderr
    assert "It is 42." in result.stdout
    assert "without encryption" not in result.stderr
    assert "nclosed" not in result.stderr  # "Unclosed client session", "unclosed transport"


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
    # Each try's line says what went wrong (not the traceback's last frame).
    tries = re.findall(r"^  error in [\d.]+ s: (.*)$", result.stderr, re.M)
    assert tries == ["ZeroDivisionError: division by zero"], result.stderr
    notebook = nbformat.read(str(path), as_version=4)
    assert notebook.cells[0].source == "x = 1"


def test_configuration_errors_exit_2_and_leave_the_file_alone(tmp_path: Path) -> None:
    path = write_notebook(tmp_path / "c.ipynb", ["x = 1"])
    before = path.read_bytes()
    no_model = ci_run(str(path), "anything")
    assert no_model.returncode == 2
    assert "No model is configured" in no_model.stderr
    no_provider = ci_run(str(path), "anything", "--model", "gpt4o-mini")
    assert no_provider.returncode == 2
    assert "Use provider/model, e.g. openai/gpt-4o-mini." in no_provider.stderr
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


# --- what others wrote meanwhile, and files that cannot be run on ------------------------------

#: Generated code that plays "another program": it adds a cell to the notebook file and edits its
#: first cell while the run is going (as JupyterLab's autosave or a second tool would).
OTHER_WRITER = """\
import nbformat
nb = nbformat.read('shared.ipynb', as_version=4)
nb.cells[0].source = 'numbers = [5, 5]  # edited by someone else'
nb.cells.append(nbformat.v4.new_code_cell('added_meanwhile = True'))
nbformat.write(nb, 'shared.ipynb')
print('wrote')"""


def scripted_run(path: Path, script: list[Reply], *extra: str) -> subprocess.CompletedProcess[str]:
    with ScriptedModelServer(script) as server:
        return ci_run(
            str(path), "do it", "--model", "openai/scripted", "--api-base", server.base_url, *extra
        )


def test_cells_others_add_or_edit_during_the_run_are_kept(tmp_path: Path) -> None:
    path = write_notebook(tmp_path / "shared.ipynb", ["numbers = [3, 1, 2]", "y = 2"])
    result = scripted_run(path, [Reply.code(OTHER_WRITER), Reply.text("Done.")])
    assert result.returncode == 0, result.stderr
    assert "shared.ipynb changed during the run: the run's cells were merged in" in result.stderr
    notebook = nbformat.read(str(path), as_version=4)
    nbformat.validate(notebook)
    # The other writer's edit and its new cell are there, and the run's cell went after the
    # cell it followed (the last one when the run began), with its outputs.
    assert [cell.source for cell in notebook.cells] == [
        "numbers = [5, 5]  # edited by someone else",
        "y = 2",
        OTHER_WRITER,
        "added_meanwhile = True",
    ]
    assert notebook.cells[2].outputs[0]["text"] == "wrote\n"
    assert len({cell.id for cell in notebook.cells}) == 4


def test_a_second_run_on_the_same_notebook_is_refused_and_the_first_keeps_its_cells(
    tmp_path: Path,
) -> None:
    path = write_notebook(tmp_path / "busy.ipynb", ["x = 1"])
    # The first run's cell starts the second run and waits for it: they overlap for sure.
    second = (
        "import os, subprocess, sys\n"
        "env = {k: v for k, v in os.environ.items() if not k.startswith('JUPYTER_CI_')}\n"
        "done = subprocess.run([sys.executable, '-m', 'jupyter', 'ci', 'run', 'busy.ipynb', 'x',"
        " '--model', 'openai/x'], capture_output=True, text=True, env=env)\n"
        "print('second run exit', done.returncode)\n"
        "print(done.stderr.strip().splitlines()[-1])"
    )
    result = scripted_run(path, [Reply.code(second), Reply.text("Done.")])
    assert result.returncode == 0, result.stderr
    notebook = nbformat.read(str(path), as_version=4)
    assert [cell.source for cell in notebook.cells] == ["x = 1", second]
    printed = notebook.cells[1].outputs[0]["text"]
    assert "second run exit 2" in printed
    assert "another jupyter-ci run is working on this notebook" in printed


def test_a_read_only_notebook_is_not_run_nor_replaced(tmp_path: Path) -> None:
    path = write_notebook(tmp_path / "locked.ipynb", ["x = 1"])
    before = path.read_bytes()
    path.chmod(0o444)
    try:
        result = scripted_run(path, [Reply.code("y = 2"), Reply.text("Done.")])
        assert result.returncode == 2
        assert result.stderr.strip().splitlines()[-1] == (
            f"jupyter-ci: {path}: is read-only; nothing was run. "
            "Make it writable (chmod u+w) to let jupyter-ci add cells to it."
        )
        assert "Traceback" not in result.stderr
        assert path.read_bytes() == before
        assert oct(path.stat().st_mode & 0o777) == oct(0o444)
    finally:
        path.chmod(0o644)


def test_files_that_are_not_notebooks_get_one_clear_line(tmp_path: Path) -> None:
    cases = {
        "corrupt.ipynb": b'{"cells": [',
        "list.ipynb": b"[]",
        "empty-object.ipynb": b"{}",
        "binary.ipynb": bytes(range(256)),
    }
    for name, content in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        result = scripted_run(path, [Reply.code("y = 2")])
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2, (name, result.stderr)
        assert "Traceback" not in result.stderr, (name, result.stderr)
        assert lines[-1].startswith(f"jupyter-ci: {path}: is not a"), (name, lines)
        assert path.read_bytes() == content, name
    folder = tmp_path / "folder.ipynb"
    folder.mkdir()
    result = scripted_run(folder, [Reply.code("y = 2")])
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        f"jupyter-ci: {folder}: is a folder, not a notebook file"
    )
    assert "Traceback" not in result.stderr


def test_failed_fixes_of_a_result_put_back_the_version_that_ran(tmp_path: Path) -> None:
    """Headless, as in the tab: the NaN is looked at again (on by default), both fixes raise, and
    the file ends with the version that ran and its output; the progress says so, and calls
    only the model's fixes fixes."""
    path = write_notebook(tmp_path / "a.ipynb", ["numbers = [3, 1, 2]"])
    nan = "import math\nprint('mean:', math.nan)"
    script = [
        Reply.code(nan),
        Reply.code("print('mean:', numbers['x'])", match="its result looks wrong"),
        Reply.code("print('mean:', numbers.mean())", match="Try 2:"),
        Reply.text("The mean is NaN.", match=r"The cell ran \("),
    ]
    with ScriptedModelServer(script) as server:
        result = ci_run(
            str(path), "the mean", "--model", "openai/scripted", "--api-base", server.base_url
        )
    assert result.returncode == 0, result.stderr
    assert "jupyter-ci: done — 1 cell, 3 attempts" in result.stderr
    assert result.stderr.count("fix received") == 2
    assert f"notice: {KEPT_NOTICE}." in result.stderr
    cell = nbformat.read(str(path), as_version=4).cells[-1]
    assert cell.source == nan
    assert cell.outputs[0]["text"] == "mean: nan\n"
