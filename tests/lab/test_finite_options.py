"""Request options over the websocket through a real server: NaN and Infinity (which JSON as
Python reads it carries) are refused like any bad value, in each layer a tab sends."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from jupyter_ci.server.app import JupyterCIServer
from jupyter_ci.testing import ScriptedModelServer
from jupyter_ci.testing.lab_tab import ScriptedTab

from .support import start_request

TabFactory = Callable[..., ScriptedTab]
KernelStarter = Callable[[], Awaitable[str]]


async def test_nan_and_infinity_in_request_options_are_refused(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
) -> None:
    kernel_id = await start_kernel()
    tab = tab_factory()
    tab.open_notebook("a.ipynb", kernel_id)
    await tab.connect()
    for layer, name, value in (
        ("options", "timeout", float("nan")),
        ("user_options", "temperature", float("inf")),
        ("session_options", "max_cost_per_run", float("-inf")),
    ):
        request = start_request("a.ipynb", kernel_id, "go", **{layer: {name: value}})
        reply = await tab.request(request)
        assert reply["ok"] is False, (layer, reply)
        assert reply["error"]["code"] == "config_error", reply
        assert "expects a finite number" in reply["error"]["message"], reply
    assert model_server.chat_requests == []
