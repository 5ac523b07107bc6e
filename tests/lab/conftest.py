"""Fixtures of the Lab-path server tests: a real Jupyter server (pytest-jupyter) with jupyter-ci,
the scripted model, real kernels, and :class:`ScriptedTab` playing the browser."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_ci.server.app import JupyterCIServer
from jupyter_ci.testing import ScriptedModelServer
from jupyter_ci.testing.lab_tab import ScriptedTab

from .support import KEY, ci_app


@pytest.fixture
def model_server() -> Iterator[ScriptedModelServer]:
    """The scripted OpenAI-compatible model (each test sets its script)."""
    with ScriptedModelServer([]) as server:
        yield server


@pytest.fixture
def server_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """jupyter-ci's key in the server's environment before the server starts."""
    monkeypatch.setenv("JUPYTER_CI_API_KEY", KEY)
    return KEY


@pytest.fixture
def jp_server_config(
    model_server: ScriptedModelServer, server_key: str, tmp_path: Path
) -> dict[str, Any]:
    return {
        "ServerApp": {"jpserver_extensions": {"jupyter_ci": True}},
        "JupyterCI": {
            "model": "openai/scripted",
            "models": "openai/other",
            "api_base": model_server.base_url,
            "db_path": str(tmp_path / "conversations.sqlite"),
            "timeout": 60.0,
        },
    }


@pytest.fixture
def app(jp_serverapp: Any) -> JupyterCIServer:
    """The running extension (tests await ``app.started`` through :func:`tab_factory`)."""
    return ci_app(jp_serverapp)


@pytest.fixture
def start_kernel(jp_serverapp: Any) -> Callable[[], Awaitable[str]]:
    """Start a kernel through the server's kernel manager (as the notebook's session does)."""

    async def start() -> str:
        # path "" starts it in the server's root folder (the test's own), not pytest's.
        kernel_id: str = await jp_serverapp.kernel_manager.start_kernel(
            kernel_name="python3", path=""
        )
        return kernel_id

    return start


@pytest.fixture
def tab_factory(
    jp_serverapp: Any,
    jp_http_port: int,
    jp_base_url: str,
    app: JupyterCIServer,
    jp_asyncio_loop: asyncio.AbstractEventLoop,
    http_server_client: Any,
) -> Iterator[Callable[..., ScriptedTab]]:
    """Makes tabs for the server; kernel clients talk to the server's kernels directly.

    ``http_server_client`` makes pytest-jupyter serve the app on ``jp_http_port``.

    Tabs connect only once the extension has opened its store (``connect`` waits for it).
    """
    tabs: list[ScriptedTab] = []

    async def connect(kernel_id: str) -> Any:
        client = jp_serverapp.kernel_manager.get_kernel(kernel_id).client()
        # A session of its own, as a browser's kernel connection has (the kernel manager's
        # session is the server's own clients', e.g. jupyter-server-nbmodel's).
        client.session = client.session.clone()
        client.session.session = str(uuid.uuid4())
        client.start_channels()
        await client.wait_for_ready(timeout=60)
        return client

    def make(**kwargs: Any) -> ScriptedTab:
        tab = _ReadyTab(
            app,
            f"http://127.0.0.1:{jp_http_port}{jp_base_url}",
            jp_serverapp.identity_provider.token,
            kernel_client_for=connect,
            **kwargs,
        )
        tabs.append(tab)
        return tab

    yield make
    for tab in tabs:
        jp_asyncio_loop.run_until_complete(tab.close())


class _ReadyTab(ScriptedTab):
    """A tab that connects once the extension is ready."""

    def __init__(self, app: JupyterCIServer, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.app = app

    async def connect(self, *, hello: bool = True) -> dict[str, Any] | None:
        await asyncio.wait_for(self.app.ensure_started(), 30)
        return await super().connect(hello=hello)
