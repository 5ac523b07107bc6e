"""The labextension in real JupyterLab: the jupyter-ci panel, and the magic in a real kernel."""

from __future__ import annotations

from typing import Any

from jupyter_ci import __version__

from .conftest import LAB_MODEL
from .lab import Lab, new_notebook, open_lab, run_command, run_in_new_cell, screenshot


def test_panel_shows_server_status(page: Any, lab: Lab) -> None:
    open_lab(page, lab)
    run_command(page, "Open jupyter-ci panel")
    status = page.locator('[data-testid="jupyter-ci-status"]')
    status.wait_for(state="visible", timeout=30_000)
    page.wait_for_function(
        "() => document.querySelector('[data-testid=\"jupyter-ci-status\"]')"
        ".textContent.includes('model')"
    )
    text = status.inner_text()
    assert f"jupyter-ci {__version__}" in text
    assert LAB_MODEL in text
    assert page.locator('[data-testid="jupyter-ci-error"]').count() == 0
    screenshot(page, "panel-status")
    assert page.jupyter_ci_errors == []


def test_magic_loads_and_reports_in_a_notebook(page: Any, lab: Lab) -> None:
    open_lab(page, lab)
    notebook = new_notebook(page)
    load = run_in_new_cell(page, notebook, "%load_ext jupyter_ci")
    assert load.locator(".jp-OutputArea-output").count() == 0
    shown = run_in_new_cell(page, notebook, "%ci")
    text = shown.locator(".jp-OutputArea-output").inner_text()
    assert f"jupyter-ci {__version__}" in text
    assert "max_attempts: 3" in text
    asked = run_in_new_cell(page, notebook, "%%ci plot the iris data")
    status = asked.locator('[data-testid="jupyter-ci-status-output"]')
    status.wait_for(state="visible", timeout=30_000)
    reply = asked.locator(".jp-OutputArea-output").inner_text()
    # In JupyterLab the magic hands the request to the server (which holds the model), even
    # though the kernel has no model configured: the cell shows jupyter-ci's status output.
    assert reply.startswith("jupyter-ci:")
    assert "No model is configured" not in reply
    assert "UsageError" not in reply
    screenshot(page, "notebook-magic")
