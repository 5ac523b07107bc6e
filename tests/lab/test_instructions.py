"""In JupyterLab: the AGENTS.md nearest the notebook, up to the server's root, and
c.JupyterCI.instructions are in the system prompt the Preview shows and the run sends."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from jupyter_ci.server.app import JupyterCIServer
from jupyter_ci.testing import Reply, ScriptedModelServer
from jupyter_ci.testing.lab_tab import ScriptedTab

from .support import finished, start_request

TabFactory = Callable[..., ScriptedTab]
KernelStarter = Callable[[], Awaitable[str]]


@pytest.fixture
def jp_server_config(jp_server_config: dict[str, Any]) -> dict[str, Any]:
    jp_server_config["JupyterCI"]["instructions"] = "Name data frames after what they hold."
    return jp_server_config


async def test_the_preview_and_the_run_carry_the_project_instructions(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
    jp_root_dir: Path,
) -> None:
    (jp_root_dir / "AGENTS.md").write_text("Not this one: a nearer one applies.")
    (jp_root_dir / "study").mkdir()
    (jp_root_dir / "study" / "AGENTS.md").write_text("Units are centimetres.")
    kernel_id = await start_kernel()
    tab = tab_factory()
    tab.open_notebook("study/n.ipynb", kernel_id)
    await tab.connect()
    preview = await tab.request(
        {
            "request": "preview",
            "notebook_path": "study/n.ipynb",
            "kernel_id": kernel_id,
            "prompt": "what units?",
            "options": {},
            "anchor_cell_id": None,
        }
    )
    assert preview["ok"] is True, preview
    system = preview["preview"]["messages"][0]
    assert system["role"] == "system"
    assert "From the configuration (instructions):\nName data frames after" in system["content"]
    assert "From study/AGENTS.md:\nUnits are centimetres." in system["content"]
    assert "Not this one" not in system["content"]
    model_server.set_script([Reply.text("Centimetres.")])
    reply = await tab.request(start_request("study/n.ipynb", kernel_id, "what units?"))
    await tab.wait_for_event(finished, reply["run_id"], timeout=60)
    sent = model_server.chat_requests[0].body["messages"][0]["content"]
    assert sent == system["content"]  # what the Preview showed is what was sent
