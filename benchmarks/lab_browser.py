"""The Lab path in a real browser: cost per step, token-to-cell delay, Stop latency.

A real ``jupyter lab`` with jupyter-ci, headless Chromium with the built labextension, a real
kernel, and the scripted model (answers at once unless told to pace its tokens). Everything runs
on this machine, so the browser's, the server's, the kernel's and the model server's clocks are
the same clock.

1. **Cost per step** of a ``%%ci --max-steps N`` run whose every step is ``x = 1``: the time
   between consecutive ``execution_finished`` events (server clock), minus the kernel's own time
   for the cell (execute_input to execute_reply, from the kernel's message dates, measured in the
   browser) and minus the model's time (the scripted server's request to its reply's end). What
   is left is the Lab path's own cost per step: the websocket round trips of insert, append and
   run, the browser's work on them, the loop and the run manager. The browser's own share (call
   received to answer sent, minus the kernel) is shown too, and how many React renders the page
   committed per step (a count, steady however loaded the machine is).
2. **Token to cell**: the model streams a cell of numbered lines, one token every 50 ms; for each
   line, the delay from the chunk that completed it leaving the scripted server to the line
   appearing in the cell's editor in the page (a MutationObserver on the DOM).
3. **Stop latency**: a generated cell loops on ``time.sleep(0.1)``; the user clicks Stop in the
   ``%%ci`` cell's status output. From the click to the kernel raising KeyboardInterrupt (the
   date of its error message), and from the click to the run's ``finished`` event.

    python -m benchmarks.lab_browser [--steps 40] [--stops 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

from jupyter_ci.testing import Reply, ScriptedModelServer
from jupyter_ci.testing import handler as scripted_handler
from tests.browser.lab import Lab, launch_chromium, start_lab
from tests.browser.notebooks import (
    cells,
    command,
    open_lab_app,
    open_notebook,
    panel,
    run_all,
    run_cell,
    status_of,
    text_of,
    wait_for_status,
    wait_until,
    write_notebook,
)

TERMINAL = ("done", "failed", "stopped", "refused", "reused", "unavailable")
LONG_CELL = "import time\nprint('started', flush=True)\nfor _ in range(600):\n    time.sleep(0.1)"
TOKEN_DELAY = 0.05
#: Counts React's commits in the page (the hook React reports each commit to when one is present).
COUNT_REACT_COMMITS = """
window.__reactCommits = 0;
window.__REACT_DEVTOOLS_GLOBAL_HOOK__ = {
  supportsFiber: true, renderers: new Map(), isDisabled: false, checkDCE() {},
  inject(renderer) {
    const id = this.renderers.size + 1;
    this.renderers.set(id, renderer);
    return id;
  },
  onCommitFiberRoot() { window.__reactCommits++; }, onCommitFiberUnmount() {},
  onPostCommitFiberRoot() {}, onScheduleFiberRoot() {}, setStrictMode() {}
};
"""


class ChunkClock:
    """Records when each streamed chunk left the scripted model server (epoch seconds)."""

    def __init__(self) -> None:
        self.sent: list[tuple[float, str]] = []
        self._original = scripted_handler.ScriptedHandler._send_event

    def __enter__(self) -> ChunkClock:
        original = self._original
        sent = self.sent

        def send_event(handler: Any, record: Any, data: Mapping[str, Any] | str) -> None:
            original(handler, record, data)
            sent.append((time.time(), _delta_text(data)))

        setattr(scripted_handler.ScriptedHandler, "_send_event", send_event)  # noqa: B010
        return self

    def __exit__(self, *exc: object) -> None:
        setattr(scripted_handler.ScriptedHandler, "_send_event", self._original)  # noqa: B010


def _delta_text(data: Mapping[str, Any] | str) -> str:
    if not isinstance(data, Mapping):
        return ""
    choices = data.get("choices") or [{}]
    delta = choices[0].get("delta") or {}
    return str(delta.get("content") or "")


class Frames:
    """Every message the server sent on the page's jupyter-ci websocket."""

    def __init__(self, page: Any) -> None:
        self.messages: list[dict[str, Any]] = []
        page.on("websocket", self._on_socket)

    def _on_socket(self, socket: Any) -> None:
        if socket.url.split("?")[0].endswith("/jupyter-ci/ws"):
            socket.on("framereceived", self._on_frame)

    def _on_frame(self, payload: str | bytes) -> None:
        if isinstance(payload, str):
            self.messages.append(json.loads(payload))

    def events(self, run_id: str, kind: str) -> list[dict[str, Any]]:
        """The run's events of one type, in order."""
        return [m for m in self.messages if m.get("run_id") == run_id and m.get("type") == kind]


def describe(values: Sequence[float], unit: str = "ms") -> str:
    """Median, p90 and count of values in milliseconds."""
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]
    return (
        f"median {statistics.median(ordered):.1f} {unit}, p90 {p90:.1f} {unit} (n={len(ordered)})"
    )


