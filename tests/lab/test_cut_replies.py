"""The Lab path with replies that do not end as a reply should: a stream the provider ends
cleanly mid-code runs nothing, and the cell it began is left unfinished."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from jupyter_ci.agent.cells import UNFINISHED_NOTE
from jupyter_ci.server.app import JupyterCIServer
from jupyter_ci.testing import ScriptedModelServer
from jupyter_ci.testing.lab_tab import ScriptedTab, code_cell

from ..test_cut_replies import cut_rewrite, precious
from .support import finished, start_request

TabFactory = Callable[..., ScriptedTab]
KernelStarter = Callable[[], Awaitable[str]]


async def test_a_cleanly_ended_stream_mid_code_runs_nothing_in_lab(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
    jp_root_dir: Path,
) -> None:
    kept = precious(jp_root_dir)
    model_server.set_script([cut_rewrite(times=None)])
    kernel_id = await start_kernel()
    tab = tab_factory()
    tab.open_notebook("a.ipynb", kernel_id, [code_cell("x = 1", "c0")])
    await tab.connect()
    reply = await tab.request(start_request("a.ipynb", kernel_id, "upper-case the file"))
    end = await tab.wait_for_event(finished, reply["run_id"], timeout=120)
    assert (end["state"], end["reason"]) == ("failed", "model_error"), end
    assert "ended before it was complete" in end["error"]["message"]
    assert kept.read_text() == "keep me"
    events = tab.events(reply["run_id"])
    assert not [e for e in events if e["type"] == "execution_started"]
    [cell] = [c for c in tab.notebooks["a.ipynb"].cells if "jupyter_ci" in c["metadata"]]
    assert cell["source"].splitlines()[0] == UNFINISHED_NOTE
    assert cell["outputs"] == []
