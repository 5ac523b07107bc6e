"""Browser test fixtures: one JupyterLab and one Chromium per session, a fresh page per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .lab import Lab, launch_chromium, screenshot, start_lab

#: The model name the shared Lab is configured with (no request reaches a model in these tests).
LAB_MODEL = "openai/scripted-test"


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


@pytest.fixture
def artifacts() -> Path:
    """Where tests save their artifacts (screenshots)."""
    from .lab import ARTIFACTS

    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
