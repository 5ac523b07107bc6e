"""What MCP adds to running a cell: one ``run_cell`` of ``x = 1`` over MCP, minus the kernel's time,
against nbclient executing the same cell directly, in the same run; headless and in JupyterLab.

1. **Direct**: nbclient's ``NotebookClient`` runs ``x = 1`` in a kernel of its own, ``--calls``
   times: the wall time of each execution, and the kernel's own time for it (its
   ``execute_input`` to its ``execute_reply``, from the kernel's message dates, which nbclient
   records in the cell's metadata).
2. **Headless**: a real ``jupyter lab`` with jupyter-ci; the MCP SDK's own client (Streamable HTTP,
   the server's token, on its own event loop) calls ``run_cell`` on a notebook no tab has open:
   the server's kernel for it, the file read and written through the contents manager, the call
   recorded as a run. The wall time of each call, as the client sees it. The kernel's time is
   the direct path's (the same cell in the same kind of kernel).
3. **JupyterLab**: the same calls on a notebook open in that Lab in headless Chromium: through the
   tab (the run manager's run, the tab runs the cell in the notebook's kernel and saves the
   notebook). The kernel's time is the tab's own measure for each call (execute_input to
   execute_reply).

Each path's wall time minus the kernel's time is its own cost; what MCP adds is that cost minus
the direct path's. Aim: at most 10 ms above direct headless, 50 ms in JupyterLab.

4. **Edits beside large outputs**: ``edit_cell`` on a notebook open in JupyterLab whose other
   cells hold ``HEAVY_CELLS`` outputs of ``HEAVY_BYTES`` each, against the same call on a notebook
   without outputs (the baseline); and ``read_notebook`` of the first, which reads the outputs
   through the tab as every edit did before it read sources only.

    python -m benchmarks.mcp_overhead [--calls 40]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import nbformat
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient

from tests.browser.lab import Lab, launch_chromium, start_lab
from tests.browser.mcp_agent import Agent
from tests.browser.notebooks import command, open_lab_app, open_notebook, write_notebook

CELL = "x = 1"
WARM_UP = 5
#: The heavy notebook's cells with outputs, and each one's output text (about the tab's cap on
#: the outputs of one reply in all, outputs.ts's MAX_OUTPUT_BYTES).
HEAVY_CELLS = 8
HEAVY_BYTES = 128 * 1024


def _kernel_seconds(metadata: Any) -> float:
    """The kernel's time for an execution nbclient recorded (execute_input to execute_reply)."""
    timing = metadata.get("execution", {})
    start = datetime.fromisoformat(str(timing["iopub.execute_input"]).replace("Z", "+00:00"))
    end = datetime.fromisoformat(str(timing["shell.execute_reply"]).replace("Z", "+00:00"))
    return (end - start).total_seconds()


async def direct(calls: int) -> tuple[list[float], list[float]]:
    """Wall and kernel seconds of ``x = 1`` executed by nbclient in a kernel of its own."""
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(CELL)]
    manager = AsyncKernelManager(kernel_name="python3")
    await manager.start_kernel()
    client = NotebookClient(notebook, km=manager, record_timing=True)
    client.kc = manager.client()
    client.kc.start_channels()
    await client.kc.wait_for_ready(timeout=60)
    walls, kernels = [], []
    try:
        for index in range(calls + WARM_UP):
            cell = notebook.cells[0]
            start = time.perf_counter()
            await client.async_execute_cell(cell, 0)
            wall = time.perf_counter() - start
            if index >= WARM_UP:
                walls.append(wall)
                kernels.append(_kernel_seconds(cell.metadata))
    finally:
        client.kc.stop_channels()
        await manager.shutdown_kernel(now=True)
    return walls, kernels


def over_mcp(agent: Agent, path: str, cell_id: str, calls: int) -> list[float]:
    """Wall seconds of ``run_cell`` calls, as the client sees them."""
    walls = []
    for index in range(calls + WARM_UP):
        start = time.perf_counter()
        result = agent.result("run_cell", {"path": path, "cell_id": cell_id})
        wall = time.perf_counter() - start
        assert result["status"] == "ok", result
        if index >= WARM_UP:
            walls.append(wall)
    return walls


def lab_kernel_seconds(page: Any) -> list[float]:
    """The kernel's time of each run_cell the tab answered (its own measure)."""
    timings = command(page, "jupyter-ci:call-timings")
    return [t["kernelSeconds"] for t in timings if t["method"] == "run_cell"][WARM_UP:]


def ms(values: list[float], q: float = 0.5) -> float:
    """A quantile of seconds, in milliseconds."""
    ordered = sorted(values)
    if q == 0.5:
        return statistics.median(ordered) * 1000
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def report(name: str, walls: list[float], kernel_ms: float, direct_cost: float) -> float:
    """Print one path's figures; its own cost (median wall minus kernel, ms)."""
    cost = ms(walls) - kernel_ms
    line = f"{name}: wall median {ms(walls):.1f} ms, p90 {ms(walls, 0.9):.1f} ms (n={len(walls)})"
    print(line + f"; minus the kernel's {kernel_ms:.2f} ms: {cost:.1f} ms")
    if direct_cost:
        print(
            f"   MCP adds {cost - direct_cost:.1f} ms over the direct path "
            f"(wall ratio {ms(walls) / (direct_cost + kernel_ms):.1f}x)"
        )
    return cost


