"""The chat side panel in real JupyterLab, with the scripted model: one conversation per
notebook, streamed and rendered safely, steps linking to cells, Stop, review, models and
setup, usage, preview, attachments, "Fix with jupyter-ci", clear and export, keyboard access.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_ci.errors import LAB_SETUP_COMMAND, LOCAL_LAB_SETUP_COMMAND
from jupyter_ci.testing import Reply, ScriptedModelServer

from .chat import (
    PANEL,
    ask,
    by_testid,
    conversation_text,
    fake_ollama,
    messages,
    open_chat,
    request_text,
    run_cells,
    runs,
    set_theme,
    steps,
    wait_run_state,
)
from .lab import Lab, screenshot, start_lab
from .notebooks import (
    activate,
    cells,
    command,
    dump,
    open_lab_app,
    open_notebook,
    run_all,
    run_cell,
    text_of,
    wait_until,
    write_iris,
    write_notebook,
)

TERMINAL = ("done", "failed", "stopped")


def test_a_request_streams_steps_linked_to_cells_and_usage(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    model.set_script(
        [
            Reply.code("x = 21 * 2\nprint('x is', x)", prose="Computing **x**."),
            Reply.text("The answer is **42**."),
        ]
    )
    path = write_notebook(model_lab, ["a = 1"])
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    open_chat(page)
    assert page.locator(by_testid("jupyter-ci-path")).inner_text() == path

    ask(page, "compute x")
    assert wait_run_state(page, TERMINAL) == "done", conversation_text(page)
    in_nb = cells(page, path)
    assert len(in_nb) == 2, dump(page, path)
    assert "x is 42" in text_of(in_nb[1]["outputs"])
    shown = steps(page)
    assert shown[0] == "Cell 1 inserted"
    assert "Ran" in shown
    assert shown[-1].startswith("Done")
    assert messages(page, "user") == ["compute x"]
    # The final answer is Markdown rendered by rendermime: bold is <strong>, not asterisks.
    answer = page.locator(f"{PANEL} [data-role='assistant'] strong", has_text="42")
    answer.wait_for(timeout=30_000)
    # Usage for the run, and for the conversation (from the server's store).
    run_usage = page.locator(by_testid("jupyter-ci-run-usage")).last
    assert "tokens" in run_usage.inner_text()
    total = page.locator(by_testid("jupyter-ci-conversation-usage"))
    wait_until(lambda: "1 run(s)" in total.inner_text(), 30, "the conversation's usage")
    # A step links to its cell: clicking it selects (and scrolls to) the cell.
    command(page, "notebook:move-cursor-up")
    page.locator(f"{PANEL} [data-testid='jupyter-ci-step'] button").first.click()
    active = page.evaluate(
        "(path) => { const w = window.jupyterapp.shell.widgets('main');"
        " for (const p of w) { if (p.context && p.context.path === path)"
        " return p.content.activeCell.model.id; } return null; }",
        path,
    )
    assert active == in_nb[1]["id"]

    # After a reload the run's steps and its usage come back from the server's store, after its
    # messages, as they were shown while it ran.
    usage_shown = run_usage.inner_text()
    open_lab_app(page, model_lab)  # a new page load: nothing is kept in the browser
    open_notebook(page, path)
    open_chat(page)
    wait_until(lambda: steps(page) == shown, 30, "the run's steps after a reload")
    assert page.locator(by_testid("jupyter-ci-run-usage")).last.inner_text() == usage_shown
    assert messages(page, "user") == ["compute x"]
    assert "The answer is 42." in messages(page, "assistant")[-1]
    assert model_context.jupyter_ci_errors == []


def test_model_html_executes_nothing_and_code_blocks_insert_and_copy(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    hostile = (
        'Look: <img src=x onerror="window.__ciPwned = 1"> and '
        '<script>window.__ciPwned2 = 1</script> <a href="javascript:window.__ciPwned3=1">x</a>'
        # Not Python (that would become a cell): a block the answer shows.
        "\n\n```bash\npip install from-the-chat\n```\n"
    )
    model.set_script([Reply.text(hostile)])
    path = write_notebook(model_lab, ["b = 2"])
    model_context.grant_permissions(["clipboard-read", "clipboard-write"])
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    open_chat(page)
    ask(page, "say something odd")
    assert wait_run_state(page, TERMINAL) == "done", conversation_text(page)
    assistant = page.locator(f"{PANEL} [data-role='assistant']").first
    assistant.locator("pre").wait_for(timeout=30_000)
    # The image is an inert link to its URL (inertMedia.ts).
    page.locator(f"{PANEL} .jp-jupyter-ci-inert-embed").first.wait_for(timeout=10_000)
    assert page.locator(f"{PANEL} img").count() == 0
    time.sleep(0.5)  # let any handler that survived sanitizing fire (none may)
    flags = page.evaluate("() => [window.__ciPwned, window.__ciPwned2, window.__ciPwned3]")
    assert flags == [None, None, None]
    assert page.locator(f"{PANEL} script").count() == 0
    assert page.locator(f"{PANEL} [onerror]").count() == 0
    assert page.locator(f"{PANEL} a[href^='javascript']").count() == 0
    # The code block has its buttons; Insert below makes a cell with its code.
    insert = assistant.get_by_role("button", name="Insert this code as a new cell below")
    copy = assistant.get_by_role("button", name="Copy this code to the clipboard")
    assert copy.is_visible()
    activate(page, path)
    insert.click()
    wait_until(
        lambda: any(c["source"] == "pip install from-the-chat" for c in cells(page, path)),
        30,
        "the inserted cell",
    )
    copy.click()
    clip = wait_until(lambda: page.evaluate("() => navigator.clipboard.readText()"), 10, "copy")
    assert "pip install from-the-chat" in clip
    assert model_context.jupyter_ci_errors == []


#: A cell that says when it has begun, then runs for up to 60 s (unless interrupted).
LONG_CELL = "import time\nprint('started', flush=True)\nfor _ in range(600):\n    time.sleep(0.1)"


def test_stop_mid_run_then_the_next_request_works_with_light_and_dark_screenshots(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer, artifacts: Path
) -> None:
    model.set_script([Reply.code(LONG_CELL, prose="This takes a while."), Reply.text("Back.")])
    path = write_notebook(model_lab, ["c = 3"])
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    open_chat(page)
    ask(page, "wait a minute")
    stop = page.locator(by_testid("jupyter-ci-stop"))
    stop.wait_for(timeout=60_000)
    wait_until(
        lambda: (
            len(cells(page, path)) == 2 and "started" in text_of(cells(page, path)[1]["outputs"])
        ),
        90,
        "the long cell to start",
    )
    page.locator(f"{PANEL} [data-testid='jupyter-ci-step']", has_text="Running").wait_for()
    try:
        light = screenshot(page, "chat-panel-mid-run-light")
        set_theme(page, "JupyterLab Dark")
        dark = screenshot(page, "chat-panel-mid-run-dark")
        background = page.evaluate(
            "(sel) => getComputedStyle(document.querySelector(sel)).backgroundColor", PANEL
        )
    finally:
        set_theme(page, "JupyterLab Light")
    assert light.stat().st_size > 10_000
    assert dark.stat().st_size > 10_000
    # The dark theme's panel background is dark (JupyterLab's variables, not fixed colours).
    red, green, blue = (int(v) for v in background[background.index("(") + 1 : -1].split(",")[:3])
    assert red + green + blue < 200, background
    # Still running: the panel offers Stop, not Send.
    assert page.locator(by_testid("jupyter-ci-send")).count() == 0

    stop.click()
    assert wait_run_state(page, TERMINAL, timeout=60) == "stopped", conversation_text(page)
    long_cell = cells(page, path)[1]
    assert "KeyboardInterrupt" in text_of(long_cell["outputs"]), dump(page, path)
    # The panel takes the next request at once, and it runs normally.
    page.locator(by_testid("jupyter-ci-send")).wait_for(timeout=30_000)
    ask(page, "are you back?")
    wait_until(lambda: len(page.locator(by_testid("jupyter-ci-run")).all()) == 2, 30, "a new run")
    assert wait_run_state(page, TERMINAL) == "done", conversation_text(page)
    assert messages(page, "assistant")[-1] == "Back."
    assert model_context.jupyter_ci_errors == []


def set_mode(page: Any, mode: str) -> None:
    """Choose the mode in the panel (saved as the user's setting)."""
    page.locator(by_testid("jupyter-ci-mode")).select_option(mode)


def test_review_mode_run_edit_and_reject(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    model.set_script(
        [
            Reply.code("r1 = 'first'\nprint(r1)"),
            Reply.code("r2 = 'second'\nprint(r2)"),
            Reply.text("Both ran."),
            Reply.code("r3 = 'third'\nprint(r3)"),
            Reply.text("Noted: I will not run it."),
            Reply.text("Nothing else to do."),
        ]
    )
    path = write_notebook(model_lab, ["r0 = 0"])
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    open_chat(page)
    set_mode(page, "review")
    try:
        ask(page, "two cells, reviewed")
        review = page.locator(by_testid("jupyter-ci-review"))
        review.wait_for(timeout=60_000)
        # A new cell shows as its code (not as an all-"+" diff).
        shown = review.locator(by_testid("jupyter-ci-diff")[len(PANEL) + 1 :]).inner_text()
        assert shown.splitlines() == ["r1 = 'first'", "print(r1)"]
        # Waiting: the proposed cell is in the notebook but has not run.
        first = cells(page, path)[1]
        assert first["source"] == "r1 = 'first'\nprint(r1)"
        assert first["outputs"] == []
        review.get_by_role("button", name="Run this cell").click()
        wait_until(lambda: "first" in text_of(cells(page, path)[1]["outputs"]), 60, "cell 1 ran")
        # The second cell: Edit, then Run runs the user's version.
        wait_until(
            lambda: "r2 = 'second'" in review.inner_text() if review.count() else False,
            60,
            "the second proposal",
        )
        review.get_by_role("button", name="Edit the cell before running it").click()
        editor = page.locator(by_testid("jupyter-ci-review-editor"))
        editor.fill("r2 = 'mine'\nprint(r2)")
        review.get_by_role("button", name="Run your version of the cell").click()
        assert wait_run_state(page, TERMINAL) == "done", conversation_text(page)
        second = cells(page, path)[2]
        assert second["source"] == "r2 = 'mine'\nprint(r2)", dump(page, path)
        assert "mine" in text_of(second["outputs"])
        assert messages(page, "assistant")[-1] == "Both ran."
        # The panel's cells give the code that ran: the user's edit included.
        assert "Edited by you" in steps(page), steps(page)
        wait_until(
            lambda: (
                [c["code"] for c in run_cells(page) if c["rendered"]]
                == ["r1 = 'first'\nprint(r1)", "r2 = 'mine'\nprint(r2)"]
            ),
            30,
            "the run's cells",
        )

        # Reject: the cell never runs; the model is told at once, answers in prose, and the
        # run ends, saying so.
        ask(page, "one more")
        review.wait_for(timeout=60_000)
        review.get_by_role("button", name="Reject this cell without running it").click()
        assert wait_run_state(page, TERMINAL) == "done", conversation_text(page)
        assert steps(page)[-1] == "Done (rejected in review)", steps(page)
        # The rejection is the user's word in the conversation, shown once (from the run).
        said = messages(page, "user")
        assert said[:2] == ["two cells, reviewed", "one more"], said
        assert len(said) == 3, said
        assert said[2].startswith("I rejected the cell you proposed, without running it."), said
        assert "r3 = 'third'" in said[2]
        assert "The user rejected this cell" in request_text(model.chat_requests[-1])
        assert messages(page, "assistant")[-1] == "Noted: I will not run it."
        third = next(c for c in cells(page, path) if c["source"].startswith("r3"))
        assert third["source"] == "r3 = 'third'\nprint(r3)"
        assert third["outputs"] == []
        assert third["execution_count"] is None
        # The rejection is reported to the model with the notebook's next request.
        ask(page, "and now?")
        wait_until(lambda: len(runs(page).all()) == 3, 30, "a third run")
        assert wait_run_state(page, TERMINAL) == "done", conversation_text(page)
        assert "I rejected the cell you proposed" in request_text(model.chat_requests[-1])
        assert "r3 = 'third'" in request_text(model.chat_requests[-1])
    finally:
        set_mode(page, "")
    assert model_context.jupyter_ci_errors == []


def test_switching_notebooks_switches_the_conversation_and_history_survives_a_reload(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    model.set_script([Reply.text("Answer for A."), Reply.text("Answer for B.")])
    a = write_notebook(model_lab, ["in_a = 1"])
    b = write_notebook(model_lab, ["in_b = 2"])
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, b)
    open_notebook(page, a)
    open_chat(page)
    ask(page, "question about A")
    assert wait_run_state(page, TERMINAL) == "done"
    assert messages(page, "assistant") == ["Answer for A."]

    activate(page, b)
    wait_until(lambda: page.locator(by_testid("jupyter-ci-path")).inner_text() == b, 30, "B bound")
    page.locator(by_testid("jupyter-ci-empty")).wait_for(timeout=30_000)
    assert messages(page, "assistant") == []
    ask(page, "question about B")
    assert wait_run_state(page, TERMINAL) == "done"
    assert messages(page, "user") == ["question about B"]
    assert messages(page, "assistant") == ["Answer for B."]

    activate(page, a)
    wait_until(lambda: messages(page, "assistant") == ["Answer for A."], 30, "A's conversation")
    assert messages(page, "user") == ["question about A"]

    # After a reload, the conversation comes back from the server's store.
    open_lab_app(page, model_lab)  # a new page load: nothing is kept in the browser
    open_notebook(page, a)
    open_chat(page)
    wait_until(lambda: messages(page, "assistant") == ["Answer for A."], 30, "A's history")
    assert messages(page, "user") == ["question about A"]
    assert model_context.jupyter_ci_errors == []


def test_model_picker_is_fed_by_the_server_and_kept_as_the_users_default(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    path = write_notebook(model_lab, ["m = 1"])
    open_notebook(page, path)
    open_chat(page)
    picker = page.locator(by_testid("jupyter-ci-model"))
    options = picker.locator("option").evaluate_all("(os) => os.map(o => o.value)")
    assert options == ["", "openai/scripted"]
    try:
        picker.select_option("openai/scripted")
        open_lab_app(page, model_lab)  # a new page load
        open_notebook(page, path)
        open_chat(page)
        wait_until(
            lambda: page.locator(by_testid("jupyter-ci-model")).input_value() == "openai/scripted",
            30,
            "the saved default model",
        )
        model.set_script([Reply.text("Picked.")])
        ask(page, "which model?")
        assert wait_run_state(page, TERMINAL) == "done"
        assert model.chat_requests[-1].body["model"] == "scripted"
    finally:
        page.locator(by_testid("jupyter-ci-model")).select_option("")
    assert model_context.jupyter_ci_errors == []


def write_tagged_notebook(lab: Lab) -> str:
    """A notebook whose first cell prints a computed value and whose second is skip-tagged."""
    import nbformat

    path = f"skip-{time.monotonic_ns()}.ipynb"
    notebook = nbformat.v4.new_notebook()
    shown = nbformat.v4.new_code_cell("secret = 'VAL' + 'UE-' + str(12345)\nprint(secret)")
    hidden = nbformat.v4.new_code_cell("hidden = 'SKIPPED-CELL-TEXT'")
    hidden.metadata["tags"] = ["jupyter-ci-skip"]
    notebook.cells = [shown, hidden]
    notebook.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(notebook, str(Path(lab.root_dir) / path))
    return path


def test_preview_shows_what_is_sent_and_the_share_outputs_switch_keeps_values_out(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    path = write_tagged_notebook(model_lab)
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    run_cell(page, path, 0)
    wait_until(lambda: "VALUE-12345" in text_of(cells(page, path)[0]["outputs"]), 60, "output")
    open_chat(page)
    page.locator(by_testid("jupyter-ci-input")).fill("summarise the notebook")
    share = page.locator(by_testid("jupyter-ci-share-outputs"))
    assert share.is_checked()
    page.locator(by_testid("jupyter-ci-preview-button")).click()
    preview = page.locator(by_testid("jupyter-ci-preview"))
    preview.wait_for(timeout=60_000)
    tokens = page.locator(by_testid("jupyter-ci-preview-tokens")).inner_text()
    assert int(tokens.split(" ")[0].replace(",", "")) > 0
    shown = preview.evaluate("(e) => e.textContent")
    assert "summarise the notebook" in shown
    assert "VALUE-12345" in shown
    assert "SKIPPED-CELL-TEXT" not in shown
    assert model.chat_requests == []  # a preview calls no model
    try:
        share.uncheck()
        page.locator(by_testid("jupyter-ci-preview-button")).click()
        wait_until(
            lambda: "VALUE-12345" not in preview.evaluate("(e) => e.textContent"),
            60,
            "a preview without output values",
        )
        withheld = preview.evaluate("(e) => e.textContent")
        assert "summarise the notebook" in withheld
        assert "secret" in withheld
        # The request itself is sent the same way.
        model.set_script([Reply.text("Summary.")])
        page.locator(by_testid("jupyter-ci-input")).press("Enter")
        assert wait_run_state(page, TERMINAL) == "done"
        sent = request_text(model.chat_requests[-1])
        assert "VALUE-12345" not in sent
        assert "SKIPPED-CELL-TEXT" not in sent
        assert "summarise the notebook" in sent
    finally:
        share.check()
    assert model_context.jupyter_ci_errors == []


def test_fix_with_jupyter_ci_from_the_cell_context_menu(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    model.set_script([Reply.code("print(10 / 2)", prose="Dividing by two instead of zero.")])
    path = write_notebook(model_lab, ["print(10 / 0)"])
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    run_cell(page, path, 0)
    wait_until(lambda: "ZeroDivisionError" in text_of(cells(page, path)[0]["outputs"]), 60, "error")
    open_chat(page)
    activate(page, path)
    cell = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-CodeCell").first
    cell.locator(".jp-OutputArea-output").first.click(button="right")
    item = page.locator(".lm-Menu-item", has_text="Fix with jupyter-ci")
    item.wait_for(timeout=10_000)
    item.click()
    assert wait_run_state(page, TERMINAL) == "done", conversation_text(page)
    fixed = cells(page, path)
    assert len(fixed) == 1, dump(page, path)
    assert fixed[0]["source"] == "print(10 / 2)"
    assert "5.0" in text_of(fixed[0]["outputs"])
    sent = request_text(model.chat_requests[0])
    assert "print(10 / 0)" in sent
    assert "ZeroDivisionError" in sent
    assert messages(page, "user")[-1].startswith("Fix the failing cell")
    assert model_context.jupyter_ci_errors == []


def test_attach_selected_cells_and_files_by_command_and_drag_and_drop(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    write_iris(model_lab)
    (Path(model_lab.root_dir) / "dropped.csv").write_text("alpha,beta\n1,2\n3,4\n")
    model.set_script([Reply.text("Seen them.")])
    path = write_notebook(model_lab, ["attached_marker = 'CELL-MARKER'", "other = 0"])
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    open_chat(page)
    activate(page, path)
    page.evaluate(
        "(path) => { for (const p of window.jupyterapp.shell.widgets('main')) {"
        " if (p.context && p.context.path === path) { p.content.activeCellIndex = 0; } } }",
        path,
    )
    page.locator(by_testid("jupyter-ci-attach-cells")).click()
    chips = page.locator(by_testid("jupyter-ci-attachments"))
    wait_until(lambda: "cell [1]" in chips.inner_text(), 30, "the cell chip")
    # A file from the file browser's context menu.
    command(page, "filebrowser:activate")
    command(page, "filebrowser:refresh")
    iris = page.locator(".jp-DirListing-item", has_text="iris.csv")
    iris.wait_for(timeout=30_000)
    iris.click(button="right")
    page.locator(".lm-Menu-item", has_text="Attach to jupyter-ci").click()
    wait_until(lambda: "iris.csv" in chips.inner_text(), 30, "the file chip")
    page.keyboard.press("Escape")
    # A file dragged from the file browser onto the panel.
    item = page.locator(".jp-DirListing-item", has_text="dropped.csv")
    item.wait_for(timeout=30_000)
    box = item.bounding_box()
    target = page.locator(by_testid("jupyter-ci-conversation")).bounding_box()
    page.mouse.move(box["x"] + 20, box["y"] + box["height"] / 2)
    page.mouse.down()
    for step in range(1, 11):
        page.mouse.move(
            box["x"] + 20 + (target["x"] + 50 - box["x"] - 20) * step / 10,
            box["y"] + (target["y"] + 50 - box["y"]) * step / 10,
        )
    page.mouse.up()
    wait_until(lambda: "dropped.csv" in chips.inner_text(), 30, "the dropped file chip")
    ask(page, "look at these")
    assert wait_run_state(page, TERMINAL) == "done", conversation_text(page)
    sent = request_text(model.chat_requests[-1])
    assert "CELL-MARKER" in sent
    assert "iris.csv" in sent
    assert "sepal_length" in sent
    assert "dropped.csv" in sent
    assert "alpha" in sent
    assert page.locator(by_testid("jupyter-ci-attachments")).count() == 0  # sent, then cleared
    assert model_context.jupyter_ci_errors == []


DROP_FILES = """([selector, files]) => {
  const transfer = new DataTransfer();
  for (const [name, text] of files) {
    transfer.items.add(new File([text], name, { type: 'text/csv' }));
  }
  const target = document.querySelector(selector);
  for (const type of ['dragenter', 'dragover', 'drop']) {
    target.dispatchEvent(
      new DragEvent(type, { dataTransfer: transfer, bubbles: true, cancelable: true })
    );
  }
}"""


def test_files_dropped_from_the_desktop_are_uploaded_next_to_the_notebook_and_attached(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    folder = Path(model_lab.root_dir) / "work"
    folder.mkdir(exist_ok=True)
    (folder / "sales.csv").write_text("mine,untouched\n")
    model.set_script([Reply.text("Seen it.")])
    path = write_notebook(model_lab, ["x = 1"], name=f"work/t-{time.time_ns()}.ipynb")
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    open_chat(page)
    page.evaluate(DROP_FILES, [PANEL, [["sales.csv", "region,amount\nnorth,12\n"]]])
    chips = page.locator(by_testid("jupyter-ci-attachments"))
    wait_until(lambda: "sales (1).csv" in chips.inner_text(), 30, "the uploaded file's chip")
    # Uploaded next to the notebook under a free name: the user's file of that name is intact.
    assert (folder / "sales (1).csv").read_text() == "region,amount\nnorth,12\n"
    assert (folder / "sales.csv").read_text() == "mine,untouched\n"
    wait_until(
        lambda: any("Uploaded sales (1).csv to work" in m for m in messages(page, "notice")),
        30,
        "the upload's notice",
    )
    # The server reads the attached file for the request, as any attachment.
    ask(page, "summarise the sales")
    assert wait_run_state(page, TERMINAL) == "done", conversation_text(page)
    sent = request_text(model.chat_requests[-1])
    assert "region" in sent
    assert "amount" in sent
    assert model_context.jupyter_ci_errors == []


def test_clear_with_confirmation_and_export_as_markdown(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    model.set_script([Reply.text("An answer worth keeping.")])
    path = write_notebook(model_lab, ["e = 5"])
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    open_chat(page)
    ask(page, "say something")
    assert wait_run_state(page, TERMINAL) == "done"
    with page.expect_download(timeout=30_000) as download:
        page.locator(by_testid("jupyter-ci-export")).click()
    assert download.value.suggested_filename == f"{path[:-6]}-jupyter-ci.md"
    text = Path(download.value.path()).read_text()
    assert "**You:**" in text
    assert "say something" in text
    assert "An answer worth keeping." in text

    page.locator(by_testid("jupyter-ci-clear")).click()
    page.locator(".jp-Dialog").get_by_role("button", name="Cancel").click()
    assert messages(page, "assistant") == ["An answer worth keeping."]
    page.locator(by_testid("jupyter-ci-clear")).click()
    page.locator(".jp-Dialog").get_by_role("button", name="Clear the conversation").click()
    page.locator(by_testid("jupyter-ci-empty")).wait_for(timeout=30_000)
    assert messages(page, "assistant") == []
    open_lab_app(page, model_lab)  # a new page load
    open_notebook(page, path)
    open_chat(page)
    page.locator(by_testid("jupyter-ci-empty")).wait_for(timeout=30_000)
    assert messages(page, "user") == []
    assert model_context.jupyter_ci_errors == []


def test_every_control_is_labelled_and_reachable_by_keyboard(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    model.set_script([Reply.text("Typed with keys.")])
    path = write_notebook(model_lab, ["k = 1"])
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    open_chat(page)
    controls = page.evaluate(
        "(sel) => Array.from(document.querySelector(sel).querySelectorAll("
        "'button, select, textarea, input')).map(e => ({tag: e.tagName, tabIndex: e.tabIndex,"
        " name: e.getAttribute('aria-label') || e.textContent.trim()}))",
        PANEL,
    )
    assert len(controls) >= 9
    assert all(c["tabIndex"] >= 0 for c in controls), controls
    assert all(c["name"] for c in controls), controls
    # Keyboard only: Enter sends, Shift+Enter adds a line, Up recalls the last request.
    box = page.locator(by_testid("jupyter-ci-input"))
    box.focus()
    page.keyboard.type("first line")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("second line")
    assert box.input_value() == "first line\nsecond line"
    page.keyboard.press("Enter")
    assert wait_run_state(page, TERMINAL) == "done"
    assert messages(page, "user") == ["first line\nsecond line"]
    assert box.input_value() == ""
    box.focus()
    page.keyboard.press("ArrowUp")
    assert box.input_value() == "first line\nsecond line"
    page.keyboard.press("ArrowDown")
    assert box.input_value() == ""
    # Tab moves from the box to the panel's buttons.
    box.focus()
    page.keyboard.press("Tab")
    focused = page.evaluate("() => document.activeElement.getAttribute('aria-label')")
    assert focused == "Attach the selected cells to the next request"
    assert model_context.jupyter_ci_errors == []


@pytest.fixture(scope="module")
def bare_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """A JupyterLab with no model configured, and a local 'Ollama' that offers one."""
    with (
        fake_ollama(["qwen2.5-coder:1.5b"]) as ollama,
        start_lab(
            tmp_path_factory.mktemp("bare-lab"),
            args=["--LabApp.expose_app_in_browser=True"],
            env={"JUPYTER_CI_OLLAMA_URL": ollama, "JUPYTER_CI_MODEL": ""},
        ) as running,
    ):
        yield running


def test_setup_card_when_no_model_is_configured(chromium: Any, bare_lab: Lab) -> None:
    context = chromium.new_context(viewport={"width": 1400, "height": 900})
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        open_lab_app(page, bare_lab)
        path = write_notebook(bare_lab, ["s = 1"])
        open_notebook(page, path)
        open_chat(page)
        card = page.locator(by_testid("jupyter-ci-setup"))
        card.wait_for(timeout=30_000)
        # The server gives a local Ollama half a second to answer; on a busy machine it may
        # miss it once, and the user's Refresh asks again.
        offered = page.locator(by_testid("jupyter-ci-ollama"))

        def ollama_offered() -> bool:
            if offered.count():
                return True
            page.locator(by_testid("jupyter-ci-refresh")).click()
            time.sleep(1)  # one status request at a time
            return bool(offered.count())

        wait_until(ollama_offered, 60, "the local Ollama offered")
        text = card.inner_text()
        assert "c.JupyterCI.model" in text
        assert "JUPYTER_CI_API_KEY" in text
        # The command lines the server's tests follow word for word (tests/lab/test_hints_*).
        command = page.locator(by_testid("jupyter-ci-setup-command")).inner_text()
        assert command == LAB_SETUP_COMMAND
        local = page.locator(by_testid("jupyter-ci-setup-local")).inner_text()
        assert local == LOCAL_LAB_SETUP_COMMAND
        assert "does not reach the server" in text
        assert 'c.JupyterCI.model = "ollama/qwen2.5-coder:1.5b"' in text
        assert "no model configured" in page.locator(by_testid("jupyter-ci-status")).inner_text()
        box = page.locator(by_testid("jupyter-ci-input"))
        assert box.is_disabled()
        assert box.get_attribute("placeholder") == "Configure a model first (see above)"
        screenshot(page, "chat-panel-setup-card")
        assert errors == []
    finally:
        context.close()


def test_a_configured_model_without_a_provider_says_what_to_write(
    chromium: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    with start_lab(
        tmp_path_factory.mktemp("no-provider-lab"),
        args=["--LabApp.expose_app_in_browser=True"],
        env={"JUPYTER_CI_MODEL": "gpt4o-mini", "JUPYTER_CI_OLLAMA_URL": "http://127.0.0.1:9"},
    ) as lab:
        context = chromium.new_context(viewport={"width": 1400, "height": 900})
        try:
            page = context.new_page()
            open_lab_app(page, lab)
            open_notebook(page, write_notebook(lab, ["s = 1"]))
            open_chat(page)
            card = page.locator(by_testid("jupyter-ci-setup"))
            card.wait_for(timeout=30_000)
            assert "The configured model cannot be used" in card.inner_text()
            problem = page.locator(by_testid("jupyter-ci-config-problem")).inner_text()
            assert "'gpt4o-mini' does not name a provider litellm knows" in problem
            assert "Use provider/model, e.g. openai/gpt-4o-mini." in problem
            assert page.locator(by_testid("jupyter-ci-input")).is_disabled()
        finally:
            context.close()


def test_fix_with_jupyter_ci_from_the_toolbar_of_a_failed_cell(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    model.set_script([Reply.code("items = [1, 2]\nprint(items[1])")])
    path = write_notebook(model_lab, ["fine = 1", "items = [1, 2]\nprint(items[5])"])
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    run_cell(page, path, 0)
    run_cell(page, path, 1)
    wait_until(lambda: "IndexError" in text_of(cells(page, path)[1]["outputs"]), 60, "error")
    notebook = page.locator(f'.jp-NotebookPanel[data-jupyter-ci-path="{path}"]')
    fix = notebook.locator('.jp-cell-toolbar [data-command="jupyter-ci:fix-cell"]')
    fix.first.wait_for(timeout=30_000)
    # Only the failed cell offers it: on the cell that ran fine, the button is not shown.
    run_cell(page, path, 0)
    wait_until(lambda: not fix.first.is_visible(), 30, "no Fix on a cell that ran fine")
    page.evaluate(
        "(path) => { for (const p of window.jupyterapp.shell.widgets('main')) {"
        " if (p.context && p.context.path === path) { p.content.activeCellIndex = 1; } } }",
        path,
    )
    fix.first.wait_for(state="visible", timeout=30_000)
    fix.first.click()
    open_chat(page)
    assert wait_run_state(page, TERMINAL) == "done", conversation_text(page)
    fixed = cells(page, path)
    assert fixed[1]["source"] == "items = [1, 2]\nprint(items[1])"
    assert "2" in text_of(fixed[1]["outputs"])
    assert "IndexError" in request_text(model.chat_requests[0])
    assert model_context.jupyter_ci_errors == []


def test_a_ci_cell_run_shows_in_the_notebooks_conversation(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    model.set_script([Reply.code("print(1 + 2)"), Reply.text("It is 3.")])
    path = write_notebook(model_lab, ["%load_ext jupyter_ci", "%%ci add one and two"])
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    open_chat(page)
    run_all(page, path)
    assert wait_run_state(page, TERMINAL) == "done", conversation_text(page)
    assert messages(page, "user") == ["%%ci add one and two"]
    # The reply that wrote the cell was all code: it is the run's cell, not a message.
    assert messages(page, "assistant") == ["It is 3."]
    assert "Cell 1 inserted" in steps(page)
    wait_until(lambda: [c["code"] for c in run_cells(page)] == ["print(1 + 2)"], 30, "the cell")
    assert "3" in text_of(cells(page, path)[2]["outputs"])
    assert model_context.jupyter_ci_errors == []


def test_a_failing_cell_shows_error_fixing_attempt_steps_and_a_fix_diff_in_review(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    model.set_script(
        [
            Reply.code("print(undefined_name)"),
            Reply.code("undefined_name = 'now defined'\nprint(undefined_name)"),
            Reply.text("Fixed it."),
        ]
    )
    path = write_notebook(model_lab, ["f = 1"])
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    open_chat(page)
    set_mode(page, "review")
    try:
        ask(page, "print a name")
        review = page.locator(by_testid("jupyter-ci-review"))
        review.wait_for(timeout=60_000)
        review.get_by_role("button", name="Run this cell").click()
        # The cell fails; the fix is proposed as a diff against the failed code.
        wait_until(
            lambda: "Review this fix" in review.inner_text() if review.count() else False,
            60,
            "the fix to review",
        )
        diff = review.locator('[data-testid="jupyter-ci-diff"]').inner_text()
        assert "@@ -1 +1,2 @@" in diff  # a unified diff against the failed code
        assert "+undefined_name = 'now defined'" in diff
        review.get_by_role("button", name="Run this cell").click()
        assert wait_run_state(page, TERMINAL) == "done", conversation_text(page)
    finally:
        set_mode(page, "")
    shown = steps(page)
    assert "Error" in shown, shown
    assert "Error → fixing, attempt 2/3" in shown, shown
    assert "Fix written, attempt 2/3" in shown, shown
    assert "Ran, attempt 2/3" in shown, shown
    assert "now defined" in text_of(cells(page, path)[1]["outputs"])
    assert messages(page, "assistant")[-1] == "Fixed it."
    assert model_context.jupyter_ci_errors == []
