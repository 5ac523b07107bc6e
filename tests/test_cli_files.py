"""``jupyter ci run`` and the Python API on files that are not plain notebooks: a symlink to a
notebook (locked as the notebook itself), a dangling symlink, a schema-invalid notebook (refused
before the model is called), a FIFO, ``/dev/zero`` and a file over the size cap (refused before
they are read). Each gets one line and exit code 2, and the file is left as it is."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from jupyter_ci.testing import Reply, ScriptedModelServer
from jupyter_ci.workspaces.notebook_file import MAX_NOTEBOOK_BYTES

from .loop_support import write_notebook

#: What a run may take of memory here: a file read without bound fails fast, not the machine.
MEMORY_LIMIT = 2 * 1024**3


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def ci_run(
    path: Path | str, server: ScriptedModelServer, *extra: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``jupyter ci run PATH "do it"`` against the scripted model, memory-limited."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER_CI_")}
    command = [sys.executable, "-m", "jupyter", "ci", "run", str(path), "do it"]
    return subprocess.run(
        [*command, "--model", "openai/scripted", "--api-base", server.base_url, *extra],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=environment,
        preexec_fn=_limited,
    )


def api_run(path: Path, server: ScriptedModelServer) -> subprocess.CompletedProcess[str]:
    """``run_notebook`` (the Python API) on ``path`` in a memory-limited process: prints the
    error it raised."""
    code = (
        "import sys\n"
        "from jupyter_ci.api import run_notebook\n"
        "try:\n"
        f"    run_notebook(sys.argv[1], 'do it', options={{'model': 'openai/scripted',"
        f" 'api_base': {server.base_url!r}}})\n"
        "except Exception as err:\n"
        "    print(f'{type(err).__name__}: {err.message}')\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        preexec_fn=_limited,
    )


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    """The single line a refused run prints (exit code 2, no traceback)."""
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("jupyter-ci: "), lines
    return lines[0]


def test_a_run_through_a_symlink_holds_the_notebooks_own_lock(tmp_path: Path) -> None:
    real = write_notebook(tmp_path / "real.ipynb", ["x = 1"])
    (tmp_path / "link.ipynb").symlink_to("real.ipynb")
    with ScriptedModelServer([]) as server:
        # The first run's cell (through the link) starts a second run on the file itself.
        second = (
            "import os, subprocess, sys\n"
            "env = {k: v for k, v in os.environ.items() if not k.startswith('JUPYTER_CI_')}\n"
            "done = subprocess.run([sys.executable, '-m', 'jupyter', 'ci', 'run', 'real.ipynb',"
            " 'zq-second-request', '--model', 'openai/scripted', '--api-base',"
            f" '{server.base_url}'],"
            " capture_output=True, text=True, env=env)\n"
            "print('second run exit', done.returncode)\n"
            "print(done.stderr.strip().splitlines()[-1])"
        )
        server.set_script(
            [
                Reply.code("from_second = 2", match="zq-second-request"),
                Reply.code(second, match="do it"),
                Reply.text("Done.", times=None),
            ]
        )
        result = ci_run(tmp_path / "link.ipynb", server, timeout=180)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "link.ipynb").is_symlink()
    notebook = nbformat.read(str(real), as_version=4)
    assert [cell.source for cell in notebook.cells] == ["x = 1", second]
    printed = notebook.cells[1].outputs[0]["text"]
    assert "second run exit 2" in printed
    assert "another jupyter-ci run is working on this notebook" in printed


def test_a_schema_invalid_notebook_is_refused_before_the_model_is_called(tmp_path: Path) -> None:
    path = write_notebook(tmp_path / "bad.ipynb", ["x = 1"])
    content = json.loads(path.read_text())
    content["cells"][0]["source"] = 5
    data = json.dumps(content)
    path.write_text(data)
    with ScriptedModelServer([Reply.code("print('ran')")]) as server:
        result = ci_run(path, server)
        api = api_run(path, server)
        assert server.chat_requests == []
    line = one_line(result)
    assert line.startswith(f"jupyter-ci: {path}: is not a valid notebook")
    refused = api.stdout.strip()
    assert refused.startswith("BadNotebookFile: "), api.stdout + api.stderr
    assert line.startswith("jupyter-ci: " + refused.removeprefix("BadNotebookFile: "))
    assert path.read_text() == data


def test_a_dangling_symlink_gets_one_line(tmp_path: Path) -> None:
    link = tmp_path / "gone.ipynb"
    link.symlink_to(tmp_path / "nowhere.ipynb")
    with ScriptedModelServer([Reply.code("print('ran')")]) as server:
        result = ci_run(link, server)
        assert server.chat_requests == []
    assert "symbolic link" in one_line(result)
    assert link.is_symlink()
    assert not (tmp_path / "nowhere.ipynb").exists()


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "too-big"])
def test_files_that_are_not_regular_or_too_big_are_refused_before_reading(
    tmp_path: Path, kind: str
) -> None:
    path = tmp_path / f"{kind}.ipynb"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    else:
        with open(path, "wb") as handle:  # sparse: no disk is used
            handle.truncate(MAX_NOTEBOOK_BYTES + 1)
    with ScriptedModelServer([Reply.code("print('ran')")]) as server:
        result = ci_run(path, server)
        api = api_run(path, server)
        assert server.chat_requests == []
    line = one_line(result)
    refused = api.stdout.strip()
    assert refused.startswith("BadNotebookFile: "), api.stdout + api.stderr
    assert line.startswith("jupyter-ci: " + refused.removeprefix("BadNotebookFile: "))
    if kind == "too-big":
        assert "larger than" in line
    else:
        assert "not a regular file" in line
