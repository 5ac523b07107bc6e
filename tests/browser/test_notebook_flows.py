"""The notebook as a data scientist lives it, in real JupyterLab with the scripted model: new
cells in the order of the conversation, a ``%%ci`` answer written under its cell, review from
the notebook alone, and a missing package installed on the user's word (issue 16).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jupyter_ci.testing import Reply, ScriptedModelServer

from ..saved_files import whole_notebook
from ..test_install import PACKAGE, USES_IT
from .chat import ask, by_testid, conversation_text, open_chat, runs, wait_run_state
from .lab import Lab
from .notebooks import TERMINAL as NB_TERMINAL
from .notebooks import (
    activate,
    cells,
    command,
    dump,
    open_lab_app,
    open_notebook,
    panel,
    run_all,
    run_cell,
    text_of,
    wait_for_status,
    wait_until,
    write_notebook,
)

TERMINAL = ("done", "failed", "stopped")
#: The accessible name of the panel's button that inserts an answer as a Markdown cell.
ANSWER_LABEL = "Insert this answer as a Markdown cell where the next cells of the conversation go"


def sources(page: Any, path: str) -> list[str]:
    """The notebook's cell sources, top to bottom."""
    return [cell["source"] for cell in cells(page, path)]


def ask_and_wait(page: Any, text: str, count: int) -> None:
    """Ask in the panel and wait until the conversation's ``count``-th run is done."""
    ask(page, text)
    wait_until(lambda: len(runs(page).all()) == count, 30, f"run {count}")
    assert wait_run_state(page, TERMINAL) == "done", conversation_text(page)


