"""Numbers in options are finite, wherever an option is given: ``nan`` and ``inf`` parse as
floats, and ``nan`` passes any "at least" check, so ``timeout``, ``temperature`` and
``max_cost_per_run`` took them. Also ``%%ci --help`` prints the options, as ``%ci --help``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from jupyter_ci.config import environment_values
from jupyter_ci.errors import ConfigError
from jupyter_ci.options import option
from jupyter_ci.settings import Layer, resolve_settings

from .loop_support import write_notebook

FLOATS = ("timeout", "temperature", "max_cost_per_run")
NOT_FINITE = ("nan", "NaN", "inf", "-inf", "Infinity", float("nan"), float("inf"))


@pytest.mark.parametrize("name", FLOATS)
@pytest.mark.parametrize("raw", NOT_FINITE, ids=str)
def test_the_options_table_takes_no_nan_or_inf(name: str, raw: object) -> None:
    with pytest.raises(ValueError, match="expects a finite number"):
        option(name).coerce(raw)
    for trusted in (True, False):
        with pytest.raises(ConfigError, match="expects a finite number"):
            resolve_settings([Layer("this request", {name: raw}, trusted=trusted)])
    with pytest.raises(ConfigError, match="expects a finite number"):
        environment_values({option(name).env_var: str(raw)})


@pytest.fixture
def shell(monkeypatch: pytest.MonkeyPatch) -> Iterator[InteractiveShell]:
    for name in FLOATS:
        monkeypatch.delenv(option(name).env_var, raising=False)
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "jupyter_ci")
    yield ip
    ip.run_line_magic("unload_ext", "jupyter_ci")
    InteractiveShell.clear_instance()


def test_the_magic_takes_no_nan_or_inf_and_ci_cell_help_prints_the_options(
    shell: InteractiveShell,
) -> None:
    with capture_output() as line:
        shell.run_line_magic("ci", "--timeout nan")
    assert "--timeout expects a finite number, got 'nan'" in line.stdout
    with capture_output() as cell:
        shell.run_cell_magic("ci", "--temperature inf --model openai/x", "plot it")
    assert "--temperature expects a finite number, got 'inf'" in cell.stdout
    with capture_output() as line_help:
        shell.run_line_magic("ci", "--help")
    for source in ("%%ci --help", "%%ci -h", "%%ci --help\nplot it"):
        with capture_output() as cell_help:
            result = shell.run_cell(source)
        assert result.error_in_exec is None, source
        assert cell_help.stdout == line_help.stdout, source
    assert "--max-cost-per-run" in cell_help.stdout
    assert "unknown option" not in cell_help.stdout


def test_jupyter_ci_run_takes_no_nan_or_inf(tmp_path: Path) -> None:
    path = write_notebook(tmp_path / "a.ipynb", ["x = 1"])
    before = path.read_bytes()
    environment = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER_CI_")}
    cases = [
        (["--timeout", "nan"], {}, "--timeout"),
        (["--temperature", "inf"], {}, "--temperature"),
        ([], {"JUPYTER_CI_MAX_COST_PER_RUN": "nan"}, "--max-cost-per-run"),
    ]
    command = [sys.executable, "-m", "jupyter", "ci", "run", str(path), "go", "--model", "openai/x"]
    for flags, env, flag in cases:
        result = subprocess.run(
            [*command, *flags],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env={**environment, **env},
        )
        assert result.returncode == 2, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert f"{flag} expects a finite number" in lines[0], lines
    assert path.read_bytes() == before


def test_request_options_over_the_websocket_are_checked_the_same_way() -> None:
    """JSON from a tab may carry NaN and Infinity (Python's json reads them)."""
    request = json.loads('{"timeout": NaN, "temperature": Infinity}')
    with pytest.raises(ConfigError, match="expects a finite number"):
        resolve_settings([Layer("this request", request, trusted=False)])
