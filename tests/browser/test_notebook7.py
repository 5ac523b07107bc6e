"""The labextension in Notebook 7 (``jupyter notebook``): no Lab shell, one notebook per page.

The same built extension must load there: the side panel (Notebook 7 has a right-hand area but
no ``ILabShell``) and the ``%%ci`` handoff, with the generated cells written into the notebook
page and run in its kernel.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from jupyter_ci import __version__
from jupyter_ci.testing import ScriptedModelServer

from .conftest import NBMODEL, NBMODEL_CANCELLED, SCRIPTED_KEY, SCRIPTED_MODEL
from .lab import ARTIFACTS, Lab, start_lab
from .notebooks import (
    LOAD_DF,
    TERMINAL,
    activate,
    cells,
    command,
    dump,
    generated,
    iris_request_notebook,
    run_all,
    shutdown_kernels,
    status_of,
    text_of,
    wait_for_kernel,
    wait_for_status,
    wait_until,
    write_notebook,
)

#: A page error of Notebook 7.6's own keyboard-shortcuts plugin, raised with jupyter-ci disabled
#: too (checked): its settings listener reads a plugin the registry does not hold.
NOTEBOOK7_OWN_ERROR = "Cannot read properties of undefined (reading 'schema')"


@pytest.fixture(scope="module")
def notebook7(
    tmp_path_factory: pytest.TempPathFactory, scripted_server: ScriptedModelServer
) -> Iterator[Lab]:
    """A real Notebook 7 server whose jupyter-ci talks to the scripted model."""
    base = tmp_path_factory.mktemp("notebook7")
    with start_lab(
        base,
        app="notebook",
        args=[
            f"--JupyterCI.model={SCRIPTED_MODEL}",
            f"--JupyterCI.api_base={scripted_server.base_url}",
            f"--JupyterCI.db_path={base / 'conversations.sqlite'}",
            "--JupyterNotebookApp.expose_app_in_browser=True",
        ],
        env={"JUPYTER_CI_API_KEY": SCRIPTED_KEY},
    ) as running:
        try:
            yield running
        finally:
            ARTIFACTS.mkdir(exist_ok=True)
            (ARTIFACTS / "notebook7.log").write_text(running.log())
            shutdown_kernels(running)


@pytest.fixture
def nb_page(chromium: Any, notebook7: Lab, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A page of its own browser context, with page errors collected."""
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(f"{error}\n{error.stack}"))
    page.jupyter_ci_errors = errors
    yield page
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"))
    context.close()


def our_errors(page: Any) -> list[str]:
    """The page's errors, but for Notebook 7's own known one (thrown in its core bundle) and,
    where it is installed, jupyter-server-nbmodel's for the cells it cancels."""
    return [
        error
        for error in page.jupyter_ci_errors
        if not (
            error.startswith(NOTEBOOK7_OWN_ERROR)
            and "/static/notebook/notebook_core." in "".join(error.split("\n")[2:3])
        )
        and not (
            NBMODEL
            and error.startswith(NBMODEL_CANCELLED + "\n")
            and "/jupyter-server-nbmodel/" in error
        )
    ]


def open_notebook_page(page: Any, server: Lab, path: str) -> None:
    """Open Notebook 7's page of ``path`` and wait until its kernel is idle."""
    page.goto(f"{server.url}notebooks/{path}?token={server.token}")
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell", timeout=60_000)
    page.evaluate("() => window.jupyterapp.restored")
    # Notebook 7's shell, not JupyterLab's: the extension must not rely on ILabShell.
    assert page.evaluate("() => window.jupyterapp.name") == "Jupyter Notebook"
    wait_for_kernel(page, path)
    activate(page, path)


def test_the_panel_opens_in_notebook7(nb_page: Any, notebook7: Lab) -> None:
    path = write_notebook(notebook7, ["x = 1"])
    open_notebook_page(nb_page, notebook7, path)
    command(nb_page, "jupyter-ci:open-panel")
    status = nb_page.locator('[data-testid="jupyter-ci-status"]')
    status.wait_for(state="visible", timeout=30_000)
    wait_until(lambda: SCRIPTED_MODEL in status.inner_text(), what="the panel shows the model")
    assert f"jupyter-ci {__version__}" in status.inner_text()
    assert our_errors(nb_page) == []


def test_a_magic_request_runs_in_notebook7(
    nb_page: Any, notebook7: Lab, model: ScriptedModelServer
) -> None:
    path = iris_request_notebook(notebook7, model)
    open_notebook_page(nb_page, notebook7, path)
    run_all(nb_page, path)
    status = wait_for_status(nb_page, path, 1, TERMINAL)
    assert status["state"] == "done", dump(nb_page, path)
    # The server ran the loop (two model calls: the code, then the answer); the generated cell
    # went into this notebook page, ran in its kernel, and the held-back cell ran after it.
    wait_until(
        lambda: str(status_of(cells(nb_page, path)[1]).get("continuation", "")).startswith("ran"),
        what="the held-back cell ran",
        explain=lambda: dump(nb_page, path),
    )
    now = cells(nb_page, path)
    assert len(now) == 4, dump(nb_page, path)
    assert [c["id"] for c in generated(now)] == [now[2]["id"]]
    assert now[2]["source"] == LOAD_DF
    assert now[2]["execution_count"] is not None
    assert "shape (30, 5)" in text_of(now[3]["outputs"])
    assert len(model.chat_requests) == 2
    assert "No model is configured" not in "\n".join(text_of(c["outputs"]) for c in now)
    assert our_errors(nb_page) == []
