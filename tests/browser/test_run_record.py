"""What the browser shows of a run is the server's record of it: the panel lists each run's
generated cells with their final code (live, while they stream, and after a reload), and the
``%%ci`` status output shows the status line the server composed.

Real JupyterLab, the built labextension and the scripted model, driven as a user would.
"""

from __future__ import annotations

from typing import Any

from jupyter_ci.testing import Reply, ScriptedModelServer

from .chat import stored_conversation
from .lab import Lab
from .notebooks import (
    TERMINAL,
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
    status = wait_for_status(page, path, 1, TERMINAL)
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
