"""jupyter-ci's own fix (``own_fixes``) in real JupyterLab, as a user meets it: the model's cell
fails on a column written without the spaces the frame's name has; jupyter-ci respells it in the
same cell without asking the model or using an attempt, and the panel's notice says what it
changed.

The model is the scripted server; the kernel is real; the labextension is the built one.
"""

from __future__ import annotations

from typing import Any

from jupyter_ci.agent.loop import OWN_FIX_FREE, OWN_FIX_NOTICE
from jupyter_ci.agent.retries import RESPELLED_NOTICE
from jupyter_ci.testing import Reply, ScriptedModelServer

from .chat import steps
from .lab import Lab
from .notebooks import generated, text_of
from .test_look_again import in_both_themes, notice_said, run_to_the_end

MADE = 'import pandas as pd\nw = pd.DataFrame({" WINDSPEED": [1.0, 3.0]})\n'
SPACED = MADE + "print('@mean[%.2f]' % w['WINDSPEED'].mean())"


def test_a_spaced_column_is_fixed_by_jupyter_ci_and_said(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    model.set_script([Reply.code(SPACED), Reply.text("The mean wind speed is @mean[2.00].")])
    page, all_cells = run_to_the_end(
        model_context, model_lab, "%%ci the mean wind speed, as @mean[value]"
    )
    (fixed,) = generated(all_cells)
    assert fixed["source"] == SPACED.replace("w['WINDSPEED']", "w[' WINDSPEED']")
    assert fixed["metadata"]["jupyter_ci"]["attempt"] == 1  # the own fix used no attempt
    assert "@mean[2.00]" in text_of(fixed["outputs"])
    assert len(model.chat_requests) == 2  # the cell, then the answer: none for the fix
    notice_said(
        page,
        f"{OWN_FIX_NOTICE}: wrote 'WINDSPEED' as ' WINDSPEED', as the frame spells it "
        f"({OWN_FIX_FREE}).",
    )
    shown = steps(page)
    assert "Fixed by jupyter-ci" in shown, shown  # no attempt: it used none
    assert not any(step.startswith("Fix written") for step in shown), shown  # not the model's
    in_both_themes(page, "own_fix")


def test_a_later_fix_keeps_jupyter_ci_s_spelling_and_says_so(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    """After the own fix the cell fails on a column the model invented; the model's fix writes
    the spaced name without its spaces again, and it runs as the frame spells it (2/3)."""
    first = MADE + "print('@mean[%.2f]' % w['WINDSPEED'].mean(), w['GUST'].max())"
    fix = SPACED
    model.set_script(
        [
            Reply.code(first),
            Reply.code(fix, match="GUST"),
            Reply.text("The mean wind speed is @mean[2.00]."),
        ]
    )
    page, all_cells = run_to_the_end(
        model_context, model_lab, "%%ci the mean wind speed, as @mean[value]"
    )
    (fixed,) = generated(all_cells)
    assert fixed["source"] == fix.replace("w['WINDSPEED']", "w[' WINDSPEED']")
    assert fixed["metadata"]["jupyter_ci"]["attempt"] == 2
    assert "@mean[2.00]" in text_of(fixed["outputs"])
    notice_said(
        page,
        f"{RESPELLED_NOTICE}: wrote 'WINDSPEED' as ' WINDSPEED', as the frame spells it.",
    )
    shown = steps(page)
    assert any(step.startswith("Fix written") for step in shown), shown
    in_both_themes(page, "respelled")


BY_VALUE = (
    "windiest_day = 'Tuesday'\nwindiest_speed = 31.5\nprint(f\"@{windiest_day}[{windiest_speed}]\")"
)


def test_an_answer_printed_with_a_value_for_its_name_is_fixed_and_said(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    """The model's cell prints the day where the format has its name; jupyter-ci prints the
    answer with the format's names, from the cell's variables of those names."""
    model.set_script([Reply.code(BY_VALUE), Reply.text("Tuesday, at 31.5 km/h.")])
    request = "%%ci the windiest day, as @windiest_day[day] @windiest_speed[speed]"
    page, all_cells = run_to_the_end(model_context, model_lab, request)
    (fixed,) = generated(all_cells)
    assert fixed["source"] == BY_VALUE.replace(
        'print(f"@{windiest_day}[{windiest_speed}]")',
        "print(f'@windiest_day[{windiest_day}]')\nprint(f'@windiest_speed[{windiest_speed}]')",
    )
    assert fixed["metadata"]["jupyter_ci"]["attempt"] == 1
    printed = text_of(fixed["outputs"])
    assert "@windiest_day[Tuesday]\n@windiest_speed[31.5]" in printed, printed
    assert len(model.chat_requests) == 2  # the cell, then the answer: none for the fix
    notice_said(
        page,
        f"{OWN_FIX_NOTICE}: printed the answer with the request's names, @windiest_day[...] "
        f"@windiest_speed[...] ({OWN_FIX_FREE}).",
    )
    shown = steps(page)
    assert "Fixed by jupyter-ci" in shown, shown
    in_both_themes(page, "own_fix_answer")


IN_PLACE = (
    "import pandas as pd\ngusts = pd.DataFrame({'speed': [20.0, None, 40.0]})\n"
    "gusts['speed'].fillna(30.0, inplace=True)\n"
    "print(f\"@mean_speed[{gusts['speed'].mean()}] @gaps[{gusts['speed'].isna().sum()}]\")"
)


def test_an_in_place_change_pandas_ignored_is_assigned_back_and_said(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    """pandas 3 warns that the model's in-place fill changed nothing; jupyter-ci writes the
    assignment it means, and the cell's second run prints the filled column's figures."""
    model.set_script([Reply.code(IN_PLACE), Reply.text("The mean is 30.0, no gaps left.")])
    request = "%%ci fill the gaps with 30 and give @mean_speed[value] @gaps[count]"
    page, all_cells = run_to_the_end(model_context, model_lab, request)
    (fixed,) = generated(all_cells)
    assert fixed["source"] == IN_PLACE.replace(
        "gusts['speed'].fillna(30.0, inplace=True)",
        "gusts['speed'] = gusts['speed'].fillna(30.0)",
    )
    assert fixed["metadata"]["jupyter_ci"]["attempt"] == 1
    printed = text_of(fixed["outputs"])
    assert "@mean_speed[30.0] @gaps[0]" in printed, printed
    assert "ChainedAssignmentError" not in printed, printed
    assert len(model.chat_requests) == 2  # the cell, then the answer: none for the fix
    notice_said(
        page,
        f"{OWN_FIX_NOTICE}: assigned the change back, as pandas 3 needs: "
        f"gusts['speed'] = gusts['speed'].fillna(...) ({OWN_FIX_FREE}).",
    )
    assert "Fixed by jupyter-ci" in steps(page)
    in_both_themes(page, "own_fix_in_place")
