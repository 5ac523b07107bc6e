"""A real ``jupyter lab`` process: keys stay on the server, conversations survive a restart."""

from __future__ import annotations

import asyncio
import json
import signal
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.asynchronous import AsyncKernelClient

from jupyter_ci.testing import Fault, Reply, ScriptedModelServer
from jupyter_ci.testing.lab_tab import ScriptedTab, code_cell

from ..browser.lab import Lab, start_lab
from .support import KEY, finished, start_request

pytestmark = pytest.mark.asyncio


def _api(lab: Lab, path: str, method: str = "GET", body: Any = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        f"{lab.url}{path}",
        data=data,
        method=method,
        headers={"Authorization": f"token {lab.token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read().decode()
    return json.loads(text) if text else None


def _tab(lab: Lab, base: Path) -> ScriptedTab:
    async def connect(kernel_id: str) -> Any:
        client = AsyncKernelClient(
            connection_file=str(base / "runtime" / f"kernel-{kernel_id}.json")
        )
        client.load_connection_file()
        client.start_channels()
        await client.wait_for_ready(timeout=60)
        return client

    return ScriptedTab(lab.url, lab.token, kernel_client_for=connect, client_id="tab-restart-test")


async def test_keys_stay_on_the_server_and_conversations_survive_a_restart(
    tmp_path: Path,
) -> None:
    leak = f"Incorrect API key provided: {KEY}. You can find your key at example."
    script = [
        Reply.code(
            "import os\nprint('own key in kernel:', 'JUPYTER_CI_API_KEY' in os.environ)\n"
            "print('kernel env mentions it:', any('SERVERKEY' in v for v in os.environ.values()))"
        ),
        Reply.text("Checked the environment."),
        Reply.fail(Fault.auth(message=leak)),
    ]
    with ScriptedModelServer(script) as model:
        args = [
            "--JupyterCI.model=openai/scripted",
            f"--JupyterCI.api_base={model.base_url}",
            f"--JupyterCI.db_path={tmp_path / 'conversations.sqlite'}",
        ]
        env = {"JUPYTER_CI_API_KEY": KEY}
        with start_lab(tmp_path, args=args, env=env) as lab:
            kernel = await asyncio.to_thread(_api, lab, "api/kernels", "POST", {"name": "python3"})
            tab = _tab(lab, tmp_path)
            tab.open_notebook("a.ipynb", kernel["id"], [code_cell("x = 1", "c0")])
            try:
                await tab.connect()
                first = await tab.request(start_request("a.ipynb", kernel["id"], "check env"))
                end = await tab.wait_for_event(finished, first["run_id"], timeout=120)
                assert end["state"] == "done"
                second = await tab.request(start_request("a.ipynb", kernel["id"], "again"))
                failed = await tab.wait_for_event(finished, second["run_id"], timeout=120)
            finally:
                await tab.close()
            requests = model.chat_requests
            log = lab.log()
        # The kernel never saw jupyter-ci's key...
        outputs = [o["text"] for c in tab.notebooks["a.ipynb"].cells for o in c["outputs"]]
        assert outputs == ["own key in kernel: False\nkernel env mentions it: False\n"]
        # ...the model endpoint did (the server sent it)...
        assert all(request.authorization_present for request in requests)
        # ...and the provider's error that quoted it reached the tab scrubbed.
        assert (failed["state"], failed["reason"]) == ("failed", "model_error")
        assert "Incorrect API key provided" in failed["error"]["message"]
        everything_sent = json.dumps(tab.received)
        assert KEY not in everything_sent
        assert KEY[-8:] not in everything_sent
        assert KEY not in json.dumps(tab.notebooks["a.ipynb"].cells)
        assert KEY not in log
        assert KEY[-8:] not in log

        # A new server process on the same database: the conversation is still there.
        with start_lab(tmp_path, args=args, env=env) as again:
            conversation = await asyncio.to_thread(
                _api, again, "jupyter-ci/conversation?path=a.ipynb"
            )
            status = await asyncio.to_thread(_api, again, "jupyter-ci/status")
    texts = [(m["role"], m["text"]) for m in conversation["messages"]]
    assert ("user", "check env") in texts
    assert ("assistant", "Checked the environment.") in texts
    assert ("user", "again") in texts
    assert conversation["usage"]["runs"] == 2
    assert conversation["persistent"] is True
    assert status["persistent"] is True
    assert "api_base" not in json.dumps(status)


async def test_a_run_of_a_killed_server_ends_in_its_record_and_its_replay(tmp_path: Path) -> None:
    """SIGKILL mid-run, then a new server on the same database: the run is recorded stopped
    (the server stopped), and a tab asking to replay it learns that it ended."""
    with ScriptedModelServer([Reply.code("import time\ntime.sleep(600)")]) as model:
        args = [
            "--JupyterCI.model=openai/scripted",
            f"--JupyterCI.api_base={model.base_url}",
            f"--JupyterCI.db_path={tmp_path / 'conversations.sqlite'}",
        ]
        with start_lab(tmp_path, args=args) as lab:
            kernel = await asyncio.to_thread(_api, lab, "api/kernels", "POST", {"name": "python3"})
            tab = _tab(lab, tmp_path)
            tab.open_notebook("a.ipynb", kernel["id"], [code_cell("x = 1", "c0")])
            try:
                await tab.connect()
                started = await tab.request(start_request("a.ipynb", kernel["id"], "sleep"))
                run_id = started["run_id"]
                await tab.wait_for_event(
                    lambda e: e["type"] == "execution_started", run_id, timeout=300
                )
                # The record is written off the run's path: once the start of the cell is in
                # the history, the server dies without a word.
                for _ in range(200):
                    stored = await asyncio.to_thread(
                        _api, lab, "jupyter-ci/conversation?path=a.ipynb"
                    )
                    kinds = [e["type"] for run in stored["runs"] for e in run["events"]]
                    if "execution_started" in kinds:
                        break
                    await asyncio.sleep(0.05)
                lab.process.send_signal(signal.SIGKILL)
                lab.process.wait(timeout=30)
            finally:
                await tab.close()
        with start_lab(tmp_path, args=args) as again:
            history = await asyncio.to_thread(_api, again, "jupyter-ci/conversation?path=a.ipynb")
            tab = _tab(again, tmp_path)
            tab.open_notebook("a.ipynb", kernel["id"])
            try:
                await tab.connect()
                replayed = await tab.request(
                    {"request": "replay", "run_id": run_id, "after_seq": 0}
                )
                assert replayed["ok"] is True, replayed
                end = await tab.wait_for_event(finished, run_id, timeout=30)
            finally:
                await tab.close()
    [run] = history["runs"]
    assert run["events"][-1]["type"] == "finished"
    assert (run["events"][-1]["state"], run["events"][-1]["reason"]) == (
        "stopped",
        "server_shutdown",
    )
    assert (end["state"], end["reason"]) == ("stopped", "server_shutdown")
    assert end["text"].startswith("jupyter-ci: stopped (the server stopped)")