def cost_per_step(
    page: Any, lab: Lab, model: ScriptedModelServer, frames: Frames, steps: int
) -> None:
    """Figure 1: the Lab path's own cost per step."""
    model.reset([Reply.code("x = 1", times=None)])
    path = write_notebook(
        lab, ["%load_ext jupyter_ci", f"%%ci --max-steps {steps + 1} set x to 1, again"]
    )
    open_notebook(page, path)
    command(page, "jupyter-ci:call-timings", {"clear": True})
    commits_before = page.evaluate("window.__reactCommits")
    run_all(page, path)
    status = wait_for_status(page, path, 1, TERMINAL, timeout=600)
    commits = page.evaluate("window.__reactCommits") - commits_before
    assert status["state"] == "done", status
    run_id = status["run_id"]
    finished = [e["time"] for e in frames.events(run_id, "execution_finished")]
    timings = [t for t in command(page, "jupyter-ci:call-timings") if t["runId"] == run_id]
    runs = [t for t in timings if t["method"] == "run_cell"]
    requests = model.chat_requests
    assert len(finished) == len(runs) == steps + 1, (len(finished), len(runs))
    costs, kernel = [], []
    for step in range(1, len(finished)):
        model_s = (requests[step].finished_at or requests[step].time) - requests[step].time
        kernel_s = runs[step]["kernelSeconds"] or 0.0
        costs.append((finished[step] - finished[step - 1] - model_s - kernel_s) * 1000)
        kernel.append(kernel_s * 1000)
    # The browser's share: each call's time in the page, minus the kernel, summed per step
    # (a step's calls are those up to and including its run_cell).
    by_step = [0.0] * (steps + 1)
    step = 0
    for timing in timings:
        spent = timing["answered"] - timing["received"] - (timing["kernelSeconds"] or 0) * 1000
        by_step[min(step, steps)] += spent
        if timing["method"] == "run_cell":
            step += 1
    browser = by_step[1:]
    calls_per_step = len(timings) / (steps + 1)
    print(f"1. cost per step ({steps} steps after the first, `x = 1`):")
    print(f"   step wall time minus kernel and model time: {describe(costs)}")
    rest = [cost - share for cost, share in zip(costs, browser, strict=True)]
    print(f"   of which in the browser (call in to answer out, minus kernel): {describe(browser)}")
    print(f"   the rest (server: loop, model client, run manager; websocket): {describe(rest)}")
    print(f"   kernel time of the cell: {describe(kernel)}; calls per step: {calls_per_step:.1f}")
    print(
        f"   React renders committed in the page per step: {commits / (steps + 1):.1f} "
        "(JupyterLab's toolbars and status bar, and jupyter-ci's panel and status outputs)"
    )


def token_delay(page: Any, lab: Lab, model: ScriptedModelServer) -> None:
    """Figure 2: from a chunk leaving the scripted server to its line appearing in the cell."""
    lines = [f"v{i:02d} = {i}" for i in range(24)]
    model.reset([Reply.code("\n".join(lines), delay=TOKEN_DELAY), Reply.text("Set.")])
    path = write_notebook(lab, ["%load_ext jupyter_ci", "%%ci set 24 variables"])
    open_notebook(page, path)
    page.evaluate(
        """(lines) => {
  window.__ciSeen = {};
  const check = () => {
    const now = performance.timeOrigin + performance.now();
    for (const el of document.querySelectorAll('.jp-jupyter-ci-generated .cm-content')) {
      const text = el.textContent;
      for (const line of lines) {
        if (!(line in window.__ciSeen) && text.includes(line)) { window.__ciSeen[line] = now; }
      }
    }
  };
  new MutationObserver(check).observe(document.body,
    {subtree: true, childList: true, characterData: true});
}""",
        lines,
    )
    with ChunkClock() as clock:
        run_all(page, path)
        status = wait_for_status(page, path, 1, TERMINAL, timeout=120)
    assert status["state"] == "done", status
    seen: dict[str, float] = page.evaluate("() => window.__ciSeen")
    content = ""
    sent_at: dict[str, float] = {}
    for when, text in clock.sent:
        content += text
        for line in lines:
            # Each line ends with a newline (the last one too: the fence closes after it).
            if line not in sent_at and f"{line}\n" in content:
                sent_at[line] = when
    delays = [
        seen[line] - sent_at[line] * 1000 for line in lines if line in seen and line in sent_at
    ]
    print(
        f"2. token to cell ({TOKEN_DELAY * 1000:.0f} ms between tokens, streaming interval "
        "50 ms by default):"
    )
    print(f"   chunk leaves the model server -> its line shows in the cell: {describe(delays)}")


