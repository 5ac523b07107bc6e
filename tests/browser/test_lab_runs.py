"""Runs in real JupyterLab while the user does other things: switching tabs, a second tab on the
same notebook, Stop during a long cell, closing the notebook mid-run.

Every call of a run names its notebook and cells, so none of this may move the run's cells
elsewhere or lose them.
"""

from __future__ import annotations

import importlib.util
import json
import re
from typing import Any

from jupyter_ci.agent.cells import UNFINISHED_NOTE
from jupyter_ci.testing import Reply, ScriptedModelServer

from .lab import Lab
from .notebooks import (
    TERMINAL,
    activate,
    cells,
    close_notebook,
    command,
    dump,
    generated,
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

#: jupyter-collaboration is installed (the Lab then shares one document between its tabs).
REAL_TIME_COLLABORATION = importlib.util.find_spec("jupyter_server_ydoc") is not None

#: A cell that says when it has begun, then runs for up to 30 s (unless interrupted).
LONG_CELL = "import time\nprint('started', flush=True)\nfor _ in range(300):\n    time.sleep(0.1)"


def wait_for_output(page: Any, path: str, index: int, text: str, timeout: float = 90) -> None:
    """Wait until cell ``index`` of the notebook shows ``text`` in its outputs."""

    def check() -> bool:
        found = cells(page, path)
        return len(found) > index and text in text_of(found[index]["outputs"])

    wait_until(check, timeout, f"cell {index} of {path} to show {text!r}")


def test_switching_tabs_during_a_run_changes_nothing(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    code = (
        "import time\ntotal = 0\nfor i in range(4):\n    total += i\n"
        "time.sleep(2)\nprint('total', total)"
    )
    model.set_script([Reply.code(code, delay=0.12), Reply.text("The total is 6.")])
    a = write_notebook(model_lab, ["%load_ext jupyter_ci", "%%ci add up 0 to 3"])
    b = write_notebook(model_lab, ["other = 'b'"])
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, b)
    open_notebook(page, a)

    run_all(page, a)
    # Code streams into the new cell, which is read-only meanwhile.
    streaming = panel(page, a).locator(".jp-Cell.jp-jupyter-ci-streaming")
    streaming.first.wait_for(state="visible", timeout=60_000)
    assert streaming.first.locator(".cm-content").get_attribute("aria-readonly") == "true"
    # The user switches to the other notebook mid-run: the run goes on in its own notebook.
    activate(page, b)
    assert status_of(cells(page, a)[1])["state"] not in TERMINAL
    status = wait_for_status(page, a, 1, TERMINAL)
    assert status["state"] == "done", dump(page, a)
    in_a = cells(page, a)
    assert len(in_a) == 3, dump(page, a)
    assert in_a[2]["source"] == code
    assert [c["id"] for c in generated(in_a)] == [in_a[2]["id"]]
    assert "total 6" in text_of(in_a[2]["outputs"])
    in_b = cells(page, b)
    assert [c["source"] for c in in_b] == ["other = 'b'"]
    assert generated(in_b) == []
    # Back in the notebook, the generated cell is editable again.
    activate(page, a)
    editor = panel(page, a).locator(".jp-Notebook .jp-Cell").nth(2).locator(".cm-content")
    assert editor.get_attribute("aria-readonly") != "true"
    assert model_context.jupyter_ci_errors == []


def test_two_tabs_on_the_same_notebook(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    code = "import time\ntime.sleep(3)\nprint('slept')"
    model.set_script([Reply.code(code), Reply.text("It slept.")])
    path = write_notebook(model_lab, ["%load_ext jupyter_ci", "%%ci sleep a little"])
    first = model_context.new_page()
    open_lab_app(first, model_lab)
    open_notebook(first, path)
    second = model_context.new_page()
    open_lab_app(second, model_lab)
    open_notebook(second, path)

    run_all(first, path)
    elsewhere = second.locator('[data-testid="jupyter-ci-elsewhere"]')
    elsewhere.wait_for(state="visible", timeout=60_000)
    assert elsewhere.inner_text() == "jupyter-ci: a run is in progress in another tab"
    assert first.locator('[data-testid="jupyter-ci-elsewhere"]').is_hidden()
    status = wait_for_status(first, path, 1, TERMINAL)
    assert status["state"] == "done", dump(first, path)
    elsewhere.wait_for(state="hidden", timeout=30_000)
    # The run's cells went to the tab that ran the %%ci, once.
    in_first = cells(first, path)
    assert len(in_first) == 3
    assert [c["id"] for c in generated(in_first)] == [in_first[2]["id"]]
    assert "slept" in text_of(in_first[2]["outputs"])
    if REAL_TIME_COLLABORATION:
        # One shared document: the other tab shows the same cells, not a copy of its own.
        wait_until(
            lambda: [c["id"] for c in cells(second, path)] == [c["id"] for c in in_first],
            what="the other tab shows the shared cells",
            explain=lambda: dump(second, path),
        )
    else:
        # Each tab has its own copy: the other one is as it was.
        in_second = cells(second, path)
        assert len(in_second) == 2
        assert generated(in_second) == []
    assert len(model.chat_requests) == 2
    assert model_context.jupyter_ci_errors == []


def test_stop_during_a_long_cell(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    model.set_script([Reply.code(LONG_CELL), Reply.text("not asked: the user stopped")])
    path = write_notebook(model_lab, ["%load_ext jupyter_ci", "%%ci wait for a while"])
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)

    run_all(page, path)
    wait_for_output(page, path, 2, "started")
    stop = panel(page, path).locator('[data-testid="jupyter-ci-stop"]')
    # Offered while the cell runs (the status replaces the handoff's outputs once they are in).
    stop.wait_for(state="visible", timeout=30_000)
    assert stop.get_attribute("aria-label") == "Stop this jupyter-ci run"
    # Keyboard: focus the button and press Enter.
    stop.focus()
    page.keyboard.press("Enter")
    status = wait_for_status(page, path, 1, TERMINAL)
    assert status["state"] == "stopped", dump(page, path)
    assert status["reason"] == "user"
    assert status["text"].startswith("jupyter-ci: stopped by the user")
    errors = [o for o in cells(page, path)[2]["outputs"] if o["output_type"] == "error"]
    assert [e["ename"] for e in errors] == ["KeyboardInterrupt"]
    # Stopped, not fixed: the model was asked once.
    assert len(model.chat_requests) == 1
    assert stop.is_hidden()
    shown = panel(page, path).locator('[data-testid="jupyter-ci-status-output"]').inner_text()
    assert "stopped by the user" in shown
    assert model_context.jupyter_ci_errors == []


def test_stop_while_code_streams_leaves_the_cell_commented_out(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    code = "\n".join(f"value_{i} = {i}" for i in range(300))
    model.set_script([Reply.code(code, delay=0.05)])
    path = write_notebook(model_lab, ["%load_ext jupyter_ci", "%%ci count slowly"])
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)

    run_all(page, path)
    streaming = panel(page, path).locator(".jp-Cell.jp-jupyter-ci-streaming")
    streaming.first.wait_for(state="visible", timeout=60_000)
    wait_until(lambda: "value_1 = 1" in cells(page, path)[2]["source"], 30, "code to stream")
    panel(page, path).locator('[data-testid="jupyter-ci-stop"]').click()
    status = wait_for_status(page, path, 1, TERMINAL)
    assert (status["state"], status["reason"]) == ("stopped", "user"), dump(page, path)
    lines = cells(page, path)[2]["source"].splitlines()
    assert lines[0] == UNFINISHED_NOTE, dump(page, path)
    assert lines[1] == "# value_0 = 0"
    assert all(line.startswith("#") for line in lines)
    assert len(lines) < 301
    # No longer written to: editable, and it never ran.
    streaming.first.wait_for(state="detached", timeout=30_000)
    editor = panel(page, path).locator(".jp-Notebook .jp-Cell").nth(2).locator(".cm-content")
    assert editor.get_attribute("aria-readonly") != "true"
    assert cells(page, path)[2]["outputs"] == []
    assert model_context.jupyter_ci_errors == []


def test_a_request_the_kernel_ends_without_a_reply_ends_the_run_and_the_next_works(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    # The kernel cannot send this cell's reply (a payload that is not JSON): it goes idle without
    # one, as when an interrupt lands outside the cell's code. The tab must not wait for ever.
    unsendable = "get_ipython().payload_manager.write_payload({'source': 'x', 'data': object()})"
    model.set_script(
        [Reply.code(unsendable), Reply.code("print('next ran')"), Reply.text("It ran.")]
    )
    path = write_notebook(model_lab, ["%load_ext jupyter_ci", "%%ci first", "%%ci second"])
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)

    run_cell(page, path, 0)
    run_cell(page, path, 1)
    status = wait_for_status(page, path, 1, TERMINAL)
    # A cell that ends without the kernel's reply counts as stopped (nothing more to fix).
    assert status["state"] == "stopped", dump(page, path)
    assert len(model.chat_requests) == 1
    # The user's next request runs as usual in the same kernel.
    run_cell(page, path, 3)
    status = wait_for_status(page, path, 3, TERMINAL)
    assert status["state"] == "done", dump(page, path)
    assert "next ran" in text_of(cells(page, path)[4]["outputs"])
    assert model_context.jupyter_ci_errors == []


def test_closing_the_notebook_mid_run_ends_the_run(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    model.set_script([Reply.code(LONG_CELL), Reply.text("not asked: the notebook is gone")])
    path = write_notebook(model_lab, ["%load_ext jupyter_ci", "%%ci wait for a while"])
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)

    run_all(page, path)
    wait_for_output(page, path, 2, "started")
    close_notebook(page, path)
    # The run ends ("notebook unavailable") and the tab says so, since the cell that would show
    # it is gone.
    notice = page.get_by_text("notebook unavailable").first
    notice.wait_for(state="visible", timeout=60_000)
    assert path in notice.inner_text()
    assert len(model.chat_requests) == 1
    assert model_context.jupyter_ci_errors == []


def test_a_dropped_connection_resumes_without_running_anything_twice(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    code = (
        "import time\nprint('started', flush=True)\ntime.sleep(3)\n"
        "runs = globals().get('runs', 0) + 1\nprint('runs', runs)"
    )
    model.set_script([Reply.code(code), Reply.text("It ran once.")])
    path = write_notebook(model_lab, ["%load_ext jupyter_ci", "%%ci run once"])
    page = model_context.new_page()
    sockets: list[Any] = []
    calls: list[dict[str, Any]] = []

    def through_proxy(socket: Any) -> None:
        server = socket.connect_to_server()

        def to_page(message: str | bytes) -> None:
            parsed = json.loads(message)
            if "method" in parsed:
                calls.append(parsed)
            socket.send(message)

        server.on_message(to_page)
        sockets.append(socket)

    page.route_web_socket(re.compile(r".*/jupyter-ci/ws.*"), through_proxy)
    open_lab_app(page, model_lab)
    open_notebook(page, path)

    run_all(page, path)
    wait_for_output(page, path, 2, "started")
    # The network drops while the generated cell runs (its run_cell call is unanswered).
    sockets[-1].close(code=4000, reason="network dropped")

    def reconnected() -> bool:
        page.wait_for_timeout(100)  # lets Playwright run the route for the new socket
        return len(sockets) > 1

    wait_until(reconnected, 60, "the tab to reconnect")
    status = wait_for_status(page, path, 1, TERMINAL)
    assert status["state"] == "done", dump(page, path)
    # The server sent the unanswered call again after the reconnect; the tab answered it from
    # what it had, so the cell ran once, and the events it missed arrived (the status is done).
    run_calls = [c["call_id"] for c in calls if c["method"] == "run_cell"]
    assert len(run_calls) == 2
    assert len(set(run_calls)) == 1
    in_page = cells(page, path)
    assert len(in_page) == 3, dump(page, path)
    assert "runs 1" in text_of(in_page[2]["outputs"])
    assert "runs 2" not in text_of(in_page[2]["outputs"])
    assert len(model.chat_requests) == 2
    assert model_context.jupyter_ci_errors == []


def test_ask_command_answers_below_the_active_cell(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    model.set_script([Reply.code("answer = 6 * 7\nprint(answer)"), Reply.text("It is 42.")])
    path = write_notebook(model_lab, ["first = 1", "last = 2"])
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    anchor = cells(page, path)[0]["id"]

    reply = command(
        page, "jupyter-ci:ask", {"prompt": "what is six times seven", "anchor_cell_id": anchor}
    )
    assert "run_id" in reply, reply
    page.get_by_text("jupyter-ci: done").first.wait_for(state="visible", timeout=90_000)
    in_page = cells(page, path)
    assert [c["source"] for c in in_page] == [
        "first = 1",
        "answer = 6 * 7\nprint(answer)",
        "last = 2",
    ]
    assert in_page[1]["metadata"]["jupyter_ci"]["run_id"] == reply["run_id"]
    assert "42" in text_of(in_page[1]["outputs"])
    assert model_context.jupyter_ci_errors == []
