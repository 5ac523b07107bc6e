"""Nothing the user did is lost (issue 23), in real JupyterLab with the scripted model: each test
drives one sequence that lost the user's work before, the way the user did it.

1. A panel request's cell placed after a ``%%ci`` cell is never that ``%%ci``'s: Restart and Run
   All, and ``--regenerate``, touch only the ``%%ci``'s own unedited cells (the run record says
   which); a stopped ``%%ci`` whose cell is still there is not sent to the model again.
2. "Fix with jupyter-ci" on a cell the user wrote (toolbar, palette, context menu; auto, review
   and insert mode): the fix shows as a diff, one Ctrl+Z in the editor (or Restore) brings the
   user's code back, the cell is badged "fixed by jupyter-ci", and the attempt count reads the
   same everywhere and never exceeds the limit.
4. Running a failed ``%%ci`` again says first what it will replace, and keeps the failed cell if
   the user edits it while the model is asked.
5. Shift+Enter on a cell waiting for review adds no stray empty cell, and the panel's next
   request still goes after the run's cells.
"""

from __future__ import annotations

import re
from typing import Any

from jupyter_ci.agent.cells import UNFINISHED_NOTE
from jupyter_ci.testing import Reply, ScriptedModelServer

from .chat import (
    ask,
    by_testid,
    conversation_text,
    open_chat,
    runs,
    steps,
    wait_run_state,
)
from .lab import Lab, run_command
from .notebooks import TERMINAL as NB_TERMINAL
from .notebooks import (
    activate,
    cells,
    dump,
    open_lab_app,
    open_notebook,
    panel,
    restart_and_run_all,
    run_all,
    run_cell,
    set_source,
    status_of,
    text_of,
    wait_for_status,
    wait_until,
    write_iris,
    write_notebook,
)
from .test_notebook_flows import waiting_cell

#: The states a run block of the panel ends in.
TERMINAL = ("done", "failed", "stopped")
#: What the %%ci streams, slowly enough to be stopped half-way.
SCATTER = "\n".join(f"part_{i} = {i}  # scatter_matrix(df), part {i}" for i in range(30))
#: The panel's answer to "draw a histogram of sepal width".
HISTOGRAM = "hist = 'sepal width histogram'\nprint(hist)"
#: The user's own cell after the %%ci.
AFTER = "print('after the scatter matrix')"
#: The %%ci's answer once it is asked again with --regenerate.
SCATTER_AGAIN = "scatter = 'scatter matrix'\nprint(scatter)"


def cell_index(page: Any, path: str, cell_id: str) -> int:
    """Where the cell ``cell_id`` is in the notebook now."""
    return [c["id"] for c in cells(page, path)].index(cell_id)


def active_cell_id(page: Any, path: str) -> str | None:
    """The id of the notebook's active cell."""
    found: str | None = page.evaluate(
        "(path) => { const w = Array.from(window.jupyterapp.shell.widgets('main'))"
        ".find(p => p.context && p.context.path === path);"
        " return w.content.activeCell ? w.content.activeCell.model.id : null; }",
        path,
    )
    return found


