"""The installed package: labextension, server extension and the ``jupyter ci`` command."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from jupyter_ci import __version__

ROOT = Path(__file__).resolve().parents[1]
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def jupyter(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jupyter", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_package_json_version_matches_python() -> None:
    package = json.loads((ROOT / "package.json").read_text())
    assert package["version"] == __version__
    assert package["name"] == "jupyter-ci"
    assert package["jupyterlab"]["outputDir"] == "jupyter_ci/labextension"


def test_labextension_is_installed_enabled_and_ok() -> None:
    result = jupyter("labextension", "list")
    text = ANSI.sub("", result.stdout + result.stderr)
    assert re.search(rf"jupyter-ci v{re.escape(__version__)} enabled\s+OK", text), text


def test_server_extension_is_enabled_by_default() -> None:
    result = jupyter("server", "extension", "list")
    text = ANSI.sub("", result.stdout + result.stderr)
    assert re.search(r"jupyter_ci\s+enabled", text), text
    assert re.search(rf"jupyter_ci {re.escape(__version__)}\s+OK", text), text


def test_jupyter_ci_command_version_and_help() -> None:
    version = jupyter("ci", "--version")
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == __version__
    helped = jupyter("ci", "--help")
    assert helped.returncode == 0, helped.stderr
    assert "config" in helped.stdout
    assert "--JupyterCI.max_attempts" in jupyter("ci", "--help-all").stdout


def test_jupyter_ci_config_resolves_flags_and_environment() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "jupyter", "ci", "config", "--max-attempts", "2", "--review"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**_clean_env(), "JUPYTER_CI_MODEL": "openai/from-env"},
    )
    assert result.returncode == 0, result.stderr
    assert "model: openai/from-env" in result.stdout
    assert "max_attempts: 2" in result.stdout
    assert "mode: review" in result.stdout


def test_jupyter_ci_config_rejects_a_bad_value() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "jupyter", "ci", "config"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**_clean_env(), "JUPYTER_CI_MAX_STEPS": "many"},
    )
    assert result.returncode == 2
    assert "JUPYTER_CI_MAX_STEPS" in result.stderr


def _clean_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER_CI_")}
