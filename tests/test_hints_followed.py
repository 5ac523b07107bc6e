"""Every hint jupyter-ci prints works when followed: for each, a run that ends with the hint, then
the run again doing exactly what the hint says, which must succeed (``jupyter ci run``, a real
kernel, the scripted model). The no-model hint for a local server in JupyterLab is followed in
tests/lab/test_hints.py."""

from __future__ import annotations

import re
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from jupyter_ci.testing import Reply, ScriptedModelServer

from .loop_support import write_notebook
from .test_cli_run import ci_run


@pytest.fixture
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer([]) as server:
        yield server


def run(model: ScriptedModelServer, path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return ci_run(
        str(path), "do it", "--model", "openai/scripted", "--api-base", model.base_url, *options
    )


def raised_flag(stderr: str, hint: str) -> str:
    """The ``--flag`` the hint (``hint`` is a regex for its line) tells to raise or change."""
    match = re.search(hint, stderr)
    assert match, stderr
    flags = re.findall(r"--[a-z][a-z-]+", match.group(0))
    assert len(flags) == 1, match.group(0)
    return flags[0]


def test_raise_the_token_cap_that_stopped_the_run(
    model: ScriptedModelServer, tmp_path: Path
) -> None:
    cap, too_low, enough = "max_tokens_per_run", "300", "100000"
    path = write_notebook(tmp_path / "a.ipynb", [])
    script = [Reply.code("a = 1"), Reply.code("b = a + 1"), Reply.text("b is 2.")]
    model.set_script(script)
    first = run(model, path, f"--{cap.replace('_', '-')}", too_low)
    assert first.returncode == 1, first.stderr
    flag = raised_flag(first.stderr, r"Raise --[a-z-]+ to allow more\.")
    assert flag == f"--{cap.replace('_', '-')}"
    model.set_script(script)
    second = run(model, path, flag, enough)
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "b is 2."


def test_raise_the_timeout_that_interrupted_the_cell(
    model: ScriptedModelServer, tmp_path: Path
) -> None:
    path = write_notebook(tmp_path / "a.ipynb", [])
    slow = Reply.code("import time\ntime.sleep(2)\nprint('slept')", times=None)
    model.set_script([slow])
    first = run(model, path, "--timeout", "0.5", "--max-attempts", "1")
    assert first.returncode == 1, first.stderr
    flag = raised_flag(first.stderr, r"Raise --[a-z-]+, or ask for a faster approach\.")
    assert flag == "--timeout"
    model.set_script([Reply.code("import time\ntime.sleep(2)\nprint('slept')"), Reply.text("ok")])
    second = run(model, path, flag, "30", "--max-attempts", "1")
    assert second.returncode == 0, second.stderr


def test_review_mode_headless_says_to_use_auto_or_no_run(
    model: ScriptedModelServer, tmp_path: Path
) -> None:
    path = write_notebook(tmp_path / "a.ipynb", [])
    model.set_script([Reply.code("a = 1")])
    first = run(model, path, "--mode", "review")
    assert first.returncode != 0, first.stderr
    assert "Use --mode auto or --no-run here." in first.stderr
    model.set_script([Reply.code("a = 1"), Reply.text("Done.")])
    assert run(model, path, "--mode", "auto").returncode == 0
    model.set_script([Reply.code("b = 2")])
    assert run(model, path, "--no-run").returncode == 0


def test_make_a_read_only_notebook_writable(model: ScriptedModelServer, tmp_path: Path) -> None:
    path = write_notebook(tmp_path / "a.ipynb", ["x = 1"])
    path.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    first = run(model, path)
    assert first.returncode == 2, first.stderr
    assert "Make it writable (chmod u+w)" in first.stderr
    path.chmod(path.stat().st_mode | stat.S_IWUSR)  # chmod u+w, as the hint says
    model.set_script([Reply.code("y = 2"), Reply.text("Done.")])
    second = run(model, path)
    assert second.returncode == 0, second.stderr


def test_the_no_model_hint_of_jupyter_ci_run(model: ScriptedModelServer, tmp_path: Path) -> None:
    path = write_notebook(tmp_path / "a.ipynb", [])
    first = ci_run(str(path), "do it", env={"OPENAI_API_KEY": ""})
    assert first.returncode == 2, first.stderr
    hint = re.search(
        r"Add (--model \S+) .*with the key in (\w+) .*in this shell's environment", first.stderr
    )
    assert hint, first.stderr
    flag, variable = hint.group(1).split(), hint.group(2)
    model.set_script([Reply.code("x = 2 + 2"), Reply.text("x is 4.")])
    # Exactly that: the flag, and the key in that variable (OPENAI_BASE_URL stands in for
    # api.openai.com, pointing the OpenAI provider at the scripted model).
    env = {variable: "sk-followed-the-hint-0123", "OPENAI_BASE_URL": model.base_url}
    second = ci_run(str(path), "do it", *flag, env=env)
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "x is 4."
    assert model.chat_requests[0].authorization_present


def _kernel_notebook(sources: list[str]) -> str:
    """Run ``sources`` in a fresh kernel (nbclient: no JupyterLab, so %%ci runs in the kernel);
    the text the cells printed."""
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in sources]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    NotebookClient(notebook, timeout=120, kernel_name="python3").execute()
    return "".join(
        str(output.get("text", "")) for cell in notebook.cells for output in cell.outputs
    )


def test_the_no_model_hint_of_ci_in_a_kernel(
    model: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("JUPYTER_CI_MODEL", "JUPYTER_CI_API_KEY", "JUPYTER_CI_API_BASE", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    first = _kernel_notebook(["%load_ext jupyter_ci", "%%ci make x"])
    hint = re.search(
        r"run `(%ci --model \S+)`.*with the key in (\w+) .*the kernel starts with", first
    )
    assert hint, first
    line, variable = hint.group(1), hint.group(2)
    model.set_script([Reply.code("x = 2 + 2"), Reply.text("x is 4.")])
    # The key in the environment the kernel starts with (OPENAI_BASE_URL stands in for
    # api.openai.com), and the hint's %ci line.
    monkeypatch.setenv(variable, "sk-followed-the-hint-0123")
    monkeypatch.setenv("OPENAI_BASE_URL", model.base_url)
    second = _kernel_notebook(["%load_ext jupyter_ci", line, "%%ci make x"])
    assert "jupyter-ci: done" in second, second
    assert model.chat_requests[0].authorization_present
