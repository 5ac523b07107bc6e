"""What a run's status line says while it runs, as the server composes it (JupyterLab path)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from jupyter_ci.server.app import JupyterCIServer
from jupyter_ci.testing import Fault, Reply, ScriptedModelServer
from jupyter_ci.testing.lab_tab import ScriptedTab

from .support import finished, start_request

TabFactory = Callable[..., ScriptedTab]
KernelStarter = Callable[[], Awaitable[str]]


async def test_a_rate_limit_wait_is_said_in_the_status_line(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
) -> None:
    model_server.set_script(
        [Reply.fail(Fault.rate_limit(1)), Reply.code("x = 1"), Reply.text("Done.")]
    )
    kernel_id = await start_kernel()
    tab = tab_factory()
    tab.open_notebook("a.ipynb", kernel_id)
    await tab.connect()
    reply = await tab.request(start_request("a.ipynb", kernel_id, "make x"))
    end = await tab.wait_for_event(finished, reply["run_id"], timeout=60)
    assert end["state"] == "done", end
    lines = [
        (e["state"], e["reason"], e["text"])
        for e in tab.events(reply["run_id"])
        if e["type"] == "state"
    ]
    # Generating, then the wait (the state unchanged), then generating again, then on.
    at = lines.index(
        ("generating", "rate_limited", "jupyter-ci: rate limited — retrying in 1 s (1/2)")
    )
    assert lines[at - 1] == ("generating", "", "jupyter-ci: generating"), lines
    assert lines[at + 1] == ("generating", "rate_limited", "jupyter-ci: generating"), lines
    assert lines[at + 2][0] == "executing", lines
