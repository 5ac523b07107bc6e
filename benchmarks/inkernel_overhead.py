"""The in-kernel loop's own cost per step (``%%ci`` without a frontend), against a plain cell.

A real ipykernel (started with jupyter_client) runs the in-kernel loop the way ``%%ci`` does
(worker thread, main-thread bridge, output capture, a progress view), against a scripted
OpenAI-compatible server that answers instantly with a trivial cell (``x = 1``), for ``--steps``
steps. For each step, the loop's overhead is the wall time of the step (from one cell's end to
the next's) minus the kernel's execution time of the cell; measured with the text view and with
the widget view. The baseline, in the same process and kernel: ``x = 1`` sent directly as a
cell from the client, send to idle.

    python -m benchmarks.inkernel_overhead [--steps 60]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from jupyter_client.manager import start_new_kernel

from jupyter_ci.testing import Reply, ScriptedModelServer

KERNEL_SETUP = r"""
import json, time
from jupyter_ci.agent.loop import RunRequest
from jupyter_ci.models.litellm_model import LiteLLMModel
from jupyter_ci.settings import Settings
from jupyter_ci.workspaces.inkernel import run_in_kernel

def _bench(api_base, steps, progress):
    finished = []

    def listen(event):
        if event["type"] == "execution_finished":
            finished.append((time.perf_counter(), event["duration"] or 0.0))

    settings = Settings(
        model="openai/scripted", api_base=api_base, max_steps=steps + 1,
        max_tokens_per_run=0, max_cost_per_run=0, context_tokens=4000,
    )
    model = LiteLLMModel(settings, api_key="bench")
    request = RunRequest("count", settings)
    started = time.perf_counter()
    result = run_in_kernel(get_ipython(), request, model, progress=progress, listener=listen)
    total = time.perf_counter() - started
    assert result.outcome is not None and result.outcome.reason == "max_steps", result
    overheads = [(end - before) - took for (before, _), (end, took) in zip(finished, finished[1:])]
    durations = [took for _, took in finished]
    return {"overheads": overheads, "durations": durations, "total": total}
"""


def execute(kc: Any, code: str, timeout: float = 600) -> tuple[str, float]:
    """Run ``code`` as a cell; its stdout and the seconds from send to idle."""
    started = time.perf_counter()
    msg_id = kc.execute(code)
    text = ""
    deadline = time.monotonic() + timeout
    while True:
        msg = kc.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream":
            text += content["text"]
        elif kind == "error":
            raise RuntimeError("\n".join(content["traceback"]))
        elif kind == "status" and content["execution_state"] == "idle":
            return text, time.perf_counter() - started


def loop_run(kc: Any, api_base: str, steps: int, progress: str) -> dict[str, Any]:
    """One in-kernel run of ``steps`` + 1 model calls; the kernel's measurements."""
    out, _ = execute(kc, f"print(json.dumps(_bench({api_base!r}, {steps}, {progress!r})))")
    last = [line for line in out.splitlines() if line.startswith("{")][-1]
    result: dict[str, Any] = json.loads(last)
    return result


def p90(values: list[float]) -> float:
    """The 90th percentile (nearest rank)."""
    return sorted(values)[int(len(values) * 0.9)]


def main(steps: int) -> None:
    """Measure and print."""
    km, kc = start_new_kernel(kernel_name="python3")
    try:
        with ScriptedModelServer([Reply.code("x = 1", times=None)]) as server:
            execute(kc, KERNEL_SETUP)
            loop_run(kc, server.base_url, 2, "text")  # imports litellm and ipywidgets: not a step
            loop_run(kc, server.base_url, 2, "widgets")
            for _ in range(5):
                execute(kc, "x = 1")
            base = [execute(kc, "x = 1")[1] for _ in range(steps)]
            runs = {
                view: loop_run(kc, server.base_url, steps, view) for view in ("text", "widgets")
            }
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    base_ms = statistics.median(base) * 1000
    kernel_ms = statistics.median(runs["text"]["durations"]) * 1000
    print(f"steps: {len(runs['text']['overheads'])} measured per view (after the first)")
    print(
        f"baseline, `x = 1` sent as a cell from the client (send to idle): median {base_ms:.1f} ms"
    )
    print(f"kernel execution of the generated `x = 1` inside the loop: median {kernel_ms:.2f} ms")
    for view, run in runs.items():
        overheads = run["overheads"]
        median_ms = statistics.median(overheads) * 1000
        print(
            f"in-kernel loop overhead per step, {view} view: median {median_ms:.1f} ms, "
            f"p90 {p90(overheads) * 1000:.1f} ms; whole run {run['total']:.2f} s for "
            f"{steps + 1} model calls"
        )
        print(f"  ratio: loop overhead / a cell sent directly = {median_ms / base_ms:.1f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    main(parser.parse_args().steps)
