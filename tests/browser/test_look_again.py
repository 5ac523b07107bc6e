"""A result that looks wrong (``check_results``) in real JupyterLab, as a user meets it: a
``%%ci --check-results`` whose first cell prints NaN is looked at again within its attempts, the
cell is fixed in place (attempt 2/3), and the panel's conversation says why, in its notice.

The model is the scripted server; the kernel is real; the labextension is the built one.
"""

from __future__ import annotations

from typing import Any

from jupyter_ci.agent.loop import KEPT_NOTICE, ONCE_MORE, SAME_CODE_NOTICE
from jupyter_ci.agent.retries import KEPT_WRONG_NOTICE, LOOK_AGAIN_NOTICE
from jupyter_ci.testing import Reply, ScriptedModelServer

from .chat import conversation_text, messages, open_chat, set_theme, steps
from .lab import Lab, screenshot
from .notebooks import (
    TERMINAL,
    activate,
    cells,
    dump,
    generated,
    open_lab_app,
    open_notebook,
    run_all,
    text_of,
    wait_for_status,
    wait_until,
    write_iris,
    write_notebook,
)

READ = 'import pandas as pd\ndf = pd.read_csv("iris.csv")\n'
NAN = READ + 'print("mean:", df["petal_len"].mean() if "petal_len" in df else float("nan"))'
RIGHT = READ + 'print(f"@mean[{df.petal_length.mean():.2f}]")'
WRONG = READ + 'print("mean:", df["petal_len"].mean())'
ALSO_WRONG = READ + 'print("mean:", df["petal_size"].mean())'  # no column, whatever its case


def run_to_the_end(model_context: Any, model_lab: Lab, request: str) -> tuple[Any, list[Any]]:
    """Open a notebook with ``request`` on iris.csv, its chat panel, Run All, wait until the run
    is done; returns the page and the notebook's cells."""
    write_iris(model_lab)
    path = write_notebook(model_lab, ["%load_ext jupyter_ci", request])
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    open_chat(page)
    activate(page, path)
    run_all(page, path)
    status = wait_for_status(page, path, 1, TERMINAL)
    assert status["state"] == "done", dump(page, path)
    return page, cells(page, path)


def notice_said(page: Any, text: str) -> None:
    """Wait until the panel's conversation shows ``text`` as a notice."""
    wait_until(
        lambda: text in messages(page, "notice"), 30, "the notice", lambda: conversation_text(page)
    )


def in_both_themes(page: Any, name: str) -> None:
    """Screenshots ``name_dark`` and ``name_light``, to look at (test_theme checks contrast)."""
    for suffix, theme in (("dark", "JupyterLab Dark"), ("light", "JupyterLab Light")):
        set_theme(page, theme)
        screenshot(page, f"{name}_{suffix}")


