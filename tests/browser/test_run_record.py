"""What the browser shows of a run is the server's record of it: the panel lists each run's
generated cells with their final code (live, while they stream, and after a reload), and the
``%%ci`` status output shows the status line the server composed.

Real JupyterLab, the built labextension and the scripted model, driven as a user would.
"""

from __future__ import annotations

import time
from typing import Any

from jupyter_ci.testing import Reply, ScriptedModelServer

from .chat import (
    COPY,
    INSERT,
    PANEL,
    ask,
    by_testid,
    chat_about_new_notebook,
    conversation_text,
    copy_every_code_block,
    open_chat,
    run_cells,
    set_theme,
    stored_conversation,
    wait_run_state,
)
from .lab import Lab, screenshot
from .notebooks import (
    TERMINAL,
    activate,
    cells,
    command,
    dump,
    generated,
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

STREAMED = "first = 'streamed'\nprint(first)"
BROKEN = "print(second_value)"
FIXED = "second_value = 'fixed'\nprint(second_value)"


def shown_cells(page: Any) -> list[dict[str, Any]]:
    """The last run's cells once every one is rendered and none is being written."""

    def settled() -> list[dict[str, Any]] | None:
        found = run_cells(page)
        done = found and all(c["rendered"] and not c["writing"] for c in found)
        return found if done else None

    result: list[dict[str, Any]] = wait_until(
        settled, 30, "the run's cells", lambda: conversation_text(page)
    )
    return result


def test_the_panel_shows_each_generated_cells_final_code_after_a_reload_too(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    model.set_script(
        [
            Reply.code(STREAMED, prose="The first cell."),
            Reply.code(BROKEN),
            Reply.code(FIXED),
            Reply.text("Both cells ran."),
        ]
    )
    page, path = chat_about_new_notebook(model_context, model_lab, ["a = 1"], clipboard=True)
    ask(page, "two cells, the second fixed")
    assert wait_run_state(page, TERMINAL) == "done", conversation_text(page)
    final = {c["id"]: c["source"] for c in generated(cells(page, path))}
    assert list(final.values()) == [STREAMED, FIXED], dump(page, path)

    def code_by_cell() -> dict[str, str]:
        return {c["cell_id"]: c["code"] for c in shown_cells(page)}

    assert code_by_cell() == final
    # The prose streamed into the conversation holds no code: the code is in the cells.
    assert page.locator(f"{PANEL} [data-role='assistant'] pre").count() == 0

    activate(page, path)
    command(page, "docmanager:save")
    open_lab_app(page, model_lab)  # a new page load: nothing is kept in the browser
    open_notebook(page, path)
    assert {c["id"]: c["source"] for c in generated(cells(page, path))} == final
    open_chat(page)
    wait_until(lambda: run_cells(page), 30, "the run's cells after a reload")
    assert code_by_cell() == final
    assert all(not c["insert_disabled"] and not c["copy_disabled"] for c in shown_cells(page))
    # Copy and Insert below give exactly the fixed cell's final code.
    fixed = page.locator(by_testid("jupyter-ci-run-cell")).nth(1)
    fixed.get_by_role("button", name=COPY).click()
    copied = wait_until(lambda: page.evaluate("() => navigator.clipboard.readText()"), 10, "copy")
    assert copied == FIXED
    activate(page, path)
    fixed.get_by_role("button", name=INSERT).click()
    wait_until(
        lambda: sum(c["source"] == FIXED for c in cells(page, path)) == 2, 30, "the inserted cell"
    )
    # How a run's cells look, in both themes.
    try:
        screenshot(page, "chat-panel-run-cells-light")
        set_theme(page, "JupyterLab Dark")
        screenshot(page, "chat-panel-run-cells-dark")
    finally:
        set_theme(page, "JupyterLab Light")
    assert model_context.jupyter_ci_errors == []


#: A cell long enough to stream for a few seconds at the scripted delay.
SLOW = "\n".join(f"line_{i} = {i} * 2\nprint('line', line_{i})" for i in range(8))


def test_a_cell_being_written_offers_no_partial_code_to_insert_or_copy(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    model.set_script(
        [Reply.code(SLOW, prose="Writing it slowly.", delay=0.15), Reply.text("All printed.")]
    )
    page, path = chat_about_new_notebook(model_context, model_lab, ["b = 2"], clipboard=True)
    ask(page, "print some lines")
    seen_writing: list[str] = []
    blocks: list[dict[str, Any]] = []
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        shown = run_cells(page)
        if shown and shown[0]["writing"]:
            # Marked as being written, with its buttons disabled, the code shown as it comes.
            assert shown[0]["insert_disabled"], shown
            assert shown[0]["copy_disabled"], shown
            seen_writing.append(shown[0]["code"])
            if len(seen_writing) == 10:
                screenshot(page, "chat-panel-cell-being-written")
        blocks.extend(copy_every_code_block(page))
        if page.locator(f"{by_testid('jupyter-ci-run')}[data-finished='true']").count():
            break
        time.sleep(0.1)
    assert wait_run_state(page, TERMINAL) == "done", conversation_text(page)
    # Every code block the panel showed while the cell streamed either had both buttons
    # disabled or gave the whole cell.
    assert blocks
    for block in blocks:
        assert block["insert_disabled"] == block["copy_disabled"], block
        if not block["copy_disabled"]:
            assert block["copied"] == SLOW, block
    assert any(0 < len(code) < len(SLOW) for code in seen_writing), seen_writing
    # Once written, the cell offers its final code.
    final = generated(cells(page, path))
    assert [c["source"] for c in final] == [SLOW], dump(page, path)
    (cell,) = shown_cells(page)
    assert cell["cell_id"] == final[0]["id"]
    assert cell["code"] == SLOW
    assert [b.get("copied") for b in copy_every_code_block(page)] == [SLOW]
    activate(page, path)
    page.locator(by_testid("jupyter-ci-run-cell")).get_by_role("button", name=INSERT).click()
    wait_until(
        lambda: sum(c["source"] == SLOW for c in cells(page, path)) == 2, 30, "the inserted cell"
    )
    assert model_context.jupyter_ci_errors == []


def test_a_failed_ci_run_shows_the_servers_status_line_in_its_output_and_text_twin(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    model.set_script(
        [
            Reply.code("print(undefined_a)"),
            # Slow enough to see the status while the fix is written.
            Reply.code("value = undefined_b\nprint(value)", delay=0.4),
        ]
    )
    path = write_notebook(
        model_lab, ["%load_ext jupyter_ci", "%%ci --max-attempts 2 print an undefined name"]
    )
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    run_all(page, path)
    line = panel(page, path).locator(
        '[data-testid="jupyter-ci-status-output"] .jp-jupyter-ci-Status-line'
    )

    def fixing_line() -> str | None:
        text = str(line.inner_text()) if line.count() else ""
        return text if "fixing" in text else None

    # While the fix is written: the server's line (the attempt being written, 2 of 2).
    assert wait_until(fixing_line, 90, "the fixing status") == "jupyter-ci: fixing — attempt 2/2"
    status = wait_for_status(page, path, 1, TERMINAL, finished=True)
    assert status["state"] == "failed", dump(page, path)
    finished = next(
        event
        for run in stored_conversation(model_lab, path)["runs"]
        for event in run["events"]
        if event["type"] == "finished" and run["run_id"] == status["run_id"]
    )
    # The line is the server's, word for word (the reason's words come from the schema).
    assert status["text"] == finished["text"]
    assert status["text"].startswith(
        "jupyter-ci: failed (the cell still failed at the last attempt) — 1 cell, 2 attempts, "
    ), status["text"]
    output = cells(page, path)[1]["outputs"]
    assert status_of(cells(page, path)[1]) == status
    assert text_of(output).split("\n")[0] == finished["text"]
    wait_until(lambda: line.inner_text() == finished["text"], 30, "the rendered status line")
    assert "NameError" in text_of(cells(page, path)[2]["outputs"])
    assert model_context.jupyter_ci_errors == []
