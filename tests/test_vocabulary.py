"""The words and rules Python and TypeScript share come from the schema and say what they should."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from jupyter_ci import magics, protocol, vocabulary
from jupyter_ci.agent.outcome import RunOutcome, end_words
from jupyter_ci.agent.states import RunState
from jupyter_ci.agent.workspace import Cell
from jupyter_ci.magics import allow_one_line_cell_magic
from jupyter_ci.models.base import TokenUsage
from jupyter_ci.workspaces.inkernel import current_input_number, history_cells
from jupyter_ci.workspaces.kernel import skip_ci_cells

ROOT = Path(__file__).resolve().parents[1]

CI_CELLS = ["%%ci plot", "%%ci", "%%ci\nplot the data", "\n  %%ci\tx", "%%ci --review x"]
NOT_CI_CELLS = ["%%cipher plot", "%%cix", "x = 1\n%%ci plot", "%ci --model x", "# %%ci", "%%CI x"]


@pytest.mark.parametrize("source", CI_CELLS)
def test_a_ci_cell_is_recognised(source: str) -> None:
    assert vocabulary.is_ci_cell(source)


@pytest.mark.parametrize("source", NOT_CI_CELLS)
def test_other_cells_are_not_taken_for_ci_cells(source: str) -> None:
    assert not vocabulary.is_ci_cell(source)


@pytest.mark.parametrize("source", CI_CELLS + NOT_CI_CELLS)
def test_every_python_place_that_recognises_a_ci_cell_uses_the_rule(source: str) -> None:
    is_ci = vocabulary.is_ci_cell(source)
    # The headless restore skips %%ci cells.
    assert skip_ci_cells(Cell("c1", "code", source)) is is_ci
    # The in-kernel loop leaves them out of the history it shows the model, and finds its own.
    shell = SimpleNamespace(history_manager=SimpleNamespace(input_hist_raw=["", "x = 1", source]))
    assert [block.source for block in history_cells(shell)] == ["x = 1"] + (
        [] if is_ci else [source.strip()]
    )
    assert current_input_number(shell) == (2 if is_ci else None)
    # The magic lets a one-line %%ci cell stand alone (IPython has removed blank lines first).
    if "\n" not in source.strip():
        line = source.strip()
        assert (allow_one_line_cell_magic([line]) != [line]) is is_ci


def test_the_labextension_applies_the_same_rule_to_the_same_cells() -> None:
    """The generated TypeScript pattern, run by Node, agrees with Python on every example."""
    protocol_ts = (ROOT / "labextension/src/protocol.ts").read_text()
    match = re.search(r"export const CI_CELL_PATTERN = new RegExp\((.*)\);", protocol_ts)
    assert match, "protocol.ts has no CI_CELL_PATTERN (run jlpm build:protocol)"
    sources = CI_CELLS + NOT_CI_CELLS
    script = (
        f"const p = new RegExp({match.group(1)});"
        f"console.log(JSON.stringify({json.dumps(sources)}.map(s => p.test(s))));"
    )
    result = subprocess.run(["node", "-e", script], capture_output=True, text=True, check=True)
    assert json.loads(result.stdout) == [vocabulary.is_ci_cell(s) for s in sources]


def test_every_end_reason_has_words_and_belongs_to_one_state() -> None:
    reasons = vocabulary.end_reasons()
    assert set(reasons) == {"done", "failed", "stopped"}
    flat = [reason for group in reasons.values() for reason in group]
    assert len(flat) == len(set(flat))
    assert set(vocabulary.reason_words()) == set(flat)


def test_the_status_line_uses_the_schemas_words() -> None:
    outcome = RunOutcome(
        "r", RunState.FAILED, "max_attempts", None, ["c1"], 3, TokenUsage(10, 5, None), 4.24
    )
    assert outcome.status_line() == (
        "jupyter-ci: failed (the cell still failed at the last attempt) — "
        "1 cell, 3 attempts, 15 tokens, cost unknown, 4.2 s"
    )
    assert end_words(RunState.DONE, "answered") == "done"
    assert end_words(RunState.STOPPED, "user") == "stopped by the user"
    assert end_words(RunState.STOPPED, "kernel_shutdown") == "stopped (the kernel was shut down)"


def test_the_kernel_sides_names_are_the_schemas() -> None:
    assert magics.JupyterCIHandoff.__name__ == vocabulary.constant("HandoffErrorName")
    assert magics.JupyterCIHeldBack.__name__ == vocabulary.constant("HeldBackErrorName")
    assert vocabulary.constant("HandoffMime") == protocol.HANDOFF_MIME
    assert protocol.PROTOCOL_VERSION == vocabulary.constant("ProtocolVersion") == 1
