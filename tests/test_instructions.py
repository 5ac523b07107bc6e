"""Project instructions: the AGENTS.md nearest the notebook and the instructions option, in the
system prompt, capped (the JupyterLab path and its Preview: tests/lab/test_instructions.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jupyter_ci.agent.instructions import (
    MAX_INSTRUCTIONS_CHARS,
    file_instructions,
    find_agents_file,
    project_instructions,
    server_instructions,
)
from jupyter_ci.api import run_notebook
from jupyter_ci.testing import Reply, ScriptedModelServer

from .loop_support import write_notebook


def test_the_nearest_agents_file_up_to_the_root_and_never_above(tmp_path: Path) -> None:
    root = tmp_path / "root"
    deep = root / "a" / "b"
    deep.mkdir(parents=True)
    (tmp_path / "AGENTS.md").write_text("above the root")
    assert find_agents_file(deep, root) is None
    (root / "AGENTS.md").write_text("at the root")
    assert find_agents_file(deep, root) == (root / "AGENTS.md").resolve()
    (root / "a" / "AGENTS.md").write_text("nearer")
    assert find_agents_file(deep, root) == (root / "a" / "AGENTS.md").resolve()
    assert find_agents_file(tmp_path, root) is None  # a folder outside the root: nothing
    text = server_instructions("Use polars, not pandas.", str(root), "a/b/n.ipynb")
    assert "From the configuration (instructions):\nUse polars, not pandas." in text
    assert "From a/AGENTS.md:\nnearer" in text
    assert "at the root" not in text
    assert "follow them where they apply" in text.lower()


def test_instructions_are_capped(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("x" * 20_000)
    text = project_instructions("", tmp_path, tmp_path)
    assert len(text) < MAX_INSTRUCTIONS_CHARS + 400
    assert "more characters not read]" in text
    assert project_instructions("", tmp_path / "none", tmp_path / "none") == ""


def test_the_model_gets_them_in_its_system_prompt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    (project / "notebooks").mkdir(parents=True)
    (project / "AGENTS.md").write_text("Plots use seaborn's whitegrid style.")
    monkeypatch.chdir(project)
    path = write_notebook(project / "notebooks" / "a.ipynb", [])
    assert "whitegrid" in file_instructions("", path)
    with ScriptedModelServer([Reply.text("Noted.")]) as server:
        outcome = run_notebook(
            path,
            "hello",
            options={
                "model": "openai/scripted",
                "api_base": server.base_url,
                "instructions": "Answer in French.",
            },
        )
        assert outcome.ok
        system = server.chat_requests[0].body["messages"][0]
    assert system["role"] == "system"
    assert system["content"].startswith("You are jupyter-ci")
    assert "From the configuration (instructions):\nAnswer in French." in system["content"]
    assert "From AGENTS.md:\nPlots use seaborn's whitegrid style." in system["content"]
