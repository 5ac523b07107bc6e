"""The same cell endings, classified the same way by every workspace, each on a real kernel.

- headless: :class:`KernelWorkspace` (nbclient on a kernel of its own);
- in-kernel: :class:`InKernelWorkspace` driven inside a real ipykernel, as ``%%ci`` drives it;
- Lab: :class:`LabWorkspace` in a real Jupyter server, through a run, with :class:`ScriptedTab`
  playing the browser (the tab reports the raw reply; the server classifies).

A cell that must be stopped while it runs first creates a marker file: the test acts once it
exists, never after a sleep.
"""

from __future__ import annotations

import asyncio
import json
import textwrap
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.manager import AsyncKernelManager

from jupyter_ci.execution.status import CellStatus
from jupyter_ci.server.app import JupyterCIServer
from jupyter_ci.testing import Reply, ScriptedModelServer
from jupyter_ci.testing.lab_tab import ScriptedTab, code_cell
from jupyter_ci.workspaces.kernel import KernelWorkspace

from .support import finished, start_request

#: A cell that says it runs (the marker file), then runs long.
LONG = "open({marker!r}, 'w').close()\nimport time\ntime.sleep(60)"

#: ending: (cell source, timeout, what happens while it runs, how it must be classified)
ENDINGS: dict[str, tuple[str, float, str | None, CellStatus]] = {
    "ok": ("x = 1", 0, None, CellStatus.OK),
    "error": ("1 / 0", 0, None, CellStatus.ERROR),
    "timed_out": (LONG, 1, None, CellStatus.TIMED_OUT),
    # The run is asked to stop: jupyter-ci interrupts the kernel.
    "stop": (LONG, 0, "stop", CellStatus.INTERRUPTED),
    # Someone else interrupts the kernel (the user's interrupt button): not ours.
    "user_interrupt": (LONG, 0, "interrupt", CellStatus.ABORTED),
    # The kernel ends the request without a reply (it cannot send this one: a payload that is not
    # JSON), as when an interrupt lands in its request handler outside the cell's code: the
    # workspace and the tab wait ReplyGraceSeconds after idle, then the cell ended aborted.
    "no_reply": (
        "get_ipython().payload_manager.write_payload({{'source': 'x', 'data': object()}})",
        0,
        None,
        CellStatus.ABORTED,
    ),
}


