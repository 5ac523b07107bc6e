"""Focus and scrolling in real JupyterLab, with the scripted model: opening the panel puts the
focus in its request box, the conversation follows the newest message unless the user has
scrolled up, Stop from the keyboard gives the focus back, the cell being fixed stays in view, and
a cell the run was stopped while writing says so.
"""

from __future__ import annotations

from typing import Any

from jupyter_ci.testing import Reply, ScriptedModelServer

from .chat import (
    PANEL,
    ask,
    by_testid,
    conversation_text,
    open_chat,
    runs,
    set_theme,
    wait_run_state,
)
from .contrast import low_contrast, measure
from .lab import Lab, search_palette
from .notebooks import (
    TERMINAL,
    cells,
    command,
    dump,
    frames,
    generated,
    open_lab_app,
    open_notebook,
    panel,
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

#: JavaScript: the data-testid (or tag) of the focused element.
FOCUSED = (
    "() => { const e = document.activeElement;"
    " return e ? (e.dataset && e.dataset.testid) || e.tagName.toLowerCase() : null; }"
)

#: A cell that says when it has begun, then runs for up to 60 s (unless interrupted).
LONG_CELL = "import time\nprint('started', flush=True)\nfor _ in range(600):\n    time.sleep(0.1)"


def focused(page: Any) -> str | None:
    """What has the keyboard focus: a ``data-testid``, else the element's tag."""
    found: str | None = page.evaluate(FOCUSED)
    return found


def focus_notebook(page: Any, path: str, index: int) -> None:
    """Select cell ``index`` with a click on its prompt, as a user does (command mode: the
    notebook has the focus)."""
    prompt = panel(page, path).locator(".jp-Notebook .jp-Cell").nth(index)
    prompt.locator(".jp-InputPrompt").click()
    wait_until(
        lambda: page.evaluate(
            "() => !!document.activeElement && !!document.activeElement.closest('.jp-Notebook')"
        ),
        10,
        "the notebook to have the focus",
    )


def test_opening_the_panel_puts_the_focus_in_its_request_box(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    path = write_notebook(model_lab, ["x = 1"])
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    focus_notebook(page, path, 0)

    # From the command palette, by keyboard only.
    palette = search_palette(page, "Open jupyter-ci panel")
    item = page.locator("#command-palette .lm-CommandPalette-item", has_text="Open jupyter-ci")
    item.first.wait_for()
    page.keyboard.press("Enter")
    box = page.locator(by_testid("jupyter-ci-input"))
    box.wait_for(state="visible", timeout=60_000)
    wait_until(lambda: focused(page) == "jupyter-ci-input", 10, "the focus in the request box")
    # And it stays there once the palette has closed (it gives the focus back to the notebook
    # a frame or two after its command has run).
    palette.wait_for(state="hidden")
    frames(page, 20)
    assert focused(page) == "jupyter-ci-input"
    page.keyboard.type("typed at once")
    assert box.input_value() == "typed at once"

    # With its icon in the right sidebar: close the panel, work in the notebook, open it again.
    tab = page.locator('.jp-SideBar.jp-mod-right .lm-TabBar-tab[data-id="jupyter-ci-panel"]')
    tab.click()
    page.locator(PANEL).wait_for(state="hidden", timeout=30_000)
    focus_notebook(page, path, 0)
    tab.click()
    wait_until(lambda: focused(page) == "jupyter-ci-input", 10, "the focus in the request box")
    frames(page, 20)
    assert focused(page) == "jupyter-ci-input"
    assert model_context.jupyter_ci_errors == []


#: JavaScript: after each change of the conversation, once laid out, whether it shows its end
#: (only while it overflows); in ``window.__ciSamples``.
SAMPLE = """(sel) => {
  const e = document.querySelector(sel);
  window.__ciSamples = [];
  window.__ciSampler = new MutationObserver(() => requestAnimationFrame(() => {
    if (e.scrollHeight > e.clientHeight + 50) {
      window.__ciSamples.push(e.scrollHeight - e.scrollTop - e.clientHeight <= 4);
    }
  }));
  window.__ciSampler.observe(e, {childList: true, subtree: true, characterData: true});
}"""

#: JavaScript: the conversation's scroll position.
SCROLL = """(sel) => { const e = document.querySelector(sel);
  return {top: e.scrollTop, height: e.scrollHeight, view: e.clientHeight}; }"""


def scroll_state(page: Any) -> dict[str, float]:
    """The conversation's scrollTop, scrollHeight and clientHeight."""
    state: dict[str, float] = page.evaluate(SCROLL, by_testid("jupyter-ci-conversation"))
    return state


def at_bottom(state: dict[str, float]) -> bool:
    """Whether the conversation shows its end (within a few pixels)."""
    return state["height"] - state["top"] - state["view"] <= 4


def long_answer(word: str) -> str:
    """A reply of many short paragraphs (taller than the panel), streamed word by word."""
    return "\n\n".join(f"{word} paragraph {i} of the answer." for i in range(40))


def test_the_conversation_follows_the_newest_message_unless_scrolled_up(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    model.set_script(
        [
            Reply.text(long_answer("First"), delay=0.02),
            Reply.text(long_answer("Second"), delay=0.04),
        ]
    )
    path = write_notebook(model_lab, ["y = 1"])
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    open_chat(page)
    conversation = page.locator(by_testid("jupyter-ci-conversation"))

    # While the answer streams, the newest text is in view.
    ask(page, "a long answer")
    wait_until(lambda: len(runs(page).all()) == 1, 30, "the run")
    # Sampled in the page after each change of the conversation has been laid out.
    page.evaluate(SAMPLE, by_testid("jupyter-ci-conversation"))
    assert wait_run_state(page, TERMINAL) == "done", conversation_text(page)
    samples: list[bool] = page.evaluate(
        "() => { window.__ciSampler.disconnect(); return window.__ciSamples; }"
    )
    assert samples, "the answer never overflowed the conversation"
    assert samples.count(True) >= 0.9 * len(samples), samples
    page.locator(f"{PANEL} [data-role='assistant']", has_text="paragraph 39").wait_for()
    wait_until(lambda: at_bottom(scroll_state(page)), 10, "the end of the answer in view")

    # The user scrolls up to read while the next answer streams: the view stays where they are.
    ask(page, "another long answer")
    wait_until(lambda: len(runs(page).all()) == 2, 30, "the second run")
    page.locator(f"{PANEL} [data-role='assistant']", has_text="Second paragraph 3 ").wait_for(
        timeout=60_000
    )
    box = conversation.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.wheel(0, -400)
    wait_until(lambda: not at_bottom(scroll_state(page)), 10, "the user's scroll up")
    frames(page, 5)  # the wheel's scroll has ended
    held = scroll_state(page)
    grown = wait_until(
        lambda: (lambda s: s if s["height"] > held["height"] + 100 else None)(scroll_state(page)),
        30,
        "more of the answer",
    )
    assert abs(grown["top"] - held["top"]) <= 2, (held, grown)
    assert not at_bottom(grown)

    # Back at the bottom, it follows again.
    page.mouse.wheel(0, 100_000)
    wait_until(lambda: at_bottom(scroll_state(page)), 10, "the bottom again")
    assert wait_run_state(page, TERMINAL) == "done", conversation_text(page)
    page.locator(f"{PANEL} [data-role='assistant']", has_text="Second paragraph 39").wait_for()
    wait_until(lambda: at_bottom(scroll_state(page)), 10, "the end of the second answer")
    assert model_context.jupyter_ci_errors == []


def test_stop_from_the_keyboard_gives_the_focus_back(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    # In the panel: from the request box, Tab to Stop, Enter.
    model.set_script([Reply.code(LONG_CELL), Reply.code(LONG_CELL)])
    path = write_notebook(model_lab, ["z = 1"])
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    open_chat(page)
    ask(page, "wait a minute")
    wait_until(lambda: "started" in text_of(cells(page, path)[-1]["outputs"]), 90, "the cell")
    box = page.locator(by_testid("jupyter-ci-input"))
    box.focus()
    for _ in range(6):
        page.keyboard.press("Tab")
        if focused(page) == "jupyter-ci-stop":
            break
    assert focused(page) == "jupyter-ci-stop"
    page.keyboard.press("Enter")
    assert wait_run_state(page, TERMINAL, timeout=60) == "stopped", conversation_text(page)
    page.locator(by_testid("jupyter-ci-send")).wait_for(timeout=30_000)
    assert focused(page) == "jupyter-ci-input"

    # In the notebook: the %%ci cell's Stop, reached from the notebook.
    ci = write_notebook(model_lab, ["%load_ext jupyter_ci", "%%ci wait for a while"])
    open_notebook(page, ci)
    run_all(page, ci)
    wait_until(
        lambda: len(cells(page, ci)) > 2 and "started" in text_of(cells(page, ci)[2]["outputs"]),
        90,
        "the generated cell to start",
    )
    focus_notebook(page, ci, 1)
    page.evaluate("() => { window.__ciBefore = document.activeElement; }")
    stop = panel(page, ci).locator('[data-testid="jupyter-ci-stop"]')
    stop.focus()
    page.keyboard.press("Enter")
    status = wait_for_status(page, ci, 1, TERMINAL)
    assert status["state"] == "stopped", dump(page, ci)
    assert page.evaluate("() => document.activeElement === window.__ciBefore"), focused(page)
    assert focused(page) != "body"
    assert model_context.jupyter_ci_errors == []


BROKEN = 'import pandas as pd\ndf = pd.read_csv("iris.csv")\nprint(df["petal_len"].mean())'
FIXED = BROKEN.replace('"petal_len"', '"petal_length"')

#: JavaScript: whether the generated cell's input and badge, and the %%ci's status output, are
#: inside the notebook's visible area.
IN_VIEW = """([path, cellId, ciId]) => {
  const panel = Array.from(window.jupyterapp.shell.widgets('main'))
    .find(w => w.context && w.context.path === path);
  const notebook = panel.content;
  const box = notebook.outerNode.getBoundingClientRect();
  const inside = (node) => {
    if (!node) { return false; }
    const r = node.getBoundingClientRect();
    return r.height > 0 && r.top >= box.top - 1 && r.bottom <= box.bottom + 1;
  };
  const cell = notebook.widgets.find(w => w.model.id === cellId);
  const ci = notebook.widgets.find(w => w.model.id === ciId);
  return {
    input: inside(cell && cell.node.querySelector('.jp-Cell-inputWrapper')),
    badge: inside(cell && cell.node.querySelector('[data-testid="jupyter-ci-badge"]')),
    status: inside(ci && ci.node.querySelector('[data-testid="jupyter-ci-status-output"]')),
  };
}"""


def scroll_away_while_the_fix_is_asked(
    page: Any, model: ScriptedModelServer, path: str, cell_id: str, ci_id: str
) -> None:
    """Once the cell failed and its fix is asked for (the model holds it), and the page has
    shown the run fixing (its scroll to the cell is done), the user scrolls down the notebook
    to read on, with the focus in the notebook (kept in ``window.__ciBefore``)."""
    wait_until(
        lambda: "KeyError" in text_of(cells(page, path)[2]["outputs"]), 60, "the first failure"
    )
    wait_until(lambda: len(model.chat_requests) == 2, 60, "the fix asked for (and held)")
    status = panel(page, path).locator('[data-testid="jupyter-ci-status-output"]')
    wait_until(lambda: status.get_attribute("data-state") == "fixing", 60, "the fixing state")
    frames(page)  # the page's scroll to the cell being fixed, in the same frames, is done
    focus_notebook(page, path, 10)
    page.evaluate("() => { window.__ciBefore = document.activeElement; }")
    page.evaluate(
        "(path) => { const p = Array.from(window.jupyterapp.shell.widgets('main'))"
        ".find(w => w.context && w.context.path === path);"
        " p.content.outerNode.scrollTop = p.content.outerNode.scrollHeight; }",
        path,
    )
    wait_until(
        lambda: not page.evaluate(IN_VIEW, [path, cell_id, ci_id])["input"], 10, "scrolled away"
    )
    assert len(model.chat_requests) == 2
    assert cells(page, path)[2]["source"] == BROKEN


def test_the_cell_being_fixed_and_its_status_stay_in_view(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    model.set_script([Reply.code(BROKEN), Reply.code(FIXED)])
    write_iris(model_lab)
    fillers = [f"filler_{i} = {i}\nprint(filler_{i})" for i in range(40)]
    # One step, and the %%ci run alone (not Run All): once the fixed cell has run the run ends,
    # and nothing grows under the %%ci (an answer, the next step's progress, the cells after it
    # running) to move what was brought into view while it is checked.
    path = write_notebook(
        model_lab, ["%load_ext jupyter_ci", "%%ci --max-steps 1 mean petal length", *fillers]
    )
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    ci_id = cells(page, path)[1]["id"]
    # The model "thinks" about the fix until the user has scrolled away, however long that
    # takes: its first reply goes, the next (the fix) is held.
    model.hold(after=1)
    try:
        run_cell(page, path, 0)
        run_cell(page, path, 1)
        made = wait_until(lambda: generated(cells(page, path)), 60, "the generated cell")
        cell_id = made[0]["id"]
        scroll_away_while_the_fix_is_asked(page, model, path, cell_id, ci_id)
    finally:
        model.release()
    # The fix is written into the cell: the cell, its badge and diff and the status come into view.
    wait_until(lambda: cells(page, path)[2]["source"] == FIXED, 60, "the fix")
    shown = wait_until(
        lambda: (lambda v: v if all(v.values()) else None)(
            page.evaluate(IN_VIEW, [path, cell_id, ci_id])
        ),
        10,
        "the fixed cell and the status in view",
        lambda: str(page.evaluate(IN_VIEW, [path, cell_id, ci_id])),
    )
    assert shown == {"input": True, "badge": True, "status": True}
    diff = panel(page, path).locator('[data-testid="jupyter-ci-diff"]').first
    assert diff.is_visible()
    # The notebook scrolled; the focus stayed where the user had it.
    assert page.evaluate("() => document.activeElement === window.__ciBefore"), focused(page)
    status = wait_for_status(page, path, 1, TERMINAL)
    assert (status["state"], status["reason"]) == ("done", "max_steps"), dump(page, path)
    assert "4.3" in text_of(cells(page, path)[2]["outputs"])
    assert model_context.jupyter_ci_errors == []


#: JavaScript: whether the notebook at ``path`` has unsaved changes.
DIRTY = (
    "(path) => Array.from(window.jupyterapp.shell.widgets('main'))"
    ".find(w => w.context && w.context.path === path).context.model.dirty"
)

#: Code the model writes slowly (the run is stopped while it streams).
SLOW_CODE = "\n".join(f"step_{i} = {i} * 2  # a line of the model's code" for i in range(30))


def stopped_badge(page: Any, path: str, index: int) -> Any:
    """The locator of cell ``index``'s "stopped before running" badge."""
    cell = panel(page, path).locator(".jp-Notebook .jp-Cell").nth(index)
    return cell.locator('[data-testid="jupyter-ci-badge"]').get_by_text("stopped before running")


def test_a_cell_stopped_while_written_says_stopped_before_running(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    model.set_script([Reply.code(SLOW_CODE, delay=0.3)])
    path = write_notebook(model_lab, ["%load_ext jupyter_ci", "%%ci write a lot of code"])
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    run_all(page, path)
    wait_until(
        lambda: len(cells(page, path)) > 2 and "step_2" in cells(page, path)[2]["source"],
        60,
        "code streaming into the cell",
    )
    stop = panel(page, path).locator('[data-testid="jupyter-ci-stop"]')
    stop.click()
    status = wait_for_status(page, path, 1, TERMINAL)
    assert status["state"] == "stopped", dump(page, path)
    cell = cells(page, path)[2]
    badge = stopped_badge(page, path, 2)
    badge.wait_for(timeout=15_000)
    # Commented out, never run: Run All cannot run it unedited.
    lines = [line for line in cell["source"].splitlines() if line.strip()]
    assert lines, cell["source"]
    assert all(line.lstrip().startswith("#") for line in lines), cell["source"]
    assert cell["outputs"] == []
    assert cell["execution_count"] is None
    assert cell["metadata"]["jupyter_ci"].get("stopped") is True
    # Legible in both themes.
    for theme in ("JupyterLab Dark", "JupyterLab Light"):
        set_theme(page, theme)
        found = [m for m in measure(page) if m.text == "stopped before running"]
        assert found, theme
        assert low_contrast(found) == [], theme

    # Saved and opened again, the badge is still there (the cell's hint says so)...
    command(page, "docmanager:save")
    wait_until(lambda: not page.evaluate(DIRTY, path), 30, "the notebook saved")
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    badge = stopped_badge(page, path, 2)
    badge.wait_for(timeout=30_000)
    found = status_of(cells(page, path)[1])
    assert found is not None
    assert found["state"] == "stopped", found
    # ...until the user edits the cell and runs it.
    set_source(page, path, 2, "print('my own code')")
    run_cell(page, path, 2)
    badge.wait_for(state="hidden", timeout=30_000)
    assert "stopped" not in cells(page, path)[2]["metadata"]["jupyter_ci"]
    assert model_context.jupyter_ci_errors == []
