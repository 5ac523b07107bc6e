"""In JupyterLab, a plot is told in words to a model that does not see images: read silently
through the tab from the notebook's kernel."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from jupyter_ci.server.app import JupyterCIServer
from jupyter_ci.testing import Reply, ScriptedModelServer
from jupyter_ci.testing.lab_tab import ScriptedTab

from ..test_figures import PLOT
from .support import finished, start_request

TabFactory = Callable[..., ScriptedTab]
KernelStarter = Callable[[], Awaitable[str]]


async def test_a_plot_is_described_to_a_text_only_model(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
) -> None:
    model_server.set_script([Reply.code(PLOT), Reply.text("Setosa petals are shorter.")])
    kernel_id = await start_kernel()
    tab = tab_factory()
    tab.open_notebook("a.ipynb", kernel_id)
    await tab.connect()
    reply = await tab.request(start_request("a.ipynb", kernel_id, "plot the iris petals"))
    end = await tab.wait_for_event(finished, reply["run_id"], timeout=60)
    assert end["state"] == "done", end
    told = json.dumps(model_server.chat_requests[1].body["messages"])
    assert "title 'Iris petals'" in told
    assert "legend 'setosa', 'virginica'" in told
    # The record keeps what the model was told (the export and the history show it).
    [ran] = [e for e in tab.events(reply["run_id"]) if e["type"] == "execution_finished"]
    assert "Figure 1: 1 axes" in ran["digest"]
    [cell] = tab.notebooks["a.ipynb"].cells
    assert [sorted(o.get("data", {})) for o in cell["outputs"]] == [["image/png", "text/plain"]]
