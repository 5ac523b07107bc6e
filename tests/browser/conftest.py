"""Browser test fixtures: one JupyterLab and one Chromium per session, a fresh page per test."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_ci.testing import ScriptedModelServer

from ..test_install import build_wheel
from .lab import ARTIFACTS, Lab, launch_chromium, screenshot, start_lab

#: The model name the shared Lab is configured with (no request reaches a model in these tests).
LAB_MODEL = "openai/scripted-test"
#: The model of the Lab that talks to the scripted model server.
SCRIPTED_MODEL = "openai/scripted"
#: jupyter-ci's key for the scripted model (a placeholder: the scripted server checks none).
SCRIPTED_KEY = "sk-test-browser-0123456789abcdef"


#: Whether jupyter-server-nbmodel is installed (its CI stage): the server runs the cells.
NBMODEL = importlib.util.find_spec("jupyter_server_nbmodel") is not None
#: The page error jupyter-server-nbmodel's cell executor throws for each queued cell the server
#: cancelled because an earlier one failed (Run All past an error; here, past the %%ci that
#: stops the queue). jupyter-ci runs those cells itself afterwards.
NBMODEL_CANCELLED = "Invalid response: 500 Internal Server Error"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/browser/" in str(item.path).replace("\\", "/"):
            item.add_marker(pytest.mark.browser)


@pytest.fixture(autouse=True)
def jp_asyncio_loop() -> None:
    """Browser tests run no in-process server: keep pytest-jupyter away from Playwright's loop.

    pytest-jupyter's autouse fixture of this name would close the event loop Playwright's sync
    API runs on.
    """


@pytest.fixture(autouse=True)
def jp_server_cleanup() -> None:
    """No in-process Jupyter server to clean up in browser tests (see ``jp_asyncio_loop``)."""


@pytest.fixture(scope="package")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """A real ``jupyter lab`` on 127.0.0.1 with a token, shared by the browser tests.

    Package-scoped, like ``chromium``: Playwright's sync API keeps an event loop running while it
    lives, which would break the asyncio tests that run after the browser package.
    """
    with start_lab(
        tmp_path_factory.mktemp("lab"), args=[f"--JupyterCI.model={LAB_MODEL}"]
    ) as running:
        yield running


@pytest.fixture(scope="package")
def chromium() -> Iterator[Any]:
    """Debian's Chromium driven by Playwright, shared by the session's browser tests."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        yield browser
        browser.close()


@pytest.fixture
def page(chromium: Any, lab: Lab, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A new browser context and page; a screenshot is saved when the test ends."""
    context = chromium.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.jupyter_ci_errors = errors
    yield page
    screenshot(page, request.node.name)
    context.close()


@pytest.fixture(scope="package")
def scripted_server() -> Iterator[ScriptedModelServer]:
    """The scripted OpenAI-compatible model, shared by the browser tests that need a model."""
    with ScriptedModelServer([]) as server:
        yield server


@pytest.fixture(scope="package")
def model_lab(
    tmp_path_factory: pytest.TempPathFactory, scripted_server: ScriptedModelServer
) -> Iterator[Lab]:
    """A real ``jupyter lab`` whose jupyter-ci talks to the scripted model.

    The page exposes the app (``window.jupyterapp``) so tests can read notebook models and
    run commands by id. Its kernels' ``%pip`` installs only the test package of
    ``tests/test_install.py``, from a local folder into a folder of this Lab (a missing
    package's "Install and continue" is real, and nothing reaches the test environment).
    """
    base = tmp_path_factory.mktemp("model-lab")
    wheels, site = base / "wheels", base / "site"
    wheels.mkdir()
    site.mkdir()  # on the kernels' sys.path from the start, so an installed package is found
    build_wheel(wheels)
    pip = {
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(wheels),
        "PIP_TARGET": str(site),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
    }
    with start_lab(
        base,
        args=model_lab_args(scripted_server, base),
        env={"JUPYTER_CI_API_KEY": SCRIPTED_KEY, **pip},
    ) as running:
        try:
            yield running
        finally:
            ARTIFACTS.mkdir(exist_ok=True)
            (ARTIFACTS / "model-lab.log").write_text(running.log())


def model_lab_args(scripted_server: ScriptedModelServer, base: Path) -> list[str]:
    """The arguments of a Lab whose jupyter-ci talks to the scripted model (its key is
    ``SCRIPTED_KEY`` in ``JUPYTER_CI_API_KEY``), with the app exposed to tests."""
    return [
        f"--JupyterCI.model={SCRIPTED_MODEL}",
        f"--JupyterCI.api_base={scripted_server.base_url}",
        f"--JupyterCI.db_path={base / 'conversations.sqlite'}",
        "--LabApp.expose_app_in_browser=True",
    ]


@pytest.fixture
def model(scripted_server: ScriptedModelServer) -> ScriptedModelServer:
    """The scripted model with an empty script and no recorded requests (each test sets its
    own)."""
    scripted_server.reset([])
    scripted_server.release()  # nothing held from a test before
    return scripted_server


@pytest.fixture
def model_context(chromium: Any, model_lab: Lab, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A browser context for the model Lab (tests open one page or two, as two tabs).

    When the test ends each page's screenshot is saved, and the Lab's kernels are shut down
    (the machine has two cores). Page errors are collected in ``jupyter_ci_errors``.
    """
    from .notebooks import shutdown_kernels

    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    console: list[str] = []

    def page_error(error: Any) -> None:
        if NBMODEL and str(error) == NBMODEL_CANCELLED:
            return  # jupyter-server-nbmodel's own (see NBMODEL_CANCELLED)
        errors.append(str(error))

    def watch(page: Any) -> None:
        tab = len(context.pages)
        page.on("pageerror", page_error)
        page.on(
            "console", lambda message: console.append(f"tab{tab} {message.type}: {message.text}")
        )

    context.on("page", watch)
    context.jupyter_ci_errors = errors
    yield context
    for number, page in enumerate(context.pages):
        suffix = "" if number == 0 else f"-tab{number + 1}"
        screenshot(page, f"{request.node.name}{suffix}")
    context.close()
    # The browser's console, next to the screenshots (for failures seen only in CI).
    (ARTIFACTS / f"{request.node.name}.console.txt").write_text("\n".join(console) + "\n")
    shutdown_kernels(model_lab)


@pytest.fixture
def artifacts() -> Path:
    """Where tests save their artifacts (screenshots)."""
    from .lab import ARTIFACTS

    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