def test_panel_requests_follow_the_conversation_in_reading_order(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    model.set_script(
        [
            Reply.code("first = 1"),
            Reply.text("First."),
            Reply.code("second = 2"),
            Reply.text("Second."),
            Reply.code("third = 3"),
            Reply.text("Third."),
            Reply.code("fourth = 4"),
            Reply.text("Fourth."),
        ]
    )
    path = write_notebook(model_lab, ["top = 0", "bottom = 9"])
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    open_chat(page)

    # The notebook opened on its first cell: the first request's cell goes below it, and the
    # second request's below the first's (not above it, where the active cell still is).
    ask_and_wait(page, "first", 1)
    assert sources(page, path) == ["top = 0", "first = 1", "bottom = 9"]
    ask_and_wait(page, "second", 2)
    assert sources(page, path) == ["top = 0", "first = 1", "second = 2", "bottom = 9"]

    # The user selects another cell: the next request's cells go below that one.
    panel(page, path).locator(".jp-Cell").nth(3).locator(".jp-InputPrompt").click()
    ask_and_wait(page, "third", 3)
    assert sources(page, path) == [
        "top = 0",
        "first = 1",
        "second = 2",
        "bottom = 9",
        "third = 3",
    ]

    # After a reload the previous run is known from the conversation: the next request's
    # cells still follow it.
    activate(page, path)
    command(page, "docmanager:save")
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    open_chat(page)
    wait_until(lambda: len(runs(page).all()) == 3, 30, "the conversation's runs")
    ask_and_wait(page, "fourth", 4)
    assert sources(page, path) == [
        "top = 0",
        "first = 1",
        "second = 2",
        "bottom = 9",
        "third = 3",
        "fourth = 4",
    ], dump(page, path)
    assert model_context.jupyter_ci_errors == []


#: An answer with HTML that must not run, and code that must read as written.
HOSTILE_ANSWER = (
    "The **total** is 6, and 1 < 2 & 3 > 2.\n"
    '<img src=x onerror="window.__ciAnswer = 1"> <script>window.__ciAnswer2 = 1</script>\n'
    "[click](javascript:window.__ciAnswer3=1) and "
    '\\`<img src=y onerror="window.__ciAnswer4=1">\\` and `df[df.a < 5]`\n'
    "a ` b\n"
    'c ` <img src=z onerror="window.__ciAnswer5=1"> `\n'
    # Not Python (that would become a cell): a block the answer shows.
    "\n```text\nprint(1 < 2)\n```\n"
)


def rendered_answer(page: Any, path: str, index: int) -> Any:
    """The locator of the rendered answer under the ``%%ci`` cell ``index``."""
    return (
        panel(page, path)
        .locator(".jp-Cell")
        .nth(index)
        .locator(".jp-OutputArea .jp-RenderedMarkdown")
    )


def test_a_ci_answer_is_written_under_its_cell_inert_saved_and_kept_on_a_rerun(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    model.set_script([Reply.code("total = 1 + 2 + 3\nprint(total)"), Reply.text(HOSTILE_ANSWER)])
    path = write_notebook(model_lab, ["%load_ext jupyter_ci", "%%ci add one, two and three"])
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    run_all(page, path)  # the panel is closed: the notebook alone says it
    assert wait_for_status(page, path, 1, NB_TERMINAL)["state"] == "done", dump(page, path)

    # Under the status: the answer as Markdown with its plain-text twin.
    outputs = wait_until(
        lambda: (lambda o: o if len(o) == 2 else None)(cells(page, path)[1]["outputs"]),
        30,
        "the answer under the %%ci cell",
        lambda: dump(page, path),
    )
    data = outputs[1]["data"]
    assert data["text/plain"] == HOSTILE_ANSWER.strip()  # the answer as the run ends with it
    markdown = data["text/markdown"]
    assert "<img" not in markdown, markdown
    assert "<script" not in markdown, markdown
    assert "print(1 < 2)" in markdown  # code reads as written

    # Rendered as trusted Markdown (the cell ran), and still nothing of the model's runs.
    shown = rendered_answer(page, path, 1)
    shown.locator("strong", has_text="total").wait_for(timeout=30_000)
    text = shown.inner_text()
    assert "1 < 2 & 3 > 2" in text
    assert "df[df.a < 5]" in text
    assert "print(1 < 2)" in text
    page.wait_for_timeout(500)  # let any handler that got through fire (none may)
    flags = page.evaluate(
        "() => [1, 2, 3, 4, 5].map(n => window['__ciAnswer' + (n === 1 ? '' : n)] ?? null)"
    )
    assert flags == [None] * 5, flags
    assert shown.locator("img, script, [onerror]").count() == 0
    assert shown.locator("a").count() == 0  # the javascript: link reads as text

    # Saved with the notebook: any frontend reads it.
    activate(page, path)
    command(page, "docmanager:save")
    saved = wait_until(
        lambda: (lambda nb: nb if nb is not None and len(nb.cells[1].outputs) == 2 else None)(
            whole_notebook(Path(model_lab.root_dir) / path)[0]
        ),
        30,
        "the saved answer",
    )
    assert saved.cells[1].outputs[1]["data"]["text/plain"] == HOSTILE_ANSWER.strip()

    # Running the %%ci again reuses its cells, and keeps the answer.
    run_cell(page, path, 1)
    assert wait_for_status(page, path, 1, NB_TERMINAL)["state"] == "reused", dump(page, path)
    kept = wait_until(
        lambda: (lambda o: o if len(o) == 2 else None)(cells(page, path)[1]["outputs"]),
        30,
        "the answer kept on a re-run",
        lambda: dump(page, path),
    )
    assert kept[1]["data"]["text/plain"] == HOSTILE_ANSWER.strip()
    assert len(model.chat_requests) == 2  # no model call for the re-run

    # In the panel, the answer goes into the notebook as a Markdown cell, after the run's cells.
    open_chat(page)
    insert = page.locator(by_testid("jupyter-ci-insert-answer")).last
    insert.wait_for(timeout=30_000)
    assert insert.get_attribute("aria-label") == ANSWER_LABEL
    insert.click()
    inserted = wait_until(
        lambda: next((c for c in cells(page, path) if c["type"] == "markdown"), None),
        30,
        "the answer as a Markdown cell",
    )
    # As the answer output writes it: raw HTML as text, no image (inertMedia.ts).
    assert "The **total** is 6, and 1 &lt; 2 &amp; 3 &gt; 2." in inserted["source"]
    assert "<img" not in inserted["source"]
    assert [c["type"] for c in cells(page, path)] == ["code", "code", "code", "markdown"]
    page.wait_for_timeout(500)
    assert page.evaluate("() => window.__ciAnswer ?? window.__ciAnswer5 ?? null") is None
    assert model_context.jupyter_ci_errors == []


def cell_review(page: Any, path: str, cell_id: str) -> Any:
    """The locator of the review controls on the notebook's cell ``cell_id``."""
    return panel(page, path).locator(
        f'.jp-Cell[data-jupyter-ci-id="{cell_id}"] [data-testid="jupyter-ci-cell-review"]'
    )


def waiting_cell(page: Any, path: str) -> dict[str, Any]:
    """The cell whose review controls show (tagged with its id for locators)."""

    def find() -> dict[str, Any] | None:
        index = page.evaluate(
            "(path) => { const w = Array.from(window.jupyterapp.shell.widgets('main'))"
            ".find(p => p.context && p.context.path === path);"
            " const cells = w.content.widgets;"
            " cells.forEach(c => { c.node.dataset.jupyterCiId = c.model.id; });"
            " return cells.findIndex(c =>"
            " c.node.querySelector('[data-testid=\"jupyter-ci-cell-review\"]')); }",
            path,
        )
        return cells(page, path)[index] if index >= 0 else None

    found: dict[str, Any] = wait_until(
        find, 60, "a cell waiting for review", lambda: dump(page, path)
    )
    return found


def cell_by_id(page: Any, path: str, cell_id: str) -> dict[str, Any]:
    """The notebook's cell ``cell_id``."""
    return next(c for c in cells(page, path) if c["id"] == cell_id)


def wait_output(page: Any, path: str, cell_id: str, text: str, what: str) -> None:
    """Wait until the outputs of the cell ``cell_id`` show ``text``."""
    wait_until(lambda: text in text_of(cell_by_id(page, path, cell_id)["outputs"]), 60, what)


def test_review_works_from_the_notebook_alone(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    model.set_script(
        [
            Reply.code("r1 = 'first'\nprint(r1)"),
            Reply.code("r2 = 'second'\nprint(r2)"),
            Reply.code("r3 = 'third'\nprint(r3)"),
            Reply.code(
                "ran = globals().setdefault('ran', [])\nran.append(4)\nprint('runs', len(ran))"
            ),
            Reply.text("All reviewed."),
        ]
    )
    path = write_notebook(model_lab, ["%load_ext jupyter_ci", "%%ci --review four steps"])
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    run_all(page, path)  # the panel stays closed

    # The first cell waits: its controls are in the notebook, labelled, and a notification says
    # so with the same actions.
    first = waiting_cell(page, path)
    assert first["source"] == "r1 = 'first'\nprint(r1)"
    controls = cell_review(page, path, first["id"])
    assert controls.get_attribute("aria-label") == "jupyter-ci: this cell waits for your review"
    run = controls.get_by_role("button", name="Run this cell")
    edit = controls.get_by_role("button", name="Edit the cell before running it")
    reject = controls.get_by_role("button", name="Reject this cell without running it")
    for button in (run, edit, reject):
        assert button.evaluate("(b) => b.tabIndex") == 0  # in the page's tab order
    toasts = page.locator(".Toastify__toast", has_text="waits for your review")
    toast = toasts.first
    toast.wait_for(timeout=30_000)
    for label in ("Run", "Edit", "Reject"):
        assert toast.get_by_role("button", name=label).count() == 1
    # Run from the keyboard.
    run.focus()
    page.keyboard.press("Enter")
    wait_output(page, path, first["id"], "first", "cell 1 ran")

    # The second: Edit puts the cell in edit mode; Run then sends the user's version.
    second = waiting_cell(page, path)
    assert second["source"] == "r2 = 'second'\nprint(r2)"
    cell_review(page, path, second["id"]).get_by_role(
        "button", name="Edit the cell before running it"
    ).click()
    page.wait_for_function(
        "(id) => { const w = window.jupyterapp.shell.currentWidget;"
        " return w.content.mode === 'edit' && w.content.activeCell.model.id === id"
        " && w.content.activeCell.editor.hasFocus(); }",
        arg=second["id"],
        timeout=30_000,
    )
    page.keyboard.press("Control+a")
    page.keyboard.insert_text("r2 = 'mine'\nprint(r2)")
    cell_review(page, path, second["id"]).get_by_role(
        "button", name="Run your version of the cell"
    ).click()
    wait_output(page, path, second["id"], "mine", "the user's version ran")

    # The third: Reject; the model's other proposal replaces it, and the user runs it
    # themselves with Shift+Enter, which counts as Run (the run goes on, and the cell is not
    # run a second time).
    third = waiting_cell(page, path)
    assert third["source"] == "r3 = 'third'\nprint(r3)"
    # Opening the panel on this notebook: its review card asks the same, the notification goes
    # (the notebook's controls stay).
    toast.wait_for(timeout=30_000)
    open_chat(page)
    page.locator(by_testid("jupyter-ci-review")).wait_for(timeout=30_000)
    wait_until(lambda: toasts.count() == 0, 30, "the notification dismissed with the panel open")
    assert cell_review(page, path, third["id"]).count() == 1
    cell_review(page, path, third["id"]).get_by_role(
        "button", name="Reject this cell without running it"
    ).click()
    wait_until(
        lambda: cell_by_id(page, path, third["id"])["source"].startswith("ran ="),
        60,
        "the other proposal",
    )
    again = waiting_cell(page, path)
    assert again["id"] == third["id"]
    panel(page, path).locator(f'.jp-Cell[data-jupyter-ci-id="{third["id"]}"] .cm-content').click()
    page.keyboard.press("Shift+Enter")
    status = wait_for_status(page, path, 1, NB_TERMINAL)
    assert status["state"] == "done", dump(page, path)
    final = cell_by_id(page, path, third["id"])
    assert text_of(final["outputs"]).strip() == "runs 1", dump(page, path)
    assert "All reviewed." in text_of(cells(page, path)[1]["outputs"])
    assert panel(page, path).locator('[data-testid="jupyter-ci-cell-review"]').count() == 0
    wait_until(lambda: toasts.count() == 0, 30, "the notifications dismissed")
    assert "runs 1" in str(model.chat_requests[-1].messages[-1]), model.chat_requests[-1].messages[
        -1
    ]
    assert model_context.jupyter_ci_errors == []


def test_run_all_again_while_a_cell_waits_for_review_follows_the_same_request(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    model.set_script([Reply.code("r1 = 'first'\nprint(r1)"), Reply.text("First request done.")])
    path = write_notebook(
        model_lab,
        ["%load_ext jupyter_ci", "%%ci --review one step", "after = 'user cell'\nprint(after)"],
    )
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    run_all(page, path)
    waiting = waiting_cell(page, path)
    # Run All again: the %%ci follows its request still going (nothing deleted, the model not
    # asked again); Run All running the waiting cell counts as Run; the user's cell runs after.
    run_all(page, path)
    status = wait_for_status(page, path, 1, NB_TERMINAL)
    assert status["state"] == "done", dump(page, path)

    def user_cell_done() -> bool:
        # Its output comes before its reply, which sets the execution count.
        last = cells(page, path)[-1]
        return "user cell" in text_of(last["outputs"]) and last["execution_count"] is not None

    wait_until(user_cell_done, 60, "the user's cell")
    now = cells(page, path)
    assert [c["source"] for c in now[2:]] == [
        waiting["source"],
        "after = 'user cell'\nprint(after)",
    ]
    assert now[2]["id"] == waiting["id"]
    assert text_of(now[2]["outputs"]) == "first\n"  # run once
    assert now[2]["execution_count"] < now[3]["execution_count"]  # in reading order
    shown = text_of(now[1]["outputs"])
    assert "still going: following it, not asking again" in shown, shown
    assert "First request done." in shown
    assert len(model.chat_requests) == 2
    assert panel(page, path).locator('[data-testid="jupyter-ci-cell-review"]').count() == 0
    assert model_context.jupyter_ci_errors == []


def test_a_missing_package_asks_to_install_and_continue_in_the_notebook_and_the_panel(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    model.set_script(
        [
            Reply.code(USES_IT),
            Reply.text("It is 42."),
            Reply.code("import another_missing_pkg\nprint('never')"),
        ]
    )
    path = write_notebook(model_lab, ["%load_ext jupyter_ci", "%%ci use the demo package"])
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    run_all(page, path)  # auto mode, the panel closed

    # The %pip install cell waits above the failed one, with its own words.
    pip_cell = waiting_cell(page, path)
    assert pip_cell["source"] == f"%pip install {PACKAGE}"
    controls = cell_review(page, path, pip_cell["id"])
    assert "a package is missing — install it and continue?" in controls.inner_text()
    assert controls.get_by_role("button", name="Install and continue").count() == 1
    assert controls.get_by_role("button", name="Don't install").count() == 1
    toast = page.locator(".Toastify__toast", has_text="a package is missing").first
    toast.wait_for(timeout=30_000)
    assert toast.get_by_role("button", name="Install and continue").count() == 1
    assert toast.get_by_role("button", name="Don't install").count() == 1
    controls.get_by_role("button", name="Install and continue").click()
    # Installed, and the failed cell ran again within the same run.
    assert wait_for_status(page, path, 1, NB_TERMINAL)["state"] == "done", dump(page, path)
    used = next(c for c in cells(page, path) if c["source"] == USES_IT)
    assert text_of(used["outputs"]).strip() == "42", dump(page, path)
    assert len(model.chat_requests) == 2  # no fix asked for: the same code ran again

    # In the panel: the review card asks the same; Don't install ends the request.
    open_chat(page)
    ask(page, "use another package")
    card = page.locator(by_testid("jupyter-ci-review"))
    card.wait_for(timeout=60_000)
    assert "A package is missing: install it and continue?" in card.inner_text()
    assert card.get_by_role("button", name="Install and continue").count() == 1
    card.get_by_role("button", name="Don't install").click()
    assert wait_run_state(page, TERMINAL) == "failed", conversation_text(page)
    pip_again = next(
        c for c in cells(page, path) if c["source"] == "%pip install another_missing_pkg"
    )
    assert pip_again["outputs"] == []  # never run
    assert model_context.jupyter_ci_errors == []
