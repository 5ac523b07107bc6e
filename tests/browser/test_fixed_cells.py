"""A user's cell that jupyter-ci fixed stays the user's (issue 23), in real JupyterLab with the
scripted model:

1. In review mode, a proposal the user did not accept never stays in their cell: when the run
   ends after a Reject (the model having nothing else to propose), when the user presses Stop
   while the proposal waits, and when the run fails after a Reject, the cell holds the user's
   code again, as an undoable change (Ctrl+Z brings the proposal back), and the cell's badge,
   the panel's steps and its notice say so.
2. After a reload (the editor's undo history is gone) a fixed cell still shows "fixed by
   jupyter-ci" and Restore, which puts the user's code back; the code is kept in the cell's
   hint only while the cell holds other code.
"""

from __future__ import annotations

from typing import Any

from jupyter_ci.agent.review import USERS_CODE_BACK
from jupyter_ci.testing import Fault, Reply, ScriptedModelServer

from .chat import by_testid, conversation_text, messages, open_chat, runs, steps, wait_run_state
from .lab import Lab, run_command
from .notebooks import (
    activate,
    cells,
    command,
    open_lab_app,
    open_notebook,
    panel,
    wait_until,
    write_iris,
    write_notebook,
)
from .test_notebook_flows import cell_review, waiting_cell
from .test_reload import reload_lab
from .test_users_work import FIXED, TERMINAL, USERS_CODE, fail_users_cell, set_mode

#: The badge line of the notebook's first cell.
BADGE = '[data-testid="jupyter-ci-badge"]'
#: Restore's accessible name.
RESTORE = "Restore your code: put back the code you wrote before jupyter-ci fixed it"


def source(page: Any, path: str) -> str:
    """The first cell's source."""
    found: str = cells(page, path)[0]["source"]
    return found


def fix_and_wait_for_review(page: Any, path: str, count: int) -> Any:
    """Fail the user's cell, ask for its fix (the palette), wait until the fix waits for review
    as run ``count`` of the panel; the locator of the cell's review controls."""
    fail_users_cell(page, path)
    activate(page, path)
    run_command(page, "Fix with jupyter-ci")
    wait_until(lambda: len(runs(page).all()) == count, 30, f"fix {count}")
    page.locator(by_testid("jupyter-ci-review")).wait_for(timeout=60_000)
    waiting = waiting_cell(page, path)
    assert waiting["source"] == FIXED
    return cell_review(page, path, waiting["id"])


def check_users_code_is_back(page: Any, path: str, cell: Any, end: str) -> None:
    """The run ended (``end``), the cell holds the user's code and says so, and the panel too."""
    assert wait_run_state(page, TERMINAL) == end, conversation_text(page)
    wait_until(lambda: source(page, path) == USERS_CODE, 30, "the user's code back")
    badge = cell.locator(BADGE)
    wait_until(lambda: "your code, restored" in badge.inner_text(), 10, "the restored badge")
    assert cell.get_by_role("button", name=RESTORE).is_hidden()
    assert cell.locator('[data-testid="jupyter-ci-diff"]').is_hidden()
    assert "Your code put back" in steps(page), steps(page)
    assert USERS_CODE_BACK in messages(page, "notice")
    # No hint left: the cell holds the user's code.
    assert "jupyter_ci" not in cells(page, path)[0]["metadata"]


