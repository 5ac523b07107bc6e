"""Shared test configuration: pytest-jupyter's server fixtures and an isolated Jupyter home."""

from __future__ import annotations

import pytest

pytest_plugins = ("pytest_jupyter.jupyter_server",)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the browser tests last: the fast tests report first, and Playwright's event loop
    (alive while the browser fixtures are) never overlaps the asyncio tests."""
    browser = [item for item in items if "/tests/browser/" in str(item.path).replace("\\", "/")]
    others = [item for item in items if item not in browser]
    items[:] = others + browser