async def _marker(path: Path, timeout: float = 60) -> None:
    """Wait until the cell has created ``path`` (it runs)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await asyncio.to_thread(path.exists):
        if loop.time() > deadline:
            raise TimeoutError(f"the cell did not start within {timeout} s")
        await asyncio.sleep(0.02)


# --- headless ------------------------------------------------------------------------------------


async def headless(source: str, timeout: float, action: str | None, marker: Path) -> CellStatus:
    async with await KernelWorkspace.open(marker.parent / "headless.ipynb") as ws:
        cell_id = await ws.insert_cell(None, source)
        running = asyncio.ensure_future(ws.run_cell(cell_id, timeout))
        if action is not None:
            await _marker(marker)
            if action == "stop":
                await ws.interrupt()
            else:
                await ws.kernel_manager.interrupt_kernel()
        return (await running).status


# --- in the kernel -------------------------------------------------------------------------------

#: Run in a real kernel: the in-kernel workspace runs one block, the main thread serving it as
#: the magic does; for Stop, the loop's side interrupts once the block runs.
DRIVER = textwrap.dedent(
    """
    import asyncio, os
    from IPython import get_ipython
    from jupyter_ci.loop_thread import BackgroundLoop
    from jupyter_ci.workspaces.inkernel import InKernelWorkspace, MainThreadBridge

    def _drive(source, timeout, stop_when):
        bridge = MainThreadBridge()
        workspace = InKernelWorkspace(get_ipython(), bridge)

        async def go():
            try:
                cell_id = await workspace.insert_cell(None, source)
                running = asyncio.ensure_future(workspace.run_cell(cell_id, timeout))
                if stop_when:
                    while not os.path.exists(stop_when) and not running.done():
                        await asyncio.sleep(0.02)
                    await workspace.interrupt()
                return await running
            finally:
                bridge.finish()

        future = asyncio.run_coroutine_threadsafe(go(), BackgroundLoop.shared().loop)
        bridge.serve(lambda: None)
        return future.result(timeout=60).status.value

    print("STATUS", _drive({source!r}, {timeout!r}, {stop_when!r}))
    """
)


async def in_kernel(source: str, timeout: float, action: str | None, marker: Path) -> CellStatus:
    km = AsyncKernelManager(kernel_name="python3")
    await km.start_kernel(cwd=str(marker.parent))
    kc = km.client()
    kc.start_channels()
    try:
        await kc.wait_for_ready(timeout=60)
        printed: list[str] = []

        def collect(msg: dict[str, Any]) -> None:
            if msg["msg_type"] == "stream":
                printed.append(msg["content"]["text"])

        stop_when = str(marker) if action == "stop" else ""
        code = DRIVER.format(source=source, timeout=timeout, stop_when=stop_when)
        running = asyncio.ensure_future(
            kc.execute_interactive(code, output_hook=collect, timeout=120)
        )
        if action == "interrupt":
            await _marker(marker)
            await km.interrupt_kernel()
        reply = await running
        assert reply["content"]["status"] == "ok", reply["content"]
        [line] = [line for line in "".join(printed).splitlines() if line.startswith("STATUS ")]
        return CellStatus(line.split()[1])
    finally:
        kc.stop_channels()
        await km.shutdown_kernel(now=True)


# --- JupyterLab ---------------------------------------------------------------------------------


@dataclass
class Lab:
    """A real Jupyter server with jupyter-ci, the scripted model, and a way to make tabs."""

    app: JupyterCIServer
    model_server: ScriptedModelServer
    start_kernel: Callable[[], Awaitable[str]]
    tab_factory: Callable[..., ScriptedTab]
    jp_fetch: Any

    async def end(
        self, source: str, timeout: float, action: str | None, marker: Path
    ) -> CellStatus:
        self.model_server.set_script([Reply.code(source), Reply.text("Done.")])
        kernel_id = await self.start_kernel()
        tab = self.tab_factory()
        tab.open_notebook("a.ipynb", kernel_id, [code_cell("x = 0", "c0")])
        await tab.connect()
        options = {"max_attempts": 1, "timeout": timeout}
        reply = await tab.request(start_request("a.ipynb", kernel_id, "go", options=options))
        run_id = reply["run_id"]
        if action is not None:
            await _marker(marker)
            if action == "stop":
                assert (await tab.request({"request": "stop_run", "run_id": run_id}))["ok"]
            else:  # the interrupt button: through the server's REST API
                await self.jp_fetch(
                    "api", "kernels", kernel_id, "interrupt", method="POST", body=""
                )
        ended = await tab.wait_for_event(lambda e: e["type"] == "execution_finished", run_id)
        await tab.wait_for_event(finished, run_id)
        return CellStatus(ended["status"])


@pytest.fixture
def lab(request: pytest.FixtureRequest, workspace: str) -> Lab | None:
    """The server's fixtures, for the Lab workspace only (the others need no server)."""
    if workspace != "lab":
        return None
    names = ("app", "model_server", "start_kernel", "tab_factory", "jp_fetch")
    return Lab(*(request.getfixturevalue(name) for name in names))


@pytest.mark.parametrize("ending", list(ENDINGS))
@pytest.mark.parametrize("workspace", ["headless", "in_kernel", "lab"])
async def test_every_workspace_classifies_a_cell_ending_the_same_way(
    workspace: str, ending: str, lab: Lab | None, tmp_path: Path
) -> None:
    template, timeout, action, expected = ENDINGS[ending]
    if workspace == "in_kernel" and ending == "no_reply":
        pytest.skip("in the kernel a block has no request of its own (its payload is the %%ci's)")
    marker = tmp_path / "running"
    source = template.format(marker=str(marker))
    if lab is not None:
        status = await lab.end(source, timeout, action, marker)
    else:
        status = await {"headless": headless, "in_kernel": in_kernel}[workspace](
            source, timeout, action, marker
        )
    assert status is expected, json.dumps([workspace, ending, status.value])