def stop_latency(
    page: Any, lab: Lab, model: ScriptedModelServer, frames: Frames, stops: int
) -> None:
    """Figure 3: from a click on Stop to the kernel's KeyboardInterrupt and the run's end."""
    model.reset([Reply.code(LONG_CELL, times=None)])
    path = write_notebook(
        lab, ["%load_ext jupyter_ci", *(f"%%ci wait, please ({i})" for i in range(stops))]
    )
    open_notebook(page, path)
    page.evaluate(
        """(path) => {
  window.__ciClicks = [];
  window.__ciInterrupts = [];
  document.addEventListener('click', event => {
    if (event.target.closest('[data-testid="jupyter-ci-stop"]')) {
      window.__ciClicks.push(performance.timeOrigin + performance.now());
    }
  }, true);
  for (const widget of window.jupyterapp.shell.widgets('main')) {
    if (widget.context && widget.context.path === path) {
      widget.sessionContext.session.kernel.iopubMessage.connect((kernel, msg) => {
        if (msg.header.msg_type === 'error' && msg.content.ename === 'KeyboardInterrupt') {
          window.__ciInterrupts.push(msg.header.date);
        }
      });
    }
  }
}""",
        path,
    )
    run_cell(page, path, 0)  # %load_ext jupyter_ci
    to_kernel, to_finished = [], []
    for number in range(stops):
        run_cell(page, path, _cell_index(page, path, number))
        magic = _magic_cell(page, path, number)
        wait_until(partial(_started, page, path, magic), 120, "the long cell to start")
        magic_node = (
            panel(page, path).locator(".jp-Notebook .jp-Cell").nth(_index_of(page, path, magic))
        )
        magic_node.locator('[data-testid="jupyter-ci-stop"]').click()
        wait_until(partial(_ended, page, path, magic), 60, "the run to stop")
        status = status_of(_find(page, path, magic)) or {}
        assert status.get("state") == "stopped", status
        click = page.evaluate("() => window.__ciClicks")[-1]
        interrupted = page.evaluate("() => window.__ciInterrupts")[-1]
        kernel_time = datetime.fromisoformat(interrupted.replace("Z", "+00:00")).timestamp()
        to_kernel.append(kernel_time * 1000 - click)
        finished = frames.events(str(status["run_id"]), "finished")[-1]["time"]
        to_finished.append(finished * 1000 - click)
    print(f"3. Stop latency ({stops} runs, a cell looping on time.sleep(0.1)):")
    print(f"   click -> kernel raises KeyboardInterrupt: {describe(to_kernel)}")
    print(f"   click -> the run's finished event: {describe(to_finished)}")


def _cell_index(page: Any, path: str, number: int) -> int:
    """The index of the ``number``-th %%ci cell now (generated cells sit between them)."""
    magics = [i for i, c in enumerate(cells(page, path)) if c["source"].startswith("%%ci")]
    return magics[number]


def _magic_cell(page: Any, path: str, number: int) -> str:
    return str(cells(page, path)[_cell_index(page, path, number)]["id"])


def _find(page: Any, path: str, cell_id: str) -> dict[str, Any]:
    return next(c for c in cells(page, path) if c["id"] == cell_id)


def _index_of(page: Any, path: str, cell_id: str) -> int:
    return next(i for i, c in enumerate(cells(page, path)) if c["id"] == cell_id)


def _ended(page: Any, path: str, magic: str) -> bool:
    return (status_of(_find(page, path, magic)) or {}).get("state") in TERMINAL


def _started(page: Any, path: str, magic: str) -> bool:
    for cell in cells(page, path):
        hint = cell["metadata"].get("jupyter_ci") or {}
        if hint.get("origin_cell_id") == magic and "started" in text_of(cell["outputs"]):
            return True
    return False


def main(steps: int, stops: int) -> None:
    """Measure and print."""
    from playwright.sync_api import sync_playwright

    with (
        ScriptedModelServer([]) as model,
        tempfile.TemporaryDirectory() as tmp,
        start_lab(
            Path(tmp),
            args=[
                "--JupyterCI.model=openai/scripted",
                f"--JupyterCI.api_base={model.base_url}",
                f"--JupyterCI.db_path={Path(tmp) / 'conversations.sqlite'}",
                "--LabApp.expose_app_in_browser=True",
            ],
            env={"JUPYTER_CI_API_KEY": "sk-bench-0123456789abcdef"},
        ) as lab,
        sync_playwright() as playwright,
    ):
        browser = launch_chromium(playwright)
        page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        page.add_init_script(COUNT_REACT_COMMITS)
        frames = Frames(page)
        open_lab_app(page, lab)
        cost_per_step(page, lab, model, frames, steps)
        token_delay(page, lab, model)
        stop_latency(page, lab, model, frames, stops)
        browser.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40, help="steps of the cost run (>= 30)")
    parser.add_argument("--stops", type=int, default=5, help="runs stopped for the Stop latency")
    arguments = parser.parse_args()
    main(arguments.steps, arguments.stops)
