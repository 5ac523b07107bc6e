"""An outside agent (the MCP SDK's own client, over Streamable HTTP) working in a notebook open in
real JupyterLab in Chromium: the cells appear and run in the page, carry a badge naming the
agent, show its status and Stop while they run, are saved, and are runs of the notebook's
conversation; review mode waits for the user's Run or Reject in the notebook."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from ..saved_files import whole_notebook
from .chat import PANEL, open_chat
from .lab import ARTIFACTS, Lab
from .mcp_agent import Agent, agent
from .notebooks import (
    cells,
    command,
    dump,
    frames,
    open_lab_app,
    open_notebook,
    panel,
    text_of,
    wait_until,
    write_notebook,
)
from .test_lab_runs import REAL_TIME_COLLABORATION
from .test_notebook_flows import cell_review, waiting_cell
from .test_reload import reload_lab

THEMES = {"light": "JupyterLab Light", "dark": "JupyterLab Dark"}
#: JavaScript: whether the notebook at ``path`` has unsaved changes.
DIRTY = (
    "(path) => Array.from(window.jupyterapp.shell.widgets('main'))"
    ".find(w => w.context && w.context.path === path).context.model.dirty"
)


def cell_of(found: list[dict[str, Any]], cell_id: str) -> dict[str, Any]:
    """The cell with that id."""
    return next(c for c in found if c["id"] == cell_id)


def open_for_the_agent(page: Any, lab: Lab, client: Agent, path: str) -> Any:
    """Open the notebook in the page and wait until the server knows the tab has it open (the
    agent's calls then go through the tab)."""
    open_lab_app(page, lab)
    notebook = open_notebook(page, path)

    def seen() -> bool:
        listing = client.result("list_notebooks", {})
        return any(n["path"] == path and n["open_in_lab"] for n in listing["notebooks"])

    wait_until(seen, 60, "the server to see the notebook open in the tab")
    return notebook


def cell_node(page: Any, path: str, cell_id: str) -> Any:
    """The locator of a cell of the notebook, by id."""
    page.evaluate(
        "(path) => { const w = Array.from(window.jupyterapp.shell.widgets('main'))"
        ".find(p => p.context && p.context.path === path);"
        " w.content.widgets.forEach(c => { c.node.dataset.jupyterCiId = c.model.id; }); }",
        path,
    )
    return panel(page, path).locator(f'.jp-Cell[data-jupyter-ci-id="{cell_id}"]')


@contextmanager
def user_setting(lab: Lab, **values: Any) -> Iterator[None]:
    """jupyter-ci's JupyterLab settings for the block (as the user sets them), then back."""

    def put(raw: str) -> None:
        request = urllib.request.Request(
            f"{lab.url}lab/api/settings/jupyter-ci:plugin",
            data=json.dumps({"raw": raw}).encode(),
            method="PUT",
            headers={"Authorization": f"token {lab.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.status == 204

    put(json.dumps(values))
    try:
        yield
    finally:
        put("{}")


def test_an_agents_execute_appears_and_runs_in_the_open_notebook(
    model_context: Any, model_lab: Lab
) -> None:
    path = write_notebook(model_lab, ["x = 20"])
    page = model_context.new_page()
    with agent(model_lab, "claude-code") as client:
        open_for_the_agent(page, model_lab, client, path)
        result = client.result("execute", {"path": path, "code": "print('from the agent')\n6 * 7"})
    assert result["status"] == "ok", result
    assert "Out[1]: 42" in result["outputs"]
    shown = cells(page, path)
    assert [c["source"] for c in shown] == ["x = 20", "print('from the agent')\n6 * 7"]
    added = shown[1]
    assert added["id"] == result["cell_id"]
    assert "from the agent" in text_of(added["outputs"])
    assert added["metadata"]["jupyter_ci"]["agent"] == "claude-code"
    badge = cell_node(page, path, added["id"]).locator('[data-testid="jupyter-ci-badge"]')
    assert badge.inner_text().strip().startswith("added by claude-code")

    # On disk: saved by the tab (with real-time collaboration, by the server's shared document).
    def saved() -> bool:
        on_disk, _ = whole_notebook(Path(model_lab.root_dir) / path)
        return on_disk is not None and [c.source for c in on_disk.cells] == [
            c["source"] for c in shown
        ]

    wait_until(saved, 30, "the agent's cell on disk")
    # A run of the notebook's conversation: the panel shows the agent's request and its cell.
    open_chat(page)
    conversation = page.locator(PANEL)
    conversation.get_by_text("claude-code: execute").wait_for(timeout=30_000)
    assert model_context.jupyter_ci_errors == []


def test_an_agents_long_cell_shows_its_status_and_stop_interrupts_it(
    model_context: Any, model_lab: Lab
) -> None:
    path = write_notebook(model_lab, [])
    page = model_context.new_page()
    code = "import time\nprint('started', flush=True)\nfor _ in range(600):\n    time.sleep(0.1)"
    with agent(model_lab, "claude-code") as client:
        open_for_the_agent(page, model_lab, client, path)
        running = client.result("execute", {"path": path, "code": code, "timeout": 2})
        assert running["status"] == "running", running
        activity = cell_node(page, path, running["cell_id"]).locator(
            '[data-testid="jupyter-ci-agent-activity"]'
        )
        activity.wait_for(timeout=30_000)
        assert activity.get_by_role("status").inner_text() == (
            "claude-code via jupyter-ci: running a cell"
        )
        for theme, name in THEMES.items():
            command(page, "apputils:change-theme", {"theme": name})
            page.wait_for_function("(name) => document.body.dataset.jpThemeName === name", arg=name)
            frames(page)
            ARTIFACTS.mkdir(exist_ok=True)
            cell_node(page, path, running["cell_id"]).screenshot(
                path=str(ARTIFACTS / f"mcp-agent-activity-{theme}.png")
            )
        command(page, "apputils:change-theme", {"theme": THEMES["light"]})
        activity.get_by_role("button", name="Stop the agent's run of this cell").click()
        ended = client.result(
            "wait_cell", {"path": path, "cell_id": running["cell_id"], "timeout": 60}
        )
    assert ended["status"] == "interrupted", ended
    activity.wait_for(state="detached", timeout=30_000)
    stopped = next(c for c in cells(page, path) if c["id"] == running["cell_id"])
    assert "KeyboardInterrupt" in text_of(stopped["outputs"]), dump(page, path)


def test_review_mode_the_user_runs_one_agent_cell_and_rejects_the_next(
    model_context: Any, model_lab: Lab
) -> None:
    path = write_notebook(model_lab, [])
    page = model_context.new_page()
    with user_setting(model_lab, mode="review"), agent(model_lab, "claude-code") as client:
        open_for_the_agent(page, model_lab, client, path)
        first = client.call("execute", {"path": path, "code": "approved = 'yes'\nprint(approved)"})
        waiting = waiting_cell(page, path)
        assert waiting["source"] == "approved = 'yes'\nprint(approved)"
        cell_review(page, path, waiting["id"]).get_by_role("button", name="Run this cell").click()
        ran = first.result(timeout=60)
        assert not ran.is_error
        assert ran.structured_content is not None
        assert ran.structured_content["review"]["decision"] == "run"
        assert ran.structured_content["status"] == "ok"
        assert "yes" in ran.structured_content["outputs"]
        second = client.call("execute", {"path": path, "code": "import shutil\nshutil.rmtree('.')"})
        waiting = waiting_cell(page, path)
        assert waiting["source"].startswith("import shutil")
        review = cell_review(page, path, waiting["id"])
        review.get_by_role(
            "textbox", name=re.compile(r"^Your reason for rejecting this cell \(optional\)")
        ).fill("not in my folder")
        review.get_by_role("button", name="Reject this cell without running it").click()
        rejected = second.result(timeout=60)
    assert rejected.structured_content is not None
    assert rejected.structured_content["status"] == "rejected", rejected
    assert rejected.structured_content["review"]["decision"] == "rejected"
    assert rejected.structured_content["review"]["comment"] == "not in my folder"
    final = next(c for c in cells(page, path) if c["id"] == waiting["id"])
    assert final["execution_count"] is None, dump(page, path)  # never ran
    reviews = panel(page, path).locator('[data-testid="jupyter-ci-cell-review"]')
    wait_until(lambda: reviews.count() == 0, 30, "the review controls gone with the run")


def test_an_agents_edit_is_a_diff_under_the_cell_and_one_undo_away(
    model_context: Any, model_lab: Lab
) -> None:
    path = write_notebook(model_lab, ["total = 1"])
    page = model_context.new_page()
    with agent(model_lab, "claude-code") as client:
        open_for_the_agent(page, model_lab, client, path)
        cell_id = cells(page, path)[0]["id"]
        edited = client.result(
            "edit_cell", {"path": path, "cell_id": cell_id, "source": "total = 2"}
        )
    assert "+total = 2" in edited["diff"]
    node = cell_node(page, path, cell_id)
    diff = node.locator('[data-testid="jupyter-ci-diff"]')
    diff.wait_for(timeout=30_000)
    assert "claude-code changed this cell" in diff.inner_text()
    assert "changed by claude-code" in node.locator('[data-testid="jupyter-ci-badge"]').inner_text()
    assert cells(page, path)[0]["source"] == "total = 2"
    node.locator(".cm-content").click()
    page.keyboard.press("Control+z")
    wait_until(lambda: cells(page, path)[0]["source"] == "total = 1", 30, "the undo")


def test_an_agents_edit_reads_the_tabs_cells_without_their_outputs(
    model_context: Any, model_lab: Lab
) -> None:
    # Each edit first reads the notebook through the tab: its sources and ids, never the
    # outputs, however large (a read the agent asks for still has them).
    path = write_notebook(model_lab, ["total = 1"])
    page = model_context.new_page()
    sent: list[str] = []  # what the page sends the server over its websockets

    def watch(socket: Any) -> None:
        socket.on("framesent", lambda payload: sent.append(str(payload)))

    page.on("websocket", watch)
    marker = "OUTPUT-OF-THE-AGENTS-CELL"
    with agent(model_lab, "claude-code") as client:
        open_for_the_agent(page, model_lab, client, path)
        cell_id = cells(page, path)[0]["id"]
        code = "print('OUT' + 'PUT-OF-THE-AGENTS-CELL ' * 2000)"  # the marker is not in it
        ran = client.result("execute", {"path": path, "code": code})
        assert ran["status"] == "ok", ran
        # Playwright hands over the page's events when it is next called (cells(...) here).
        assert marker in text_of(cells(page, path)[1]["outputs"])
        sent.clear()
        client.result("edit_cell", {"path": path, "cell_id": cell_id, "source": "total = 2"})
        client.result("insert_cell", {"path": path, "source": "total * 3"})
        assert cells(page, path)[0]["source"] == "total = 2"
        assert any('"cells":' in frame for frame in sent), sent  # the reads were heard
        assert not any(marker in frame for frame in sent)
        read = client.result("read_notebook", {"path": path})
    assert len(cells(page, path)) == 3
    assert marker in json.dumps(read)
    assert any(marker in frame for frame in sent)
    assert model_context.jupyter_ci_errors == []


#: Restore's accessible name on a user's cell an agent changed.
RESTORE_AGENTS = "Restore your code: put back the code you wrote before claude-code changed it"


def test_a_users_cell_an_agent_changed_keeps_its_badge_and_restore_after_a_reload(
    model_context: Any, model_lab: Lab
) -> None:
    path = write_notebook(model_lab, ["total = 1"])
    page = model_context.new_page()
    with agent(model_lab, "claude-code") as client:
        open_for_the_agent(page, model_lab, client, path)
        (users,) = (c["id"] for c in cells(page, path))
        client.result("edit_cell", {"path": path, "cell_id": users, "source": "total = 2"})
        # A cell the agent added and then changed has no code of the user's to restore.
        added = client.result("insert_cell", {"path": path, "source": "extra = 1"})["cell_id"]
        client.result("edit_cell", {"path": path, "cell_id": added, "source": "extra = 2"})
    node = cell_node(page, path, users)
    badge = node.locator('[data-testid="jupyter-ci-badge"]')
    wait_until(lambda: "changed by claude-code" in badge.inner_text(), 30, "the badge")
    # Once the call is over, Restore, named for the agent (not "jupyter-ci fixed it").
    node.get_by_role("button", name=RESTORE_AGENTS).wait_for(timeout=30_000)
    hint = cells(page, path)[0]["metadata"]["jupyter_ci"]
    assert "run_id" not in hint
    assert {k: v for k, v in hint["fixed"].items() if k != "run_id"} == {
        "original": "total = 1",
        "agent": "claude-code",
    }
    other = cell_node(page, path, added)
    other_badge = other.locator('[data-testid="jupyter-ci-badge"]')
    wait_until(lambda: "added by claude-code" in other_badge.inner_text(), 30, "its badge")
    assert other.locator('[data-testid="jupyter-ci-restore"]').is_hidden()
    assert "fixed" not in cell_of(cells(page, path), added)["metadata"]["jupyter_ci"]
    command(page, "docmanager:save")
    wait_until(lambda: not page.evaluate(DIRTY, path), 30, "the notebook saved")

    # After a reload (no undo history): the same badge and Restore, which puts the code back.
    reload_lab(page, path)
    node = cell_node(page, path, users)
    badge = node.locator('[data-testid="jupyter-ci-badge"]')
    wait_until(lambda: "changed by claude-code" in badge.inner_text(), 30, "the badge, reloaded")
    restore = node.get_by_role("button", name=RESTORE_AGENTS)
    restore.wait_for(timeout=10_000)
    restore.click()
    wait_until(lambda: cells(page, path)[0]["source"] == "total = 1", 10, "Restore")
    wait_until(lambda: "your code, restored" in badge.inner_text(), 10, "the restored badge")
    assert "jupyter_ci" not in cells(page, path)[0]["metadata"]
    other = cell_node(page, path, added)
    wait_until(lambda: "added by claude-code" in other.inner_text(), 30, "its badge, reloaded")
    assert other.locator('[data-testid="jupyter-ci-restore"]').is_hidden()
    assert model_context.jupyter_ci_errors == []


@pytest.mark.skipif(
    not REAL_TIME_COLLABORATION, reason="each tab has its own copy without jupyter-collaboration"
)
def test_with_real_time_collaboration_every_tab_sees_the_agents_cell_once(
    model_context: Any, model_lab: Lab
) -> None:
    path = write_notebook(model_lab, ["# shared"])
    first, second = model_context.new_page(), model_context.new_page()
    with agent(model_lab, "claude-code") as client:
        open_for_the_agent(first, model_lab, client, path)
        open_lab_app(second, model_lab)
        open_notebook(second, path)
        result = client.result("execute", {"path": path, "code": "'seen once'"})
    assert result["status"] == "ok", result
    for page in (first, second):

        def agent_cells(page: Any = page) -> list[dict[str, Any]]:
            return [c for c in cells(page, path) if c["id"] == result["cell_id"]]

        wait_until(lambda page=page: len(agent_cells(page)) == 1, 30, "the cell in each tab")
        assert len(cells(page, path)) == 2, dump(page, path)
        wait_until(
            lambda page=page: "seen once" in text_of(agent_cells(page)[0]["outputs"]),
            30,
            "its output in each tab",
        )
