"""A provider's error that echoes the server's key, written every way it may be (spaced out,
with separators, in any case, reversed, percent-encoded, as HTML entities, in hex or base64,
partial), through a real server: no piece of the key reaches the tab's events or the SQLite
file, read back through the same encodings (``tests/key_echoes.py``)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from jupyter_ci.server.app import JupyterCIServer
from jupyter_ci.testing import Fault, Reply, ScriptedModelServer
from jupyter_ci.testing.lab_tab import ScriptedTab

from ..key_echoes import ENCODINGS, leaks
from .support import finished, start_request

TabFactory = Callable[..., ScriptedTab]
KernelStarter = Callable[[], Awaitable[str]]
#: A key shaped like a real one (random letters: no piece of it is an English word).
KEY = "sk-proj-Vb3Nq8ZtR1wLx6Hs9CkJ2mYd5Pg0FaT7uEo4QiWn"


@pytest.fixture
def server_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """jupyter-ci's key in the server's environment (this module's own)."""
    monkeypatch.setenv("JUPYTER_CI_API_KEY", KEY)
    return KEY


async def test_no_encoding_of_the_key_reaches_a_tab_or_the_database(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
    tmp_path: Path,
) -> None:
    echoes = [encode(KEY) for encode in ENCODINGS.values()]
    echoes += [encode(KEY[8:-6]) for encode in ENCODINGS.values()]  # partial
    echoes.append(ENCODINGS["base64"](ENCODINGS["html entities"](KEY)))
    model_server.set_script(
        [Reply.fail(Fault.auth(message=f"Incorrect API key provided: {echo}.")) for echo in echoes]
    )
    kernel_id = await start_kernel()
    tab = tab_factory()
    tab.open_notebook("a.ipynb", kernel_id)
    await tab.connect()
    for echo in echoes:
        reply = await tab.request(start_request("a.ipynb", kernel_id, "hello"))
        end = await tab.wait_for_event(finished, reply["run_id"], timeout=60)
        assert (end["state"], end["reason"]) == ("failed", "model_error"), end["error"]
        assert "Incorrect API key provided: [key]" in end["error"]["message"], echo
    await app.store.close()  # everything written, so the file holds all there is
    sent = json.dumps(tab.received)
    stored = (tmp_path / "conversations.sqlite").read_bytes().decode("utf-8", "replace")
    for text, where in ((sent, "sent to the tab"), (stored, "stored")):
        assert leaks(text, KEY, size=8) == [], where
        assert leaks(text, KEY, depth=0) == [], where  # plain, escaped: any 6 characters