def test_a_panel_requests_cell_after_a_stopped_ci_is_never_the_cis(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    model.set_script(
        [
            Reply.code(SCATTER, match="scatter matrix", delay=0.3),
            Reply.code(HISTOGRAM, match="histogram of sepal width"),
            Reply.code(SCATTER_AGAIN, match="scatter matrix"),
            Reply.text("The histogram is drawn."),
            Reply.text("The scatter matrix is drawn."),
        ]
    )
    write_iris(model_lab)
    path = write_notebook(
        model_lab,
        ["%load_ext jupyter_ci", "%%ci draw a scatter matrix of the iris data", AFTER],
    )
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    ci_id = cells(page, path)[1]["id"]

    # The %%ci streams its cell; the user clicks its Stop (which selects the %%ci cell).
    run_all(page, path)
    wait_until(
        lambda: len(cells(page, path)) > 2 and "part_2" in cells(page, path)[2]["source"],
        60,
        "code streaming into the %%ci's cell",
    )
    panel(page, path).locator('[data-testid="jupyter-ci-stop"]').click()
    assert wait_for_status(page, path, 1, NB_TERMINAL)["state"] == "stopped", dump(page, path)
    stale = cells(page, path)[2]
    assert stale["source"].startswith(UNFINISHED_NOTE), dump(page, path)
    assert active_cell_id(page, path) == ci_id

    # The panel's request goes after the selected %%ci cell, above the %%ci's stopped cell.
    open_chat(page)
    ask(page, "draw a histogram of sepal width")
    wait_until(lambda: len(runs(page).all()) == 2, 30, "the panel's run")
    assert wait_run_state(page, TERMINAL) == "done", conversation_text(page)
    histogram = next(c for c in cells(page, path) if c["source"] == HISTOGRAM)
    ids = [c["id"] for c in cells(page, path)]
    assert ids[1:4] == [ci_id, histogram["id"], stale["id"]], dump(page, path)
    assert histogram["metadata"]["jupyter_ci"]["origin_cell_id"] is None  # not the %%ci's
    asked = len(model.chat_requests)

    # Restart Kernel and Run All: the stopped %%ci's own cell is still below it, so the model is
    # not asked again, and it says so; the panel's cell runs as any cell after it.
    stopped_run = stale["metadata"]["jupyter_ci"]["run_id"]
    restart_and_run_all(page, path)
    status = wait_until(
        lambda: (
            (s := status_of(cells(page, path)[1]))
            and (s["state"] == "reused" or s.get("run_id") not in (None, stopped_run))
            and s
        ),
        what="the re-run's status",
        explain=lambda: dump(page, path),
    )
    assert status["state"] == "reused", dump(page, path)
    # The stopped run's line still stands; one short line says why the model is not asked.
    assert status["text"].startswith("jupyter-ci: stopped by the user — "), status
    assert status["note"] == "Not asked again: its cell is below (--regenerate to replace it)"
    wait_until(
        lambda: "sepal width histogram" in text_of(cell_of(page, path, histogram["id"])["outputs"]),
        60,
        "the panel's cell ran after the %%ci",
    )
    assert len(model.chat_requests) == asked
    assert cell_of(page, path, stale["id"])["source"] == stale["source"]

    # --regenerate: the %%ci's own stale cell is replaced, the panel's cell is kept.
    set_source(page, path, 1, "%%ci --regenerate draw a scatter matrix of the iris data")
    run_cell(page, path, 1)
    status = wait_until(
        lambda: (
            (s := status_of(cells(page, path)[1]))
            and s["state"] in TERMINAL
            and s.get("run_id") not in (None, stopped_run)
            and s
        ),
        what="the regenerated run to end",
        explain=lambda: dump(page, path),
    )
    assert status["state"] == "done", dump(page, path)
    assert status["note"].startswith(
        "Asking again (--regenerate): the 1 cell it left below will be replaced by the new answer"
    ), status
    now = cells(page, path)
    ids = [c["id"] for c in now]
    assert stale["id"] not in ids, dump(page, path)
    assert histogram["id"] in ids, dump(page, path)
    assert cell_of(page, path, histogram["id"])["source"] == HISTOGRAM
    assert [c["source"] for c in now][2:] == [SCATTER_AGAIN, HISTOGRAM, AFTER], dump(page, path)

    # Without --regenerate, Restart and Run All once more: the %%ci's new cell is there, the
    # model is not asked, nothing is deleted.
    set_source(page, path, 1, "%%ci draw a scatter matrix of the iris data")
    restart_and_run_all(page, path)
    wait_until(
        lambda: (s := status_of(cells(page, path)[1])) and s["state"] == "reused" and s["note"],
        what="the re-run's status",
        explain=lambda: dump(page, path),
    )
    status = status_of(cells(page, path)[1])
    assert status["text"].startswith("jupyter-ci: done — 1 cell, "), status
    assert status["note"] == "Not asked again: its cell is below (--regenerate to replace it)"
    assert [c["source"] for c in cells(page, path)][2:] == [SCATTER_AGAIN, HISTOGRAM, AFTER]
    assert model_context.jupyter_ci_errors == []


def cell_of(page: Any, path: str, cell_id: str) -> dict[str, Any]:
    """The notebook's cell ``cell_id``."""
    return next(c for c in cells(page, path) if c["id"] == cell_id)


#: The user's own cell, with a wrong column name.
USERS_CODE = 'import pandas as pd\ndf = pd.read_csv("iris.csv")\nprint(df["sepal_len"].mean())'
#: jupyter-ci's fix of it.
FIXED = USERS_CODE.replace('"sepal_len"', '"sepal_length"')


def set_mode(page: Any, mode: str) -> None:
    """Choose the mode in the panel (saved as the user's setting)."""
    page.locator(by_testid("jupyter-ci-mode")).select_option(mode)


def fail_users_cell(page: Any, path: str) -> Any:
    """Put the user's code back into cell 0, run it until its KeyError, and select it; the
    locator of the cell."""
    set_source(page, path, 0, USERS_CODE)
    run_cell(page, path, 0)
    wait_until(
        lambda: (
            "KeyError" in text_of(cells(page, path)[0]["outputs"])
            and cells(page, path)[0]["source"] == USERS_CODE
        ),
        60,
        "the user's cell to fail",
    )
    return panel(page, path).locator(".jp-Notebook .jp-Cell").first


def attempts_in(text: str) -> list[tuple[int, int]]:
    """Every "attempt N/M" in a text, as (N, M)."""
    return [(int(a), int(b)) for a, b in re.findall(r"attempt (\d+)/(\d+)", text)]


def check_the_users_cell_is_fixed_not_generated(page: Any, cell: Any) -> None:
    """The cell's badge says fixed (never generated), with a count within the limit, and the
    fix shows as a diff of the user's code."""
    badge = cell.locator('[data-testid="jupyter-ci-badge"]')
    badge.wait_for(timeout=30_000)
    wait_until(lambda: "fixed by jupyter-ci" in badge.inner_text(), 30, "the fixed badge")
    assert "generated" not in badge.inner_text(), badge.inner_text()
    # The first try of the fix: the badge names no attempt (as on any cell's first try).
    assert attempts_in(badge.inner_text()) == [], badge.inner_text()
    diff = cell.locator('[data-testid="jupyter-ci-diff"]')
    diff.wait_for(state="visible", timeout=30_000)
    assert diff.locator("summary").inner_text().startswith("jupyter-ci fixed your code")
    assert diff.locator(".jp-jupyter-ci-diff-removed").all_inner_texts() == [
        '-print(df["sepal_len"].mean())'
    ]
    assert diff.locator(".jp-jupyter-ci-diff-added").all_inner_texts() == [
        '+print(df["sepal_length"].mean())'
    ]


def test_fix_with_jupyter_ci_keeps_the_users_cell_theirs_in_every_route_and_mode(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    model.set_script([Reply.code(FIXED, prose="The column is sepal_length.", times=3)])
    write_iris(model_lab)
    path = write_notebook(model_lab, [USERS_CODE])
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    open_chat(page)
    activate(page, path)

    # Auto mode, from the cell's toolbar: fixed in place, run, and shown as a diff.
    cell = fail_users_cell(page, path)
    fix = panel(page, path).locator('.jp-cell-toolbar [data-command="jupyter-ci:fix-cell"]')
    fix.first.wait_for(state="visible", timeout=30_000)
    fix.first.click()
    wait_until(lambda: len(runs(page).all()) == 1, 30, "the fix")
    assert wait_run_state(page, TERMINAL) == "done", conversation_text(page)
    assert cells(page, path)[0]["source"] == FIXED
    assert "6.45" in text_of(cells(page, path)[0]["outputs"])  # the mean of sepal_length
    check_the_users_cell_is_fixed_not_generated(page, cell)
    # One count everywhere, never above the limit: the panel's steps say attempt 1/3.
    shown = steps(page)
    assert "Error → fixing, attempt 1/3" in shown, shown
    assert "Fix written, attempt 1/3" in shown, shown
    assert all(n <= m for n, m in attempts_in(" ".join(shown))), shown
    assert "run_id" not in cells(page, path)[0]["metadata"].get("jupyter_ci", {})  # not generated

    # One Ctrl+Z in the cell's editor brings the user's code back (and the cell says so);
    # Ctrl+Shift+Z the fix.
    badge = cell.locator('[data-testid="jupyter-ci-badge"]')
    restore = cell.get_by_role(
        "button", name="Restore your code: put back the code you wrote before jupyter-ci fixed it"
    )
    restore.wait_for(timeout=10_000)
    cell.locator(".cm-content").click()
    page.keyboard.press("Control+z")
    wait_until(lambda: cells(page, path)[0]["source"] == USERS_CODE, 10, "Ctrl+Z")
    wait_until(lambda: "your code, restored" in badge.inner_text(), 10, "the restored badge")
    assert restore.is_hidden()
    page.keyboard.press("Control+Shift+z")
    wait_until(lambda: cells(page, path)[0]["source"] == FIXED, 10, "Ctrl+Shift+Z")
    wait_until(lambda: "fixed by jupyter-ci" in badge.inner_text(), 10, "the fixed badge again")
    page.keyboard.press("Escape")
    # Restore, labelled and reached by keyboard, does the same.
    restore.wait_for(timeout=10_000)
    assert restore.evaluate("(b) => b.tabIndex") == 0
    restore.focus()
    page.keyboard.press("Enter")
    wait_until(lambda: cells(page, path)[0]["source"] == USERS_CODE, 10, "Restore")
    wait_until(lambda: "your code, restored" in badge.inner_text(), 10, "the restored badge")
    assert restore.is_hidden()

    # Review mode, from the palette: the fix waits in the cell as a diff, as attempt 1/3.
    set_mode(page, "review")
    try:
        fail_users_cell(page, path)
        activate(page, path)
        run_command(page, "Fix with jupyter-ci")
        review = page.locator(by_testid("jupyter-ci-review"))
        review.wait_for(timeout=60_000)
        assert cells(page, path)[0]["source"] == FIXED
        check_the_users_cell_is_fixed_not_generated(page, cell)
        review.get_by_role("button", name="Run this cell").click()
        wait_until(lambda: len(runs(page).all()) == 2, 30, "the second fix")
        assert wait_run_state(page, TERMINAL) == "done", conversation_text(page)
        cell.locator(".cm-content").click()
        page.keyboard.press("Control+z")
        wait_until(lambda: cells(page, path)[0]["source"] == USERS_CODE, 10, "Ctrl+Z")
        page.keyboard.press("Escape")

        # Insert mode, from the context menu: written, not run; Restore puts the code back.
        set_mode(page, "insert")
        fail_users_cell(page, path)
        cell.locator(".jp-OutputArea-output").first.click(button="right")
        page.locator(".lm-Menu-item", has_text="Fix with jupyter-ci").click()
        wait_until(lambda: len(runs(page).all()) == 3, 30, "the third fix")
        assert wait_run_state(page, TERMINAL) == "done", conversation_text(page)
        assert cells(page, path)[0]["source"] == FIXED
        check_the_users_cell_is_fixed_not_generated(page, cell)
        restore.click()
        wait_until(lambda: cells(page, path)[0]["source"] == USERS_CODE, 10, "Restore")
    finally:
        set_mode(page, "")
    assert len(model.chat_requests) == 3
    assert model_context.jupyter_ci_errors == []


#: A %%ci's first answer, which fails; and its answer when asked again.
BROKEN_MEAN = 'import pandas as pd\nprint(pd.read_csv("iris.csv")["sepal_len"].mean())'
GOOD_MEAN = BROKEN_MEAN.replace('"sepal_len"', '"sepal_length"')


def test_running_a_failed_ci_again_says_what_it_replaces_and_keeps_an_edited_cell(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    model.set_script(
        [
            Reply.code(BROKEN_MEAN),
            # Asked again, the model takes a moment: the user edits the failed cell meanwhile.
            Reply.code(GOOD_MEAN, latency=5.0),
            Reply.text("The mean sepal length is above 5."),
        ]
    )
    write_iris(model_lab)
    path = write_notebook(
        model_lab, ["%load_ext jupyter_ci", "%%ci --max-attempts 1 the mean sepal length"]
    )
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    run_all(page, path)
    first = wait_for_status(page, path, 1, NB_TERMINAL)
    assert first["state"] == "failed", dump(page, path)
    failed = cells(page, path)[2]
    assert failed["source"] == BROKEN_MEAN

    # Run the %%ci again, unchanged: before anything is deleted, its status says what happens.
    run_cell(page, path, 1)
    status = wait_until(
        lambda: (
            (s := status_of(cells(page, path)[1]))
            and s.get("run_id") not in (None, first["run_id"])
            and s
        ),
        60,
        "the new request's status",
        lambda: dump(page, path),
    )
    assert status["note"] == (
        "The last request here failed (the cell still failed at the last attempt): asking "
        "again; the 1 cell it left below will be replaced by the new answer unless you edit it "
        "first."
    ), status
    shown = panel(page, path).locator('[data-testid="jupyter-ci-status-output"]').first
    wait_until(lambda: "will be replaced by the new answer" in shown.inner_text(), 30, "the note")
    assert failed["id"] in [c["id"] for c in cells(page, path)]

    # The user edits the failed cell while the model is asked: it is theirs now, and kept.
    mine = BROKEN_MEAN.replace('"sepal_len"', '"petal_length"')
    set_source(page, path, cell_index(page, path, failed["id"]), mine)
    assert wait_for_status(page, path, 1, NB_TERMINAL)["state"] == "done", dump(page, path)
    now = cells(page, path)
    assert [c["source"] for c in now][2:] == [GOOD_MEAN, mine], dump(page, path)
    assert now[3]["id"] == failed["id"]
    assert model_context.jupyter_ci_errors == []


def test_shift_enter_on_a_cell_waiting_for_review_adds_no_stray_cell(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    model.set_script(
        [
            Reply.code("r1 = 'one'\nprint(r1)"),
            Reply.code("r2 = 'two'\nprint(r2)"),
            Reply.text("Both ran."),
            Reply.code("r3 = 'three'\nprint(r3)", match="a third"),
            Reply.text("Third."),
        ]
    )
    path = write_notebook(model_lab, ["%load_ext jupyter_ci", "%%ci --review two steps"])
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    run_all(page, path)

    # The first cell waits, the last of the notebook; Shift+Enter in its editor runs it (it
    # counts as Run) and adds no empty cell: the selection stays on it.
    first = waiting_cell(page, path)
    assert cells(page, path)[-1]["id"] == first["id"]
    cell = panel(page, path).locator(".jp-Notebook .jp-Cell").nth(2)
    cell.locator(".cm-content").click()
    page.keyboard.press("Shift+Enter")
    wait_until(
        lambda: "one" in text_of(cell_of(page, path, first["id"])["outputs"]), 60, "cell 1 ran"
    )
    second = wait_until(
        lambda: (lambda c: c if c["id"] != first["id"] else None)(waiting_cell(page, path)),
        60,
        "the second cell waiting",
    )
    assert [c["source"] for c in cells(page, path)][2:] == [first["source"], second["source"]]

    # The second, from command mode (the cell selected, not edited): the same.
    panel(page, path).locator(".jp-Notebook .jp-Cell").nth(3).locator(".jp-InputPrompt").click()
    page.keyboard.press("Shift+Enter")
    assert wait_for_status(page, path, 1, NB_TERMINAL)["state"] == "done", dump(page, path)
    now = cells(page, path)
    assert [c["source"] for c in now][2:] == [first["source"], second["source"]], dump(page, path)
    assert "two" in text_of(now[3]["outputs"])
    assert active_cell_id(page, path) == second["id"]

    # The panel's next request goes after the run's cells.
    open_chat(page)
    ask(page, "a third step")
    wait_until(lambda: len(runs(page).all()) == 2, 30, "the panel's run")
    assert wait_run_state(page, TERMINAL) == "done", conversation_text(page)
    sources = [c["source"] for c in cells(page, path)]
    assert sources[2:] == [first["source"], second["source"], "r3 = 'three'\nprint(r3)"], sources
    assert "" not in sources
    assert model_context.jupyter_ci_errors == []
