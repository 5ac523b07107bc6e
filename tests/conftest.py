"""Shared test configuration: pytest-jupyter's server fixtures and an isolated Jupyter home.

``--realmodel`` runs the tests marked ``realmodel`` (a local llama.cpp server on the CPU; see the
README's "Real model tier and bench"); without it they are skipped.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

pytest_plugins = ("pytest_jupyter.jupyter_server",)

# The fuzz tests: the same examples on every run by default (CI never fails on an input no one
# saw before); HYPOTHESIS_PROFILE=explore looks much further, with new examples each time.
settings.register_profile(
    "ci",
    max_examples=300,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile(
    "explore",
    max_examples=5000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--realmodel``: also run the tests that need a real local model."""
    parser.addoption(
        "--realmodel",
        action="store_true",
        default=False,
        help=(
            "run the tests marked realmodel against a local llama.cpp server "
            "(build and fetch first: python -m jupyter_ci.testing.realmodel build / fetch)"
        ),
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the browser tests last: the fast tests report first, and Playwright's event loop
    (alive while the browser fixtures are) never overlaps the asyncio tests. Skip the
    ``realmodel`` tests unless ``--realmodel`` was given."""
    browser = [item for item in items if "/tests/browser/" in str(item.path).replace("\\", "/")]
    others = [item for item in items if item not in browser]
    items[:] = others + browser
    if not config.getoption("--realmodel"):
        skip = pytest.mark.skip(reason="needs a local model server: run with --realmodel")
        for item in items:
            if "realmodel" in item.keywords:
                item.add_marker(skip)
