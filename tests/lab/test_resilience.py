"""Runs that outlive trouble: a tab that disconnects (and comes back, or not), a kernel that
restarts mid-run, an unauthorized socket."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from jupyter_server.auth.authorizer import Authorizer
from tornado.httpclient import HTTPClientError

from jupyter_ci.server.app import JupyterCIServer
from jupyter_ci.testing import Reply, ScriptedModelServer
from jupyter_ci.testing.lab_tab import ScriptedTab, code_cell

from .support import finished, start_request

TabFactory = Callable[..., ScriptedTab]
KernelStarter = Callable[[], Awaitable[str]]

#: Counts its own runs in the kernel: a cell run twice would print 2.
COUNTED = "import time\nruns = globals().get('runs', 0) + 1\ntime.sleep(2)\nprint('runs', runs)"


async def test_a_tab_that_reconnects_within_the_grace_period_goes_on(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
) -> None:
    model_server.set_script([Reply.code(COUNTED), Reply.text("Counted.")])
    kernel_id = await start_kernel()
    tab = tab_factory()
    tab.open_notebook("a.ipynb", kernel_id, [code_cell("x = 1", "c0")])
    await tab.connect()
    reply = await tab.request(start_request("a.ipynb", kernel_id, "count"))
    run_id = reply["run_id"]
    await tab.wait_until(lambda: len(tab.started_cells) == 1)
    seen = max(e["seq"] for e in tab.events(run_id))
    await tab.disconnect()
    # The cell finishes while the tab is away; its run_cell reply cannot be delivered now.
    await tab.wait_until(lambda: any("runs" in o.get("text", "") for o in _outputs(tab)), 30)
    hello = await tab.connect()
    assert hello is not None
    assert hello["ok"] is True
    replay = await tab.request({"request": "replay", "run_id": run_id, "after_seq": seen})
    assert replay["ok"] is True
    end = await tab.wait_for_event(finished, run_id, timeout=60)
    assert end["state"] == "done"
    # Every event arrived (some twice: live and replayed), none was lost.
    seqs = {e["seq"] for e in tab.events(run_id)}
    assert seqs == set(range(1, end["seq"] + 1))
    # The resent run_cell was answered from the tab's memory, not run again.
    run_calls = [m["call_id"] for m in tab.received if m.get("method") == "run_cell"]
    assert len(set(run_calls)) == 1
    assert tab.calls_seen[run_calls[0]] == 2
    assert [o["text"] for o in _outputs(tab) if o["output_type"] == "stream"] == ["runs 1\n"]


async def test_a_tab_that_stays_away_stops_its_run(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
) -> None:
    app.manager.grace = 1.0
    model_server.set_script([Reply.code("import time\ntime.sleep(30)"), Reply.text("never")])
    kernel_id = await start_kernel()
    owner = tab_factory()
    owner.open_notebook("a.ipynb", kernel_id, [code_cell("x = 1", "c0")])
    await owner.connect()
    watcher = tab_factory()
    watcher.open_notebook("a.ipynb", kernel_id)
    await watcher.connect()
    reply = await owner.request(start_request("a.ipynb", kernel_id, "wait"))
    run_id = reply["run_id"]
    await owner.wait_until(lambda: len(owner.started_cells) == 1)
    await owner.disconnect()
    end = await watcher.wait_for_event(finished, run_id, timeout=30)
    assert (end["state"], end["reason"]) == ("stopped", "disconnected")
    assert "did not come back" in end["error"]["message"]
    # The kernel was interrupted (by the server) and is free for the next request.
    model_server.set_script([Reply.code("print('free')"), Reply.text("ok")])
    await owner.connect()
    again = await owner.request(start_request("a.ipynb", kernel_id, "free?"))
    assert again["ok"] is True
    end = await owner.wait_for_event(finished, again["run_id"], timeout=60)
    assert end["state"] == "done"
    record = await app.store.run(run_id)
    assert record is not None
    assert (record.state, record.reason) == ("stopped", "disconnected")


@pytest.mark.parametrize(
    ("method", "action", "reason", "words"),
    [
        ("POST", "restart", "kernel_restarted", "restarted"),
        ("DELETE", None, "kernel_shutdown", "shut down"),
    ],
)
async def test_a_kernel_restarted_or_shut_down_mid_cell_is_recorded_as_such(
    app: JupyterCIServer,
    jp_fetch: Any,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
    method: str,
    action: str | None,
    reason: str,
    words: str,
) -> None:
    """Through the server's REST API, as JupyterLab's Restart and Shut Down do."""
    model_server.set_script([Reply.code("import time\ntime.sleep(30)"), Reply.text("never")])
    kernel_id = await start_kernel()
    tab = tab_factory()
    tab.open_notebook("a.ipynb", kernel_id, [code_cell("x = 1", "c0")])
    await tab.connect()
    reply = await tab.request(start_request("a.ipynb", kernel_id, "wait"))
    run_id = reply["run_id"]
    await tab.wait_until(lambda: len(tab.started_cells) == 1)
    path = ("api", "kernels", kernel_id, *([action] if action else []))
    await jp_fetch(*path, method=method, **({"body": ""} if method == "POST" else {}))
    end = await tab.wait_for_event(finished, run_id, timeout=60)
    assert (end["state"], end["reason"]) == ("stopped", reason)
    assert words in end["error"]["message"]
    [cell_end] = [e for e in tab.events(run_id) if e["type"] == "execution_finished"]
    assert cell_end["status"] == reason  # the cell ended with its kernel, said so
    record = await app.store.run(run_id)
    assert record is not None
    assert (record.state, record.reason) == ("stopped", reason)
    run_cells = [m for m in tab.received if m.get("method") == "run_cell"]
    assert len(run_cells) == 1  # nothing was replayed
    assert len(model_server.chat_requests) == 1


class _NoKernelExecution(Authorizer):  # type: ignore[misc]
    """Lets the user read, but not execute code in kernels."""

    def is_authorized(self, handler: Any, user: Any, action: str, resource: str) -> bool:
        return not (action == "execute" and resource == "kernels")


@pytest.fixture
def no_execute_config(jp_server_config: dict[str, Any]) -> dict[str, Any]:
    jp_server_config["ServerApp"]["authorizer_class"] = _NoKernelExecution
    return jp_server_config


async def test_a_user_who_may_not_execute_gets_no_socket(
    no_execute_config: dict[str, Any], jp_fetch: Any, jp_ws_fetch: Any
) -> None:
    status = await jp_fetch("jupyter-ci", "status")
    assert json.loads(status.body)["model"] == "openai/scripted"
    with pytest.raises(HTTPClientError) as refused:
        await jp_ws_fetch("jupyter-ci", "ws")
    assert refused.value.code == 403


def _outputs(tab: ScriptedTab) -> list[dict[str, Any]]:
    return [o for c in tab.notebooks["a.ipynb"].cells for o in c.get("outputs", [])]


async def test_a_reloaded_page_gets_its_runs_cells_back_and_the_running_cell_goes_on(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
) -> None:
    # A reload keeps the tab's client id and secret, not its memory: the cells the run wrote
    # (unsaved) and the answers it gave are gone, and so is the page's part of the running cell.
    model_server.set_script([Reply.code(COUNTED), Reply.text("It counted once.")])
    kernel_id = await start_kernel()
    page = tab_factory()
    page.open_notebook("a.ipynb", kernel_id, [code_cell("x = 1", "c0")])
    await page.connect()
    reply = await page.request(start_request("a.ipynb", kernel_id, "count"))
    run_id = reply["run_id"]
    await page.wait_until(lambda: len(page.started_cells) == 1)
    [generated] = page.started_cells
    source = page.notebooks["a.ipynb"].cell(generated)["source"]
    await page.subscribe()  # a round trip: the server has the cell's start (and its msg_id)
    await page.disconnect()

    reloaded = tab_factory(client_id=page.client_id)
    reloaded.client_secret = page.client_secret
    reloaded.open_notebook("a.ipynb", kernel_id, [code_cell("x = 1", "c0")])
    hello = await reloaded.connect()
    assert hello is not None
    assert hello["ok"] is True
    assert [info["run_id"] for info in hello["runs"]] == [run_id]  # still its own run
    # The server's first call puts the run's cell back, with its code, after its anchor.
    restore = await reloaded.wait_for(lambda m: m.get("method") == "restore_cells")
    assert [(c["cell_id"], c["source"]) for c in restore["cells"]] == [(generated, source)]
    assert reloaded.notebooks["a.ipynb"].sources() == ["x = 1", source]
    # The run_cell the first page received (and ran) is not sent again: the server follows the
    # cell on the kernel's output channel, shows the reloaded page its outputs, reads its end.
    end = await reloaded.wait_for_event(finished, run_id, timeout=60)
    assert (end["state"], end["reason"]) == ("done", "answered"), end
    assert not any(m.get("method") == "run_cell" for m in reloaded.received)
    ran = [e for e in reloaded.events(run_id) if e["type"] == "execution_finished"]
    assert [(e["cell_id"], e["status"]) for e in ran] == [(generated, "ok")]
    assert "runs 1" in ran[0]["digest"]
    assert reloaded.shown_outputs[-1]["running"] is False
    cell = reloaded.notebooks["a.ipynb"].cell(generated)
    assert [o["text"] for o in cell["outputs"]] == ["runs 1\n"]
    assert cell["execution_count"] == ran[0]["execution_count"] is not None
    # The model was asked once more, with what the cell printed.
    assert len(model_server.chat_requests) == 2
    assert "runs 1" in json.dumps(model_server.chat_requests[1].body)
    await page.wait_until(lambda: any("runs" in o.get("text", "") for o in _outputs(page)), 30)
    assert [o["text"] for o in _outputs(page) if o["output_type"] == "stream"] == ["runs 1\n"]


async def _reload_while_the_cell_runs(
    page: ScriptedTab, tab_factory: TabFactory, kernel_id: str
) -> ScriptedTab:
    """Once the page's run has a cell running, be that page reloaded (the same client, no
    memory): the new page, connected."""
    await page.wait_until(lambda: len(page.started_cells) == 1)
    await page.subscribe()  # a round trip: the server has the cell's start (and its msg_id)
    await page.disconnect()
    reloaded = tab_factory(client_id=page.client_id)
    reloaded.client_secret = page.client_secret
    reloaded.open_notebook("a.ipynb", kernel_id, [code_cell("x = 1", "c0")])
    await reloaded.connect()
    return reloaded


async def test_the_timeout_of_a_cell_followed_after_a_reload_counts_from_its_start(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
) -> None:
    model_server.set_script(
        [Reply.code("import time\nprint('long')\ntime.sleep(60)"), Reply.text("never asked")]
    )
    kernel_id = await start_kernel()
    page = tab_factory()
    page.open_notebook("a.ipynb", kernel_id, [code_cell("x = 1", "c0")])
    await page.connect()
    request = start_request("a.ipynb", kernel_id, "wait", options={"timeout": 3, "max_attempts": 1})
    run_id = (await page.request(request))["run_id"]
    reloaded = await _reload_while_the_cell_runs(page, tab_factory, kernel_id)
    # The server interrupts the kernel at the timeout; the cell's end is heard on its channel.
    end = await reloaded.wait_for_event(finished, run_id, timeout=60)
    [ran] = [e for e in reloaded.events(run_id) if e["type"] == "execution_finished"]
    assert ran["status"] == "timed_out", ran
    assert 3 <= ran["duration"] < 20, ran
    assert (end["state"], end["reason"]) == ("failed", "max_attempts"), end
    assert not any(m.get("method") == "run_cell" for m in reloaded.received)
    shown = reloaded.notebooks["a.ipynb"].cells[1]["outputs"]
    assert [o.get("ename") for o in shown if o["output_type"] == "error"] == ["KeyboardInterrupt"]


async def test_without_the_kernels_channel_a_reload_while_a_cell_runs_ends_the_run(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As for a kernel gateway's kernel, whose channels are not on this host.
    monkeypatch.setattr(type(app.manager.kernels), "watch", lambda self, kernel_id: None)
    model_server.set_script([Reply.code(COUNTED), Reply.text("never asked")])
    kernel_id = await start_kernel()
    page = tab_factory()
    page.open_notebook("a.ipynb", kernel_id, [code_cell("x = 1", "c0")])
    await page.connect()
    run_id = (await page.request(start_request("a.ipynb", kernel_id, "count")))["run_id"]
    reloaded = await _reload_while_the_cell_runs(page, tab_factory, kernel_id)
    end = await reloaded.wait_for_event(finished, run_id, timeout=60)
    assert (end["state"], end["reason"]) == ("failed", "notebook_unavailable"), end
    assert "reloaded while a cell of the run was running" in end["error"]["message"]
    assert not any(m.get("method") in ("run_cell", "show_outputs") for m in reloaded.received)
    assert len(model_server.chat_requests) == 1
