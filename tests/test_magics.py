"""``%load_ext jupyter_ci``, ``%ci`` and ``%%ci`` in a real IPython shell."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from jupyter_ci import __version__, magics

HEAVY = ("litellm", "openai", "tornado", "jupyter_server", "httpx", "ipywidgets")


@pytest.fixture
def shell(monkeypatch: pytest.MonkeyPatch) -> Iterator[InteractiveShell]:
    for name in ("MODEL", "API_BASE", "MAX_ATTEMPTS", "DISABLE", "API_KEY", "MODE", "PROGRESS"):
        monkeypatch.delenv(f"JUPYTER_CI_{name}", raising=False)
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "jupyter_ci")
    yield ip
    ip.run_line_magic("unload_ext", "jupyter_ci")
    InteractiveShell.clear_instance()


def run(ip: InteractiveShell, source: str) -> str:
    with capture_output() as captured:
        result = ip.run_cell(source)
    assert result.error_in_exec is None, result.error_in_exec
    return captured.stdout


def test_load_ext_is_light_in_a_fresh_process() -> None:
    code = (
        "import sys, json\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        f"heavy = {HEAVY!r}\n"
        "before = {m for m in heavy if m in sys.modules}\n"
        "ip = InteractiveShell.instance()\n"
        "ip.run_line_magic('load_ext', 'jupyter_ci')\n"
        "after = {m for m in heavy if m in sys.modules}\n"
        "print(json.dumps({'before': sorted(before), 'added': sorted(after - before),"
        " 'magics': sorted(ip.magics_manager.magics['cell'])}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["added"] == []
    assert "ci" in report["magics"]


def test_ci_shows_version_and_configuration(shell: InteractiveShell) -> None:
    out = run(shell, "%ci")
    assert f"jupyter-ci {__version__}" in out
    assert "model: not configured" in out
    assert "max_attempts: 3  (default)" in out


def test_ci_sets_session_settings(shell: InteractiveShell) -> None:
    out = run(shell, "%ci --model openai/test-model --max-attempts 2 --review")
    assert "model: openai/test-model" in out
    assert "max_attempts: 2  (%ci session settings)" in out
    assert "mode: review" in out
    assert "max_attempts: 2" in run(shell, "%ci")


def test_ci_refuses_bad_values_and_keeps_previous(shell: InteractiveShell) -> None:
    run(shell, "%ci --max-attempts 2")
    out = run(shell, "%ci --max-attempts zero")
    assert "--max-attempts expects a whole number" in out
    assert "max_attempts: 2" in run(shell, "%ci")


def test_ci_never_prints_key_or_endpoint(
    shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUPYTER_CI_API_KEY", "sk-secret-value-123")
    out = run(shell, "%ci --model openai/x --api-base http://127.0.0.1:9/v1")
    assert "sk-secret" not in out
    assert "127.0.0.1:9" not in out
    assert "api_base: set (custom endpoint)" in out
    assert "key, where %%ci runs in this kernel: found in JUPYTER_CI_API_KEY" in out


def test_ci_refuses_a_model_without_a_provider_and_says_what_to_write(
    shell: InteractiveShell,
) -> None:
    run(shell, "%ci --model openai/gpt-4o-mini")
    out = run(shell, "%ci --model gpt4o-mini")
    assert "The model 'gpt4o-mini' does not name a provider litellm knows" in out
    assert "Use provider/model, e.g. openai/gpt-4o-mini." in out
    assert "model: openai/gpt-4o-mini" in run(shell, "%ci")  # the previous one is kept
    out = run(shell, "%%ci --model gpt4o-mini plot the iris data\n")
    assert "Use provider/model, e.g. openai/gpt-4o-mini." in out


def test_cell_magic_without_model_says_what_to_set(shell: InteractiveShell) -> None:
    out = run(shell, "%%ci plot the iris data\n")
    assert "No model is configured" in out
    assert "JUPYTER_CI_MODEL" in out
    assert "%ci --model openai/gpt-4o-mini" in out


def test_cell_magic_leaves_dollar_and_braces_alone(shell: InteractiveShell) -> None:
    shell.user_ns["x"] = "EXPANDED"
    out = run(shell, "%%ci --bogus $x {x}\n")
    assert "unknown option --bogus" in out
    assert "EXPANDED" not in out


def test_cell_magic_empty_request(shell: InteractiveShell) -> None:
    assert "write a request after %%ci" in run(shell, "%%ci\n")


def test_cell_magic_off_switch(shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch) -> None:
    assert "is off" in run(shell, "%ci off")
    assert "nothing was done" in run(shell, "%%ci plot\n")
    run(shell, "%ci on")
    assert "No model is configured" in run(shell, "%%ci plot\n")
    monkeypatch.setenv("JUPYTER_CI_DISABLE", "1")
    assert "nothing was done" in run(shell, "%%ci plot\n")


def test_ci_help_lists_options(shell: InteractiveShell) -> None:
    out = run(shell, "%ci --help")
    assert "--max-attempts" in out
    assert "--no-run" in out
    assert "--progress auto|text|widgets" in out
    assert "JUPYTER_CI_PROGRESS" in out


def test_progress_is_a_session_switch(
    shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "progress: auto  (default)" in run(shell, "%ci")
    out = run(shell, "%ci --progress widgets --max-attempts 2")
    assert "progress: widgets  (%ci session settings)" in out
    assert "max_attempts: 2  (%ci session settings)" in out
    assert "progress: widgets" in run(shell, "%ci")
    out = run(shell, "%ci --progress sometimes")
    assert "--progress must be one of auto, text, widgets; got 'sometimes'" in out
    assert "progress: widgets" in run(shell, "%ci")
    run(shell, "%ci reset")
    monkeypatch.setenv("JUPYTER_CI_PROGRESS", "text")
    assert "progress: text  (the kernel's environment)" in run(shell, "%ci")
    monkeypatch.setenv("JUPYTER_CI_PROGRESS", "fancy")
    out = run(shell, "%%ci --model openai/x plot\n")
    assert "JUPYTER_CI_PROGRESS must be one of auto, text, widgets; got 'fancy'" in out


def test_cell_magic_refuses_an_unknown_progress_view(shell: InteractiveShell) -> None:
    out = run(shell, "%%ci --progress loud plot\n")
    assert "--progress must be one of auto, text, widgets; got 'loud'" in out


def test_cell_magic_without_litellm_says_what_to_install(
    shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    real = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None) -> object:
        return None if name == "litellm" else real(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    out = run(shell, "%%ci --model openai/x --api-base http://127.0.0.1:9/v1 plot\n")
    assert "needs litellm in this kernel's environment: %pip install jupyter-ci" in out


# --- the hold on a handed-off batch (Run All) --------------------------------------------------


class _Kernel:
    """The part of ipykernel's kernel the hold reads: the request being handled."""

    def __init__(self) -> None:
        self.parent: dict[str, Any] = {}

    def get_parent(self) -> dict[str, Any]:
        return self.parent