def main(calls: int) -> None:
    """Measure and print."""
    from playwright.sync_api import sync_playwright

    walls, kernels = asyncio.run(direct(calls))
    kernel_ms = ms(kernels)
    with (
        tempfile.TemporaryDirectory() as tmp,
        start_lab(Path(tmp), args=["--LabApp.expose_app_in_browser=True"]) as lab,
    ):
        headless_path = write_notebook(lab, [CELL], name="headless.ipynb")
        live_path = write_notebook(lab, [CELL], name="live.ipynb")
        headless_id = nbformat.read(str(Path(lab.root_dir) / headless_path), 4).cells[0].id
        agent = Agent(lab, "bench")
        agent.start()
        try:
            headless = over_mcp(agent, headless_path, headless_id, calls)
            with sync_playwright() as playwright:
                browser = launch_chromium(playwright)
                try:
                    live, live_kernel = in_lab(browser, lab, agent, live_path, calls)
                    edits = edits_in_lab(browser, lab, agent, calls)
                finally:
                    browser.close()
        finally:
            agent.close()
    print(f"run_cell of `{CELL}`, {calls} calls each after {WARM_UP} to warm up")
    direct_cost = report("direct (nbclient)", walls, kernel_ms, 0.0)
    report("headless over MCP", headless, kernel_ms, direct_cost)
    report("JupyterLab over MCP", live, ms(live_kernel), direct_cost)
    light, heavy, reads = edits
    size = HEAVY_CELLS * HEAVY_BYTES // 1024
    print(f"in JupyterLab, beside {HEAVY_CELLS} outputs of {HEAVY_BYTES // 1024} KiB ({size} KiB)")
    print(f"edit_cell, no outputs in the notebook: median {ms(light):.1f} ms (n={len(light)})")
    print(
        f"edit_cell, beside the outputs: median {ms(heavy):.1f} ms "
        f"({ms(heavy) / ms(light):.2f}x the baseline)"
    )
    print(
        f"read_notebook of the outputs (what each edit also read before): median "
        f"{ms(reads):.1f} ms ({ms(reads) / ms(light):.2f}x the baseline edit)"
    )


def write_heavy(lab: Lab) -> str:
    """A notebook of ``HEAVY_CELLS`` cells with large stream outputs, then ``CELL``."""
    notebook = nbformat.v4.new_notebook()
    text = ("0123456789abcdef" * (HEAVY_BYTES // 16 // 64) + "\n") * 64
    for index in range(HEAVY_CELLS):
        cell = nbformat.v4.new_code_cell(f"print(big_{index})", execution_count=index + 1)
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
        notebook.cells.append(cell)
    notebook.cells.append(nbformat.v4.new_code_cell(CELL))
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nbformat.write(notebook, str(Path(lab.root_dir) / "heavy.ipynb"))
    return "heavy.ipynb"


def edits_in_lab(browser: Any, lab: Lab, agent: Agent, calls: int) -> tuple[Any, Any, Any]:
    """``edit_cell`` walls on a notebook without outputs and on one beside large outputs, and
    ``read_notebook`` walls of the latter: both open in one page."""
    light_path = write_notebook(lab, [CELL], name="light.ipynb")
    heavy_path = write_heavy(lab)
    page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
    open_lab_app(page, lab)
    ids = {}
    for path in (light_path, heavy_path):
        open_notebook(page, path)
        wait_open(agent, path)
        ids[path] = page.evaluate(
            "(path) => { const cells = Array.from(window.jupyterapp.shell.widgets('main'))"
            ".find(w => w.context && w.context.path === path).content.model.cells;"
            " return cells.get(cells.length - 1).id; }",
            path,
        )

    def walls(tool: str, path: str, arguments: dict[str, Any]) -> list[float]:
        found = []
        for index in range(calls + WARM_UP):
            start = time.perf_counter()
            agent.result(tool, {"path": path, **arguments})
            if index >= WARM_UP:
                found.append(time.perf_counter() - start)
        return found

    def edit(path: str) -> list[float]:
        return walls("edit_cell", path, {"cell_id": ids[path], "source": CELL})

    return edit(light_path), edit(heavy_path), walls("read_notebook", heavy_path, {})


def wait_open(agent: Agent, path: str) -> None:
    """Until the server knows the tab has the notebook open (the calls go through it)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        listing = agent.result("list_notebooks", {})
        if any(n["path"] == path and n["open_in_lab"] for n in listing["notebooks"]):
            return
    raise TimeoutError(f"the server did not see {path} open in the tab")


def in_lab(browser: Any, lab: Lab, agent: Agent, path: str, calls: int) -> tuple[Any, Any]:
    """The calls on a notebook open in the page; their walls and the tab's kernel times."""
    page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
    open_lab_app(page, lab)
    open_notebook(page, path)
    wait_open(agent, path)
    cell_id = page.evaluate(
        "(path) => Array.from(window.jupyterapp.shell.widgets('main'))"
        ".find(w => w.context && w.context.path === path).content.model.cells.get(0).id",
        path,
    )
    command(page, "jupyter-ci:call-timings", {"clear": True})
    walls = over_mcp(agent, path, cell_id, calls)
    return walls, lab_kernel_seconds(page)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=40)
    main(parser.parse_args().calls)
