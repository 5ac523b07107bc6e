"""The no-model hints for JupyterLab, followed word for word: the command line that starts the
server with a model and its key (the %%ci message and the panel's setup card say it), its form for
a local server, and ``%ci``'s "key, in JupyterLab" line with ``%ci --model``.

Each test puts exactly the variables the hint's command line names into the server's environment
before the server starts (``sk-...`` made a key, ``NAME`` and the address made the scripted
model's), and a request then runs to its end. ``OPENAI_BASE_URL`` stands in for
api.openai.com: it points the OpenAI provider at the scripted model and changes nothing else.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from jupyter_ci.errors import LAB_SETUP_COMMAND, LOCAL_LAB_SETUP_COMMAND, ConfigError
from jupyter_ci.magics import describe
from jupyter_ci.server.app import JupyterCIServer
from jupyter_ci.settings import Settings
from jupyter_ci.testing import Reply, ScriptedModelServer
from jupyter_ci.testing.lab_tab import ScriptedTab

from .support import finished, start_request

TabFactory = Callable[..., ScriptedTab]
KernelStarter = Callable[[], Awaitable[str]]
FAKE_KEY = "sk-followed-the-hint-0123456789"


def command_variables(command: str, model_server: ScriptedModelServer) -> dict[str, str]:
    """The ``NAME=value`` words before ``jupyter lab`` in ``command``, placeholders filled."""
    words = shlex.split(command)
    assert words[-2:] == ["jupyter", "lab"], command
    pairs = dict(word.split("=", 1) for word in words[:-2])
    filled = {}
    for name, value in pairs.items():
        value = value.replace("sk-...", FAKE_KEY).replace("openai/NAME", "openai/scripted")
        filled[name] = value.replace("http://127.0.0.1:8080/v1", model_server.base_url)
    return filled


def hint_command(text: str) -> str:
    """The one backquoted command line ending in ``jupyter lab`` in ``text``."""
    [command] = re.findall(r"`([^`]*jupyter lab)`", text)
    return command


#: (the hint's text, where it comes from, the kernel's %ci session settings the user has)
HINTS = {
    "the %%ci no-model message": (ConfigError.no_model("jupyterlab").hint, {}),
    "the setup card's command": (f"`{LAB_SETUP_COMMAND}`", {}),
    "the setup card's local server": (f"`{LOCAL_LAB_SETUP_COMMAND}`", {}),
    "%ci's key line after %ci --model": (
        describe(Settings(model="openai/gpt-4o-mini")),
        {"model": "openai/gpt-4o-mini"},
    ),
}


@pytest.fixture(params=sorted(HINTS))
def hint(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def server_key(
    hint: str, model_server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> str:
    """The server's environment: only what the hint's command line sets."""
    for name in ("JUPYTER_CI_API_KEY", "JUPYTER_CI_MODEL", "JUPYTER_CI_API_BASE", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    command = hint_command(HINTS[hint][0])
    for name, value in command_variables(command, model_server).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("OPENAI_BASE_URL", model_server.base_url)  # instead of api.openai.com
    return FAKE_KEY


@pytest.fixture
def jp_server_config(tmp_path: Path, server_key: str) -> dict[str, Any]:
    """No model in the server's configuration: only the environment the hint names."""
    return {
        "ServerApp": {"jpserver_extensions": {"jupyter_ci": True}},
        "JupyterCI": {"db_path": str(tmp_path / "conversations.sqlite")},
    }


def test_the_hints_say_the_key_belongs_to_the_server_not_the_kernel() -> None:
    lab = ConfigError.no_model("jupyterlab").hint
    assert "does not reach the server" in lab
    assert hint_command(lab) == LAB_SETUP_COMMAND
    lines = describe(Settings(model="openai/gpt-4o-mini")).splitlines()
    [lab_line] = [line for line in lines if "key, in JupyterLab" in line]
    assert "`OPENAI_API_KEY=sk-... jupyter lab`" in lab_line
    assert "does not reach the server" in lab_line


async def test_the_hint_followed_literally_makes_a_working_setup(
    hint: str,
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
) -> None:
    model_server.set_script([Reply.code("x = 2 + 2"), Reply.text("x is 4.")])
    kernel_id = await start_kernel()
    tab = tab_factory()
    tab.open_notebook("a.ipynb", kernel_id)
    await tab.connect()
    session = HINTS[hint][1]
    reply = await tab.request(
        start_request("a.ipynb", kernel_id, "make x", origin="magic", session_options=session)
    )
    assert reply["ok"] is True, reply
    end = await tab.wait_for_event(finished, reply["run_id"], timeout=60)
    assert (end["state"], end["answer"]) == ("done", "x is 4."), end
    assert len(model_server.chat_requests) == 2
    local = hint == "the setup card's local server"
    # A hosted model got the key the hint put in the server's environment (litellm refuses to
    # call OpenAI without one); the local server needed none.
    assert all(r.authorization_present for r in model_server.chat_requests) or local
