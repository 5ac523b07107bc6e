"""The agent loop's own cost per step, against the bare workspace in the same process.

A scripted OpenAI-compatible server answers instantly with a trivial cell (``x = 1``); the loop
runs ``--steps`` steps in a real kernel. For each step, the loop's overhead is the wall time of
the step (from one cell's end to the next's) minus the kernel's execution time of the cell. The
baseline inserts and runs the same cell through the workspace directly, without model or loop.

    python -m benchmarks.loop_overhead [--steps 60]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from jupyter_ci.agent.loop import AgentRun, RunRequest
from jupyter_ci.models.litellm_model import LiteLLMModel, import_litellm
from jupyter_ci.settings import Settings
from jupyter_ci.testing import Reply, ScriptedModelServer
from jupyter_ci.workspaces.kernel import KernelWorkspace


async def baseline(workspace: KernelWorkspace, steps: int) -> list[float]:
    """Wall time of insert + run of ``x = 1`` through the workspace alone."""
    times = []
    after = None
    for _ in range(steps):
        started = time.perf_counter()
        after = await workspace.insert_cell(after, "x = 1")
        await workspace.run_cell(after, 0)
        times.append(time.perf_counter() - started)
    return times


async def loop_steps(workspace: KernelWorkspace, steps: int) -> tuple[list[float], float]:
    """Per-step overheads of the loop, and the whole run's wall time."""
    finished: list[tuple[float, float]] = []

    def on_event(event: dict[str, Any]) -> None:
        if event["type"] == "execution_finished":
            finished.append((time.perf_counter(), event["duration"] or 0.0))

    with ScriptedModelServer([Reply.code("x = 1", times=None)]) as server:
        settings = Settings(
            model="openai/scripted",
            api_base=server.base_url,
            max_steps=steps + 1,
            max_tokens_per_run=0,
            max_cost_per_run=0,
            context_tokens=4000,
        )
        model = LiteLLMModel(settings, api_key="bench")
        run = AgentRun(RunRequest("count", settings), workspace, model, on_event=on_event)
        started = time.perf_counter()
        outcome = await run.run()
        total = time.perf_counter() - started
    assert outcome.reason == "max_steps", outcome.error
    overheads = [
        (end - previous_end) - duration
        for (previous_end, _), (end, duration) in itertools.pairwise(finished)
    ]
    return overheads, total


async def main(steps: int) -> None:
    """Measure and print."""
    await import_litellm()  # its import (seconds) is not the loop's per-step cost
    with tempfile.TemporaryDirectory() as tmp:
        async with await KernelWorkspace.open(Path(tmp) / "bench.ipynb") as workspace:
            await baseline(workspace, 5)  # warm up the kernel
            base = await baseline(workspace, steps)
            overheads, total = await loop_steps(workspace, steps)
    base_ms = statistics.median(base) * 1000
    loop_ms = statistics.median(overheads) * 1000
    p90 = sorted(overheads)[int(len(overheads) * 0.9)] * 1000
    print(f"steps: {len(overheads)} measured (after the first)")
    print(f"baseline, workspace insert + run of `x = 1`: median {base_ms:.1f} ms")
    print(f"loop overhead per step (step wall time minus kernel time): median {loop_ms:.1f} ms,")
    print(f"  p90 {p90:.1f} ms; whole run {total:.2f} s for {steps + 1} model calls")
    print(f"ratio: loop overhead / bare workspace cell = {loop_ms / base_ms:.1f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    asyncio.run(main(parser.parse_args().steps))
