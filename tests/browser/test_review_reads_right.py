"""A cell waiting for review reads right (issue 26 items 1, 2 and 7), in real JupyterLab with the
scripted model:

1. After Edit then Run, the cell shows what the model proposed and, apart, what the user changed.
2. A fix waiting for review does not look as if it had already failed: the outputs above which it
   waits are marked as the previous attempt's and dimmed, and its attempt reads the same in the
   badge, the ``%%ci`` status, the diff and the panel's steps.
7. Reject carries an optional reason, from the notebook and from the panel (labelled, reached by
   keyboard); the model is told it, and the conversation keeps it.
"""

from __future__ import annotations

import re
from typing import Any

from jupyter_ci.testing import Reply, ScriptedModelServer

from .chat import ask, by_testid, conversation_text, messages, open_chat, request_text, runs
from .chat import steps as run_steps
from .lab import Lab
from .notebooks import TERMINAL as NB_TERMINAL
from .notebooks import (
    cells,
    dump,
    open_lab_app,
    open_notebook,
    panel,
    run_all,
    status_of,
    text_of,
    wait_for_status,
    wait_until,
    write_notebook,
)
from .test_notebook_flows import cell_review, waiting_cell

TERMINAL = ("done", "failed", "stopped")

BROKEN = "total = undefined_name + 1\nprint(total)"
FIXED = "undefined_name = 41\ntotal = undefined_name + 1\nprint(total)"


def cell_node(page: Any, path: str, cell_id: str) -> Any:
    """The locator of the notebook's cell ``cell_id`` (tagged by ``waiting_cell``)."""
    return panel(page, path).locator(f'.jp-Cell[data-jupyter-ci-id="{cell_id}"]')


