"""Fixtures of the MCP tests: a real Jupyter server with jupyter-ci, its MCP route's URL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from jupyter_server.utils import url_path_join


@pytest.fixture
def jp_server_config(tmp_path: Path) -> dict[str, Any]:
    return {
        "ServerApp": {"jpserver_extensions": {"jupyter_ci": True}},
        "JupyterCI": {"db_path": str(tmp_path / "conversations.sqlite")},
    }


@pytest.fixture
def mcp_url(jp_serverapp: Any, jp_http_port: int, jp_base_url: str, http_server_client: Any) -> str:
    """The MCP route of the server under test (``http_server_client`` serves it)."""
    return url_path_join(f"http://localhost:{jp_http_port}", jp_base_url, "jupyter-ci", "mcp")


@pytest.fixture
def token(jp_serverapp: Any) -> str:
    """The server's token."""
    return str(jp_serverapp.identity_provider.token)


@pytest.fixture
def root(jp_root_dir: Path) -> Path:
    """The server's root folder."""
    return Path(jp_root_dir)