def test_a_fix_the_user_did_not_accept_never_stays_in_their_cell(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    write_iris(model_lab)
    path = write_notebook(model_lab, [USERS_CODE])
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    open_chat(page)
    activate(page, path)
    set_mode(page, "review")
    cell = panel(page, path).locator(".jp-Notebook .jp-Cell").first
    try:
        # Reject; the model has nothing else to propose: the run ends, the user's code is back.
        model.set_script([Reply.code(FIXED), Reply.text("I have no other fix to propose.")])
        review = fix_and_wait_for_review(page, path, 1)
        review.get_by_role("button", name="Reject this cell without running it").click()
        check_users_code_is_back(page, path, cell, "done")
        # As an undoable change: Ctrl+Z in the cell brings the proposal back, Ctrl+Shift+Z the
        # user's code.
        cell.locator(".cm-content").click()
        page.keyboard.press("Control+z")
        wait_until(lambda: source(page, path) == FIXED, 10, "Ctrl+Z")
        badge = cell.locator(BADGE)
        wait_until(lambda: "fixed by jupyter-ci" in badge.inner_text(), 10, "the fixed badge")
        page.keyboard.press("Control+Shift+z")
        wait_until(lambda: source(page, path) == USERS_CODE, 10, "Ctrl+Shift+Z")
        page.keyboard.press("Escape")

        # Stop while the proposal waits.
        model.set_script([Reply.code(FIXED)])
        fix_and_wait_for_review(page, path, 2)
        page.locator(by_testid("jupyter-ci-stop")).click()
        check_users_code_is_back(page, path, cell, "stopped")

        # The run fails after a Reject (the provider refuses the next call).
        model.set_script([Reply.code(FIXED), Reply.fail(Fault.auth())])
        review = fix_and_wait_for_review(page, path, 3)
        review.get_by_role("button", name="Reject this cell without running it").click()
        check_users_code_is_back(page, path, cell, "failed")
    finally:
        set_mode(page, "")
    assert len(model.chat_requests) == 5
    assert model_context.jupyter_ci_errors == []


def test_a_fixed_cell_keeps_its_badge_and_restore_after_a_reload(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    model.set_script([Reply.code(FIXED, prose="The column is sepal_length.")])
    write_iris(model_lab)
    path = write_notebook(model_lab, [USERS_CODE])
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    open_chat(page)
    activate(page, path)
    fail_users_cell(page, path)
    run_command(page, "Fix with jupyter-ci")
    wait_until(lambda: len(runs(page).all()) == 1, 30, "the fix")
    assert wait_run_state(page, TERMINAL) == "done", conversation_text(page)
    assert source(page, path) == FIXED
    hint = cells(page, path)[0]["metadata"]["jupyter_ci"]
    assert hint["fixed"]["original"] == USERS_CODE
    assert "run_id" not in hint  # not a generated cell
    command(page, "docmanager:save")
    wait_until(
        lambda: (
            not page.evaluate(
                "(path) => Array.from(window.jupyterapp.shell.widgets('main'))"
                ".find(w => w.context && w.context.path === path).context.model.dirty",
                path,
            )
        ),
        30,
        "the notebook saved",
    )

    # After the reload: the badge and Restore are back, and Restore puts the code back.
    reload_lab(page, path)
    cell = panel(page, path).locator(".jp-Notebook .jp-Cell").first
    badge = cell.locator(BADGE)
    badge.wait_for(timeout=30_000)
    wait_until(lambda: "fixed by jupyter-ci" in badge.inner_text(), 30, "the fixed badge")
    restore = cell.get_by_role("button", name=RESTORE)
    restore.wait_for(timeout=10_000)
    assert restore.evaluate("(b) => b.tabIndex") == 0
    restore.click()
    wait_until(lambda: source(page, path) == USERS_CODE, 10, "Restore")
    wait_until(lambda: "your code, restored" in badge.inner_text(), 10, "the restored badge")
    assert restore.is_hidden()
    assert "jupyter_ci" not in cells(page, path)[0]["metadata"]
    # Ctrl+Z after Restore brings the fix back, and the hint with it.
    cell.locator(".cm-content").click()
    page.keyboard.press("Control+z")
    wait_until(lambda: source(page, path) == FIXED, 10, "Ctrl+Z")
    wait_until(lambda: "fixed by jupyter-ci" in badge.inner_text(), 10, "the fixed badge again")
    assert cells(page, path)[0]["metadata"]["jupyter_ci"]["fixed"]["original"] == USERS_CODE
    assert model_context.jupyter_ci_errors == []
