"""A pytest plugin with a ``scripted_server`` fixture.

Enable it with ``pytest_plugins = ("jupyter_ci.testing.pytest_plugin",)`` in the root
``conftest.py`` (or a test module), then::

    def test_something(scripted_server):
        scripted_server.set_script([Reply.text("hello")])
        ...  # use scripted_server.base_url
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .server import ScriptedModelServer


@pytest.fixture
def scripted_server() -> Iterator[ScriptedModelServer]:
    """A started :class:`ScriptedModelServer` with an empty script, stopped after the test."""
    with ScriptedModelServer() as server:
        yield server