def test_a_result_that_looks_wrong_is_looked_at_again_and_said(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    model.set_script(
        [
            Reply.code(NAN),
            Reply.code(RIGHT, match="its result looks wrong"),
            Reply.text("The mean petal length is @mean[4.30]."),
        ]
    )
    request = "%%ci --check-results the mean petal length of iris.csv, as @mean[value]"
    page, all_cells = run_to_the_end(model_context, model_lab, request)

    # One cell, fixed in place: its second attempt is the one that printed the answer.
    (fixed,) = generated(all_cells)
    assert fixed["source"] == RIGHT
    assert fixed["metadata"]["jupyter_ci"]["attempt"] == 2
    assert text_of(fixed["outputs"]) == "@mean[4.30]\n"  # write_iris's rows
    plain = text_of(all_cells[1]["outputs"][:1])
    assert plain.startswith("jupyter-ci: done — 1 cell, 2 attempts,"), plain

    # The panel tells why the cell was asked again.
    expected = (
        f"{LOOK_AGAIN_NOTICE}: a result is NaN (not a number). The model is asked to look "
        "again (attempt 2/3)."
    )
    notice_said(page, expected)
    # Its steps say a result looked wrong, not that the cell failed.
    shown = steps(page)
    assert "Result looks wrong → fixing, attempt 2/3" in shown, shown
    assert not any(step.startswith("Error") for step in shown), shown
    # Legible in both themes (looked at in the screenshots; test_theme checks the contrast).
    in_both_themes(page, "look_again")


def test_when_the_fixes_fail_the_version_that_ran_comes_back(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    """The NaN is looked at again (on by default), both fixes raise: the cell goes back to the
    version that ran, with its output, the panel says so, and the run ends with an answer."""
    model.set_script(
        [
            Reply.code(NAN),
            Reply.code(WRONG, match="its result looks wrong"),
            Reply.code(ALSO_WRONG, match="KeyError"),
            Reply.text("The mean is NaN: iris.csv has no petal_len.", match=r"The cell ran \("),
        ]
    )
    page, all_cells = run_to_the_end(
        model_context, model_lab, "%%ci the mean of petal_len in iris.csv"
    )
    (cell,) = generated(all_cells)
    assert cell["source"] == NAN
    assert text_of(cell["outputs"]) == "mean: nan\n"
    # Three attempts (the version put back runs again, not as a fourth); the diff says what
    # it is.
    plain = text_of(all_cells[1]["outputs"][:1])
    assert plain.startswith("jupyter-ci: done — 1 cell, 3 attempts,"), plain
    title = page.locator(".jp-jupyter-ci-CellDiff:not([hidden]) > summary").first.inner_text()
    assert title == "jupyter-ci put back the version that ran: before → after", title
    notice_said(page, f"{KEPT_NOTICE}.")
    shown = steps(page)
    assert "Back to the version that ran" in " ".join(shown), shown
    in_both_themes(page, "kept")


def test_a_fix_that_repeats_the_failed_code_costs_no_attempt_and_is_said(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    """The first fix is the failed code again: not run, asked once more without using an
    attempt; the next one runs as attempt 2/3, and the panel says what happened."""
    model.set_script(
        [
            Reply.code(WRONG),
            Reply.code(WRONG, match="KeyError"),
            Reply.code(RIGHT, match="KeyError"),
            Reply.text("The mean petal length is @mean[4.30]."),
        ]
    )
    page, all_cells = run_to_the_end(
        model_context, model_lab, "%%ci the mean petal length of iris.csv, as @mean[value]"
    )
    (fixed,) = generated(all_cells)
    assert fixed["source"] == RIGHT
    assert fixed["metadata"]["jupyter_ci"]["attempt"] == 2
    plain = text_of(all_cells[1]["outputs"][:1])
    assert plain.startswith("jupyter-ci: done — 1 cell, 2 attempts,"), plain
    notice_said(page, f"{SAME_CODE_NOTICE}; {ONCE_MORE}.")
    shown = steps(page)
    assert not any("3/3" in step for step in shown), shown
    in_both_themes(page, "once_more")


def test_a_result_kept_twice_that_cannot_be_right_uses_an_attempt_and_is_said(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    """The cell prints its answer outside the request's format; the model keeps it, is asked
    once more, keeps it again: that uses attempt 2/3, and its next fix runs as attempt 3/3."""
    unformatted = READ + 'print("@mean", round(df.petal_length.mean(), 2))'
    model.set_script(
        [
            Reply.code(unformatted),
            Reply.code(unformatted),
            Reply.code(unformatted),
            Reply.code(RIGHT),
            Reply.text("The mean petal length is @mean[4.30]."),
        ]
    )
    page, all_cells = run_to_the_end(
        model_context, model_lab, "%%ci the mean petal length of iris.csv, as @mean[value]"
    )
    (fixed,) = generated(all_cells)
    assert fixed["source"] == RIGHT
    assert fixed["metadata"]["jupyter_ci"]["attempt"] == 3
    assert text_of(fixed["outputs"]) == "@mean[4.30]\n"
    # The summary counts the attempts the badge does: the keep used one, though nothing ran.
    plain = text_of(all_cells[1]["outputs"][:1])
    assert plain.startswith("jupyter-ci: done — 1 cell, 3 attempts,"), plain
    notice_said(page, f"{KEPT_WRONG_NOTICE}; {ONCE_MORE}.")
    notice_said(page, f"{KEPT_WRONG_NOTICE} (attempt 2/3).")
    in_both_themes(page, "kept_twice")
