"""The Lab path's server side: its own cost per step over the websocket, and event-loop lag.

A Jupyter server with jupyter-ci runs in this process; a Python tab (``ScriptedTab(instant=True)``)
connects over the websocket and answers every call at once (cells "run" in no time, no kernel
work), and a scripted model answers instantly with ``x = 1``. So a step's wall time is the cost
of the model round trip, the loop, the run manager, the websocket and the tab's JSON handling.

1. **Per step**: median and p90 of the time between consecutive ``execution_finished`` events
   seen by the tab, over ``--steps`` steps of one run; the baseline is the same loop and model
   with an in-memory workspace that also answers at once (no server, no websocket), in the same
   process. The difference is what the server path adds per step.
2. **Event-loop lag** of the server's loop while ``--runs`` runs (one per kernel, each on its own
   real idle kernel) proceed at once: a ticker asks to wake every 10 ms and records how late it
   woke; median, p99 and max, against the same ticker with the server idle.

    python -m benchmarks.server_overhead [--steps 60] [--runs 20]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import tempfile
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jupyter_ci.agent.loop import AgentRun, RunRequest
from jupyter_ci.agent.workspace import Cell, Execution, Variable
from jupyter_ci.execution.status import CellStatus
from jupyter_ci.models import litellm_model
from jupyter_ci.models.litellm_model import LiteLLMModel, import_litellm
from jupyter_ci.settings import Settings
from jupyter_ci.testing import Reply, ScriptedModelServer
from jupyter_ci.testing.lab_tab import ScriptedTab

TICK = 0.010


class InstantWorkspace:
    """A workspace in memory whose cells run at once (the baseline's hands)."""

    def __init__(self) -> None:
        self.cells: list[Cell] = []

    async def read_cells(self, *, outputs: bool = True) -> list[Cell]:
        return list(self.cells)

    async def insert_cell(
        self, after_id: str | None, source: str = "", metadata: Mapping[str, Any] | None = None
    ) -> str:
        cell = Cell(uuid.uuid4().hex, "code", source)
        index = next((i + 1 for i, c in enumerate(self.cells) if c.id == after_id), 0)
        self.cells.insert(index, cell)
        return cell.id

    async def append_source(self, cell_id: str, text: str) -> None:
        return None

    async def replace_source(self, cell_id: str, source: str, *, undoable: bool = False) -> None:
        return None

    async def delete_cell(self, cell_id: str) -> None:
        self.cells = [cell for cell in self.cells if cell.id != cell_id]

    async def run_cell(
        self, cell_id: str, timeout: float, expression: str | None = None
    ) -> Execution:
        return Execution(cell_id, CellStatus.OK, [], 1, 0.0)

    async def inspect_variables(self) -> list[Variable]:
        return []

    async def snapshot_files(self, root: str | None) -> None:
        return None

    async def fix_context(self, ename: str, evalue: str, code: str) -> list[str]:
        return []

    async def figure_notes(self, read: bool) -> list[str]:
        return []

    async def interrupt(self) -> None:
        return None


def settings_for(base_url: str, steps: int) -> Settings:
    return Settings(
        model="openai/scripted",
        api_base=base_url,
        max_steps=steps + 1,
        max_tokens_per_run=0,
        max_cost_per_run=0,
        context_tokens=4000,
    )


async def baseline(base_url: str, steps: int) -> list[float]:
    """Per-step wall times of the loop with an instant in-memory workspace."""
    ends: list[float] = []

    def on_event(event: dict[str, Any]) -> None:
        if event["type"] == "execution_finished":
            ends.append(time.perf_counter())

    settings = settings_for(base_url, steps)
    model = LiteLLMModel(settings, api_key="bench")
    run = AgentRun(RunRequest("count", settings), InstantWorkspace(), model, on_event=on_event)
    outcome = await run.run()
    assert outcome.reason == "max_steps", outcome.error
    return [b - a for a, b in itertools.pairwise(ends)]


async def start_server(root: Path, model_url: str, steps: int) -> Any:
    """A Jupyter server with jupyter-ci, in this process, on a free port."""
    from jupyter_server.serverapp import ServerApp

    token = uuid.uuid4().hex
    app = ServerApp.instance(
        port=0,
        open_browser=False,
        allow_root=True,
        root_dir=str(root),
        log_level="WARN",
        jpserver_extensions={"jupyter_ci": True},
    )
    app.initialize(
        argv=[
            f"--IdentityProvider.token={token}",
            "--ServerApp.ip=127.0.0.1",
            "--JupyterCI.model=openai/scripted",
            f"--JupyterCI.api_base={model_url}",
            f"--JupyterCI.max_steps={steps + 1}",
            "--JupyterCI.max_tokens_per_run=0",
            "--JupyterCI.max_cost_per_run=0",
            f"--JupyterCI.db_path={root / 'bench.sqlite'}",
        ]
    )
    app.start_app()
    await app._post_start()
    return app


async def server_steps(app: Any, steps: int) -> list[float]:
    """Per-step wall times seen by an instant tab over the websocket."""
    kernel_id = await app.kernel_manager.start_kernel(kernel_name="python3")
    tab = ScriptedTab(app.connection_url, app.identity_provider.token, instant=True)
    tab.open_notebook("bench.ipynb", kernel_id)
    await tab.connect()
    try:
        reply = await tab.request(_start("bench.ipynb", kernel_id))
        run_id = reply["run_id"]
        end = await tab.wait_for_event(lambda e: e["type"] == "finished", run_id, 600)
        assert end["reason"] == "max_steps", end
        finished = [e for e in tab.events(run_id) if e["type"] == "execution_finished"]
        # Arrival times at the tab: the event's own time stamp is when the server sent it.
        times = [e["time"] for e in finished]
        return [b - a for a, b in itertools.pairwise(times)]
    finally:
        await tab.close()
        await app.kernel_manager.shutdown_kernel(kernel_id, now=True)


async def lag_while(work: Any) -> list[float]:
    """How late a 10 ms ticker wakes while ``work`` (a coroutine) runs."""
    lags: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        while not done.is_set():
            before = time.perf_counter()
            await asyncio.sleep(TICK)
            lags.append(time.perf_counter() - before - TICK)

    ticking = asyncio.ensure_future(ticker())
    try:
        await work
    finally:
        done.set()
        await ticking
    return lags


async def concurrent_runs(app: Any, kernels: list[str]) -> None:
    """One run per kernel, all at once, each of ``steps`` instant steps (see start_server)."""
    tab = ScriptedTab(
        app.connection_url, app.identity_provider.token, instant=True, keep_tokens=False
    )
    for index, kernel_id in enumerate(kernels):
        tab.open_notebook(f"n{index}.ipynb", kernel_id)
    await tab.connect()
    try:
        replies = await asyncio.gather(
            *(tab.request(_start(f"n{i}.ipynb", k)) for i, k in enumerate(kernels))
        )
        for reply in replies:
            await tab.wait_for_event(lambda e: e["type"] == "finished", reply["run_id"], 900)
    finally:
        await tab.close()


def _start(path: str, kernel_id: str) -> dict[str, Any]:
    return {
        "request": "start_run",
        "notebook_path": path,
        "kernel_id": kernel_id,
        "prompt": "count",
        "options": {},
        "anchor_cell_id": None,
        "handoff_nonce": None,
        "origin": "panel",
    }


def _ms(values: list[float], q: float = 0.5) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def main(steps: int, runs: int) -> None:
    """Measure and print."""
    # What the server extension sets when it loads (here the baseline imports litellm first).
    litellm_model.FREEZE_AFTER_IMPORT = True
    await import_litellm()
    with ScriptedModelServer([Reply.code("x = 1", times=None)]) as model:
        base = await baseline(model.base_url, steps)
        with tempfile.TemporaryDirectory() as tmp:
            app = await start_server(Path(tmp), model.base_url, steps)
            try:
                await server_steps(app, 5)  # warm up
                over_ws = await server_steps(app, steps)
                kernels = [
                    await app.kernel_manager.start_kernel(kernel_name="python3")
                    for _ in range(runs)
                ]
                idle = await lag_while(asyncio.sleep(3))
                busy = await lag_while(concurrent_runs(app, kernels))
                for kernel_id in kernels:
                    await app.kernel_manager.shutdown_kernel(kernel_id, now=True)
            finally:
                await app._cleanup()
    base_ms, ws_ms = statistics.median(base) * 1000, statistics.median(over_ws) * 1000
    print(f"steps: {len(over_ws)} measured over the websocket, {len(base)} in the baseline")
    print(f"baseline, loop + instant in-memory workspace: median {base_ms:.1f} ms per step")
    print(
        f"server path, loop + run manager + websocket + instant tab: median {ws_ms:.1f} ms, "
        f"p90 {_ms(over_ws, 0.9):.1f} ms per step"
    )
    print(
        f"the server path adds {ws_ms - base_ms:.1f} ms per step "
        f"(ratio {ws_ms / base_ms:.2f}x the baseline)"
    )
    print(
        f"event-loop lag, idle: median {_ms(idle):.2f} ms, p99 {_ms(idle, 0.99):.2f} ms, "
        f"max {max(idle) * 1000:.1f} ms"
    )
    print(
        f"event-loop lag, {runs} runs at once: median {_ms(busy):.2f} ms, "
        f"p99 {_ms(busy, 0.99):.2f} ms, max {max(busy) * 1000:.1f} ms ({len(busy)} ticks)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--runs", type=int, default=20)
    options = parser.parse_args()
    asyncio.run(main(options.steps, options.runs))
