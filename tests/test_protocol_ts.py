"""The TypeScript protocol types: generated from the schema, up to date, checked by samples."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "jupyter_ci" / "schema" / "protocol.schema.json"
GENERATED = ROOT / "labextension" / "src" / "protocol.ts"
GENERATOR = ROOT / "scripts" / "gen-protocol.mjs"
TIMEOUT = 120


def _tool(name: str) -> str:
    """The path of a command line tool, from PATH or next to this Python (the venv's bin)."""
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if found is None:
        pytest.fail(f"`{name}` was not found on PATH or next to {sys.executable}")
    return found


def _require_node_modules() -> None:
    if not (ROOT / "node_modules").is_dir():
        pytest.fail(f"{ROOT / 'node_modules'} is missing: run `jlpm install` in {ROOT}")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(args),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
        env={**os.environ, "FORCE_COLOR": "0", "NO_COLOR": "1"},
    )


def _output(result: subprocess.CompletedProcess[str]) -> str:
    return f"exit {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"


def test_check_protocol_passes() -> None:
    """protocol.ts matches the schema, and the typed samples compile and validate."""
    _require_node_modules()
    result = _run(_tool("jlpm"), "check:protocol")
    assert result.returncode == 0, _output(result)


def test_drift_check_fails_when_the_schema_changes(tmp_path: Path) -> None:
    """A schema change the committed file lacks is caught, with a message that says what to run."""
    _require_node_modules()
    node = _tool("node")
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))

    # The unchanged schema, from another directory, generates exactly the committed file.
    same = tmp_path / "same.schema.json"
    same.write_text(json.dumps(schema), encoding="utf-8")
    out = tmp_path / "same.ts"
    result = _run(node, str(GENERATOR), "--schema", str(same), "--out", str(out))
    assert result.returncode == 0, _output(result)
    assert out.read_text(encoding="utf-8") == GENERATED.read_text(encoding="utf-8")

    stop = schema["$defs"]["StopRunRequest"]
    stop["properties"]["reason"] = {"type": ["string", "null"]}
    stop["required"].append("reason")
    changed = tmp_path / "changed.schema.json"
    changed.write_text(json.dumps(schema), encoding="utf-8")

    out = tmp_path / "changed.ts"
    result = _run(node, str(GENERATOR), "--schema", str(changed), "--out", str(out))
    assert result.returncode == 0, _output(result)
    generated = out.read_text(encoding="utf-8")
    assert generated != GENERATED.read_text(encoding="utf-8")
    block = generated[generated.index("export interface IStopRunRequest {") :]
    block = block[: block.index("\n}")]
    assert "  reason: string | null;" in block

    result = _run(node, str(GENERATOR), "--check", "--schema", str(changed))
    assert result.returncode == 1, _output(result)
    assert "labextension/src/protocol.ts is out of date with" in result.stderr
    assert "run jlpm build:protocol" in result.stderr
    assert GENERATED.read_text(encoding="utf-8") != generated  # --check wrote nothing
