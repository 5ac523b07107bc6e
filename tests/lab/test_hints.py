"""The hints jupyter-ci prints, followed as a user would: each one works, or says what does."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from jupyter_ci.errors import ConfigError
from jupyter_ci.server.app import JupyterCIServer
from jupyter_ci.testing import Reply, ScriptedModelServer
from jupyter_ci.testing.lab_tab import ScriptedTab

from .support import finished, start_request

TabFactory = Callable[..., ScriptedTab]
KernelStarter = Callable[[], Awaitable[str]]


@pytest.fixture
def server_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """No key at all: a server someone just installed, with a local model in mind."""
    monkeypatch.delenv("JUPYTER_CI_API_KEY", raising=False)
    return ""


@pytest.fixture
def jp_server_config(tmp_path: Path, server_key: str) -> dict[str, Any]:
    """No model configured either."""
    return {
        "ServerApp": {"jpserver_extensions": {"jupyter_ci": True}},
        "JupyterCI": {"db_path": str(tmp_path / "conversations.sqlite")},
    }


async def test_the_no_model_hint_for_a_local_server_works_in_jupyterlab(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
) -> None:
    # The hint, word for word, as %%ci prints it when no model is configured...
    hint = ConfigError.no_model().hint
    assert "--model openai/NAME --api-base http://127.0.0.1:8080/v1" in hint
    # ...followed with the local server's own address: `%ci --model ... --api-base ...` puts
    # them in the kernel's session settings, which the handoff carries to the server.
    model_server.set_script([Reply.code("x = 2 + 2"), Reply.text("x is 4.")])
    kernel_id = await start_kernel()
    tab = tab_factory()
    tab.open_notebook("a.ipynb", kernel_id)
    await tab.connect()
    session = {"model": "openai/local", "api_base": model_server.base_url}
    reply = await tab.request(
        start_request("a.ipynb", kernel_id, "make x", origin="magic", session_options=session)
    )
    assert reply["ok"] is True, reply
    end = await tab.wait_for_event(finished, reply["run_id"], timeout=60)
    assert (end["state"], end["answer"]) == ("done", "x is 4.")
    assert len(model_server.chat_requests) == 2  # the session's endpoint answered