class _Shell:
    def __init__(self) -> None:
        self.kernel = _Kernel()
        self.input_transformers_cleanup: list[Any] = []


def _request(session: str, *, silent: bool = False, resume: bool = False) -> dict[str, Any]:
    return {
        "header": {"session": session, "msg_id": "m"},
        "content": {"code": "x = 1", "silent": silent},
        "metadata": {"jupyter_ci_resume": True} if resume else {},
    }


def _held(shell: _Shell, request: dict[str, Any]) -> bool:
    shell.kernel.parent = request
    lines = ["x = 1\n"]
    for transformer in list(shell.input_transformers_cleanup):
        lines = transformer(lines)
    return "JupyterCIHeldBack" in "".join(lines)


def test_a_handed_off_batch_is_held_until_jupyter_cis_own_first_request() -> None:
    shell = _Shell()
    magics.HoldBatch(shell, "tab-session").install()
    # The rest of the batch (same session) is held; other sessions and silent requests pass.
    assert _held(shell, _request("tab-session"))
    assert _held(shell, _request("tab-session"))
    assert not _held(shell, _request("console-session"))
    assert not _held(shell, _request("tab-session", silent=True))
    # The tab's mark of the batch's end (from any session) ends the hold, whatever the time.
    assert not _held(shell, _request("server-session", resume=True))
    assert shell.input_transformers_cleanup == []
    assert not _held(shell, _request("tab-session"))


def test_the_hold_ends_by_itself_when_no_tab_ends_it() -> None:
    now = [100.0]
    shell = _Shell()
    magics.HoldBatch(shell, "tab-session", clock=lambda: now[0]).install()
    assert _held(shell, _request("tab-session"))
    now[0] += magics.HOLD_LIMIT + 0.1
    assert not _held(shell, _request("tab-session"))
    assert shell.input_transformers_cleanup == []
