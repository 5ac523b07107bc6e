"""Which files a run's cells created or changed: the snapshot read in a kernel, the comparison,
and the ``files`` event of a run in a real kernel (headless workspace, scripted model)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jupyter_ci.agent.files import (
    MAX_LISTED,
    SNAPSHOT_SOURCE,
    Snapshot,
    changed_files,
    parse_snapshot,
    snapshot_expression,
    snapshot_scope,
)
from jupyter_ci.agent.states import RunState
from jupyter_ci.testing import Reply, ScriptedModelServer
from jupyter_ci.workspaces.kernel import KernelWorkspace

from .loop_support import Recorder, run_loop, write_notebook


def snapshot_of(root: Path) -> Snapshot:
    scope = snapshot_scope(str(root))
    exec(SNAPSHOT_SOURCE, scope)  # noqa: S102 - our own, fixed source
    found = parse_snapshot(repr(scope["result"]))
    assert found is not None
    return found


def test_the_snapshot_lists_files_to_its_depth_and_skips_hidden_folders_and_caches(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.csv").write_text("1,2\n")
    (tmp_path / "out" / "deep" / "deeper").mkdir(parents=True)
    (tmp_path / "out" / "b.png").write_bytes(b"png")
    (tmp_path / "out" / "deep" / "c.txt").write_text("c")
    (tmp_path / "out" / "deep" / "deeper" / "d.txt").write_text("too deep")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "m.pyc").write_bytes(b"x")
    (tmp_path / ".hidden").write_text("h")
    found = snapshot_of(tmp_path)
    assert sorted(found.files) == ["a.csv", "out/b.png", "out/deep/c.txt"]
    assert found.files["a.csv"][0] == 4
    assert found.complete
    assert found.root == str(tmp_path)


def test_changes_are_created_or_modified_newest_first_and_old_notebooks_are_left_out() -> None:
    before = Snapshot("/r", {"kept.txt": (1, 10), "edited.txt": (1, 10), "n.ipynb": (5, 10)})
    after = Snapshot(
        "/r",
        {
            "kept.txt": (1, 10),
            "edited.txt": (2, 30),
            "n.ipynb": (6, 40),
            "new.csv": (9, 20),
            "new.ipynb": (3, 50),
        },
    )
    assert changed_files(before, after) == [
        {"path": "new.ipynb", "change": "created", "size": 3},
        {"path": "edited.txt", "change": "modified", "size": 2},
        {"path": "new.csv", "change": "created", "size": 9},
    ]
    # A first look that stopped early cannot say what is new.
    partial = Snapshot("/r", {}, complete=False)
    assert changed_files(partial, after) == []
    many = Snapshot("/r", {f"f{i}.txt": (1, i) for i in range(MAX_LISTED + 10)})
    listed = changed_files(Snapshot("/r", {}), many)
    assert len(listed) == MAX_LISTED
    assert listed[0]["path"] == f"f{MAX_LISTED + 9}.txt"


def test_a_reply_that_is_not_a_snapshot_gives_none() -> None:
    assert parse_snapshot("") is None
    assert parse_snapshot("[]") is None
    assert parse_snapshot('{"files": 3}') is None
    odd = parse_snapshot('{"root": 1, "files": {"a": [1, 2], "b": "x", "c": [1, -2]}}')
    assert odd == Snapshot(None, {"a": (1, 2)}, False)


def test_the_expression_evaluates_to_a_snapshot_without_touching_the_namespace(
    tmp_path: Path,
) -> None:
    (tmp_path / "x.txt").write_text("x")
    namespace: dict[str, object] = {"keep": 1}
    text = eval(snapshot_expression(str(tmp_path)), {}, namespace)  # noqa: S307 - our own
    assert namespace == {"keep": 1}
    found = parse_snapshot(repr(text))
    assert found is not None
    assert list(found.files) == ["x.txt"]


@pytest.mark.asyncio
async def test_a_run_says_which_files_its_cells_created_or_changed(tmp_path: Path) -> None:
    (tmp_path / "data.txt").write_text("old")
    (tmp_path / "untouched.txt").write_text("same")
    code = (
        "open('data.txt', 'w').write('new and longer')\n"
        "import os\nos.makedirs('plots', exist_ok=True)\n"
        "open('plots/fig.svg', 'w').write('<svg/>')"
    )
    recorder = Recorder()
    workspace = await KernelWorkspace.open(write_notebook(tmp_path / "n.ipynb"))
    try:
        script = [Reply.code(code), Reply.code("print('nothing written')"), Reply.text("Done.")]
        with ScriptedModelServer(script) as server:
            outcome = await run_loop(workspace, server, "write files", recorder=recorder)
    finally:
        await workspace.close()
    assert outcome.state is RunState.DONE, outcome.error
    # Said once: the second cell changed nothing more.
    [event] = recorder.of("files")
    assert sorted((f["path"], f["change"], f["size"]) for f in event["files"]) == [
        ("data.txt", "modified", 14),
        ("plots/fig.svg", "created", 6),
    ]
    finished = [e["seq"] for e in recorder.of("execution_finished")]
    assert finished[0] < event["seq"] < finished[1]
