"""Shared test configuration: pytest-jupyter's server fixtures and an isolated Jupyter home."""

from __future__ import annotations

pytest_plugins = ("pytest_jupyter.jupyter_server",)