def test_a_fix_waiting_for_review_reads_as_the_next_attempt_and_an_edit_shows_apart(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    model.set_script([Reply.code(BROKEN), Reply.code(FIXED), Reply.text("It is 42.")])
    path = write_notebook(model_lab, ["%load_ext jupyter_ci", "%%ci --review add one"])
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    open_chat(page)
    run_all(page, path)

    # The new cell waits: it has no outputs, nothing is marked.
    first = waiting_cell(page, path)
    cell = cell_node(page, path, first["id"])
    assert cell.locator('[data-testid="jupyter-ci-stale-outputs"]').count() == 0
    cell_review(page, path, first["id"]).get_by_role("button", name="Run this cell").click()

    # It fails; the fix waits above the NameError, which is marked as attempt 1's, dimmed.
    wait_until(
        lambda: cells(page, path)[2]["source"] == FIXED and cell_review(page, path, first["id"]),
        60,
        "the fix waiting for review",
        lambda: dump(page, path),
    )
    stale = cell.locator('[data-testid="jupyter-ci-stale-outputs"]')
    stale.wait_for(timeout=30_000)
    assert stale.inner_text().startswith("Output of attempt 1, before this change"), (
        stale.inner_text()
    )
    assert "NameError" in text_of(cells(page, path)[2]["outputs"])
    opacity = cell.locator(".jp-Cell-outputWrapper").evaluate(
        "(e) => Number(getComputedStyle(e).opacity)"
    )
    assert opacity < 1
    # One count everywhere: the badge, the %%ci's status, the diff, the panel's steps.
    badge = cell.locator('[data-testid="jupyter-ci-badge"]')
    wait_until(lambda: "attempt 2/3" in badge.inner_text(), 30, "the badge's count")
    status = status_of(cells(page, path)[1])
    assert status is not None
    assert status["text"] == "jupyter-ci: awaiting approval — attempt 2/3", status["text"]
    diff = cell.locator('[data-testid="jupyter-ci-diff"]')
    assert "for attempt 2" in diff.locator("summary").inner_text()
    counts = re.findall(r"attempt (\d+)/(\d+)", " ".join(run_steps(page)))
    assert ("2", "3") in counts, run_steps(page)
    assert all(int(n) <= int(m) for n, m in counts), run_steps(page)

    # Edit, add a line, Run: the model's fix stays shown, the user's change shows apart.
    cell_review(page, path, first["id"]).get_by_role(
        "button", name="Edit the cell before running it"
    ).click()
    page.wait_for_function(
        "() => window.jupyterapp.shell.currentWidget.content.mode === 'edit'", timeout=30_000
    )
    page.keyboard.press("Control+End")
    page.keyboard.insert_text("\nprint('mine too')")
    cell_review(page, path, first["id"]).get_by_role(
        "button", name="Run your version of the cell"
    ).click()
    assert wait_for_status(page, path, 1, NB_TERMINAL)["state"] == "done", dump(page, path)
    assert "mine too" in text_of(cells(page, path)[2]["outputs"])
    assert diff.locator(".jp-jupyter-ci-diff-added").all_inner_texts() == ["+undefined_name = 41"]
    edit = cell.locator('[data-testid="jupyter-ci-edit-diff"]')
    edit.wait_for(state="visible", timeout=30_000)
    assert edit.locator("summary").inner_text().startswith("your edit of jupyter-ci")
    assert edit.locator(".jp-jupyter-ci-diff-added").all_inner_texts() == ["+print('mine too')"]
    assert stale.count() == 0  # the cell ran: its outputs are the new code's
    assert model_context.jupyter_ci_errors == []


def test_reject_carries_an_optional_reason_from_the_notebook_and_the_panel(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    model.set_script(
        [
            Reply.code("values = [1, 2, 3]"),
            Reply.code("values = {'a': 1}", match="Their reason: a dict please"),
            Reply.text("A dict it is."),
            Reply.code("squares = [n * n for n in range(3)]", match="squares"),
            Reply.text("Understood: no squares.", match="Their reason: not needed after all"),
        ]
    )
    path = write_notebook(model_lab, ["%load_ext jupyter_ci", "%%ci --review some values"])
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    run_all(page, path)

    # From the notebook: the reason field is labelled, in the tab order; Enter in it rejects.
    first = waiting_cell(page, path)
    reason = cell_review(page, path, first["id"]).get_by_role(
        "textbox", name=re.compile(r"^Your reason for rejecting this cell \(optional\)")
    )
    assert reason.evaluate("(e) => e.tabIndex") == 0
    reason.focus()
    page.keyboard.type("a dict please")
    page.keyboard.press("Enter")
    wait_until(
        lambda: cells(page, path)[2]["source"] == "values = {'a': 1}", 60, "the other proposal"
    )
    told = request_text(model.chat_requests[1])
    assert "The user rejected this cell without running it.\n\nTheir reason: a dict please" in told
    again = waiting_cell(page, path)
    cell_review(page, path, again["id"]).get_by_role("button", name="Run this cell").click()
    assert wait_for_status(page, path, 1, NB_TERMINAL)["state"] == "done", dump(page, path)

    # From the panel: the same field in the review card; Reject sends it.
    open_chat(page)
    mode = page.locator(by_testid("jupyter-ci-mode"))
    mode.select_option("review")
    try:
        ask(page, "squares please")
        card = page.locator(by_testid("jupyter-ci-review"))
        card.wait_for(timeout=60_000)
        field = card.get_by_role(
            "textbox", name=re.compile(r"^Your reason for rejecting this cell \(optional\)")
        )
        field.fill("not needed after all")
        card.get_by_role("button", name="Reject this cell without running it").click()
        wait_until(lambda: len(runs(page).all()) == 2, 30, "the panel's run")
        wait_until(
            lambda: "Understood: no squares." in conversation_text(page), 60, "the model's answer"
        )
    finally:
        mode.select_option("")
    said = messages(page, "user")
    assert any("My reason: a dict please" in m for m in said), said
    assert any("My reason: not needed after all" in m for m in said), said
    assert "Their reason: not needed after all" in request_text(model.chat_requests[-1])
    assert model_context.jupyter_ci_errors == []
