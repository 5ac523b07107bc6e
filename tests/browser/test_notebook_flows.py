"""The notebook as a data scientist lives it, in real JupyterLab with the scripted model: new
cells in the order of the conversation, a ``%%ci`` answer written under its cell, review from
the notebook alone, and a missing package installed on the user's word (issue 16).
"""

from __future__ import annotations

from typing import Any

from jupyter_ci.testing import Reply, ScriptedModelServer

from .chat import ask, conversation_text, open_chat, runs, wait_run_state
from .lab import Lab
from .notebooks import (
    activate,
    cells,
    command,
    dump,
    open_lab_app,
    open_notebook,
    panel,
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
