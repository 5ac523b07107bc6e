"""The Lab path with replies that do not end as a reply should: a stream the provider ends
cleanly mid-code runs nothing, and the cell it began is left unfinished; a reply that never ends
or grows past the caps is cut at the cap as it streams."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from jupyter_ci.agent.cells import UNFINISHED_NOTE
from jupyter_ci.agent.model_calls import MAX_REPLY_CHARS
from jupyter_ci.server.app import JupyterCIServer
from jupyter_ci.testing import Fault, Reply, ScriptedModelServer
from jupyter_ci.testing.lab_tab import ScriptedTab, code_cell

from ..test_cut_replies import CUTS, HUGE_CODE, cut_rewrite, precious
from .support import finished, start_request

TabFactory = Callable[..., ScriptedTab]
KernelStarter = Callable[[], Awaitable[str]]


@pytest.mark.parametrize("cut", sorted(CUTS))
async def test_a_cleanly_ended_stream_mid_code_runs_nothing_in_lab(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
    jp_root_dir: Path,
    cut: str,
) -> None:
    kept = precious(jp_root_dir)
    model_server.set_script([cut_rewrite(times=None, cut=cut)])
    kernel_id = await start_kernel()
    tab = tab_factory()
    tab.open_notebook("a.ipynb", kernel_id, [code_cell("x = 1", "c0")])
    await tab.connect()
    reply = await tab.request(start_request("a.ipynb", kernel_id, "upper-case the file"))
    end = await tab.wait_for_event(finished, reply["run_id"], timeout=120)
    assert (end["state"], end["reason"]) == ("failed", "model_error"), end
    assert CUTS[cut][0] in end["error"]["message"]
    assert kept.read_text() == "keep me"
    events = tab.events(reply["run_id"])
    assert not [e for e in events if e["type"] == "execution_started"]
    [cell] = [c for c in tab.notebooks["a.ipynb"].cells if "jupyter_ci" in c["metadata"]]
    assert cell["source"].splitlines()[0] == UNFINISHED_NOTE
    assert cell["outputs"] == []


@pytest.mark.parametrize(
    ("reply", "cap", "options"),
    [
        (
            Reply.fail(Fault.never_ending(0.002), content="```python\nx = 1\n"),
            "max_tokens_per_run",
            {"max_tokens_per_run": 4000},
        ),
        (Reply.code(HUGE_CODE), "one reply's size", {}),
    ],
    ids=["never-ending", "10-MB-block"],
)
async def test_caps_hold_while_a_reply_streams_in_lab(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
    reply: Reply,
    cap: str,
    options: dict[str, int],
) -> None:
    model_server.set_script([reply])
    kernel_id = await start_kernel()
    tab = tab_factory()
    tab.open_notebook("a.ipynb", kernel_id, [code_cell("x = 1", "c0")])
    await tab.connect()
    request = start_request("a.ipynb", kernel_id, "go", options=options)
    started = await tab.request(request)
    end = await tab.wait_for_event(finished, started["run_id"], timeout=120)
    assert (end["state"], end["reason"]) == ("failed", "budget_exceeded"), end
    assert cap in end["error"]["message"]
    closed = await asyncio.to_thread(model_server.wait_for_close, 10.0)
    assert closed.client_closed_early
    events = tab.events(started["run_id"])
    assert sum(len(e["text"]) for e in events if e["type"] == "token") <= MAX_REPLY_CHARS
    generated = [c for c in tab.notebooks["a.ipynb"].cells if "jupyter_ci" in c["metadata"]]
    assert all(len(c["source"]) <= MAX_REPLY_CHARS + 10_000 for c in generated)
    assert all(line.startswith("#") for c in generated for line in c["source"].splitlines())
