"""A reloaded tab is the same client (issue 23, item 3): its runs go on where they were.

The tab keeps its client identity (id and secret) in the browser tab's session storage, so a
reload says hello as the same client: the run's calls come back to it, the cells the reload
dropped (without real-time collaboration nothing unsaved survives a reload) are put back from
the run's record, a cell waiting for review waits again with its buttons, the status and the
panel show the run, and Stop works. A duplicated tab (which copies session storage) is a new
client; Stop from another tab of the same user on the same notebook works too.
"""

from __future__ import annotations

import importlib.util
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from jupyter_ci.agent.cells import UNFINISHED_NOTE
from jupyter_ci.magics import HELD_BACK
from jupyter_ci.testing import Reply, ScriptedModelServer

from .chat import by_testid, messages, open_chat, steps, wait_run_state
from .lab import Lab
from .notebooks import (
    TERMINAL,
    activate,
    cells,
    dump,
    generated,
    open_lab_app,
    open_notebook,
    panel,
    run_all,
    status_of,
    text_of,
    wait_for_status,
    wait_until,
    write_notebook,
)
from .test_lab_runs import LONG_CELL
from .test_notebook_flows import cell_review, waiting_cell

#: jupyter-collaboration is installed (the Lab then shares one document between its tabs).
REAL_TIME_COLLABORATION = importlib.util.find_spec("jupyter_server_ydoc") is not None

#: Code that streams for a while (300 lines, one chunk at a time).
SLOW_CODE = "\n".join(f"value_{i} = {i}" for i in range(300))

#: JavaScript: the tab's client id, as the server knows it.
CLIENT_ID = "() => JSON.parse(window.sessionStorage.getItem('jupyter-ci:client') || 'null')"


def reload_lab(page: Any, path: str, *, kernel_idle: bool = True) -> None:
    """Reload the page, as the user does (F5), and wait for the notebook to be back (and its
    kernel idle, unless ``kernel_idle`` is False: a kernel running a cell is not)."""
    page.reload()
    page.locator("#jp-main-dock-panel").wait_for(state="visible", timeout=60_000)
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell", timeout=60_000)
    page.evaluate("() => window.jupyterapp.restored")
    if kernel_idle:
        open_notebook(page, path)
        return
    page.evaluate(
        "async (path) => { await window.jupyterapp.commands.execute('docmanager:open', "
        "{path, factory: 'Notebook'}); }",
        path,
    )
    activate(page, path)


def gated(gate: str, then: str) -> str:
    """A cell that prints 'begun', runs until the file ``gate`` appears in its folder (the test
    opens the gate when it is ready: no guessed duration), then runs ``then``."""
    return (
        "import os, time\nprint('begun', flush=True)\n"
        f"while not os.path.exists({gate!r}):\n    time.sleep(0.05)\n{then}"
    )


def reload_while_it_runs(page: Any, lab: Lab, path: str) -> str:
    """Run All, wait until the generated cell runs (it printed 'begun'), reload the page, and
    wait until the reloaded page shows that cell again, running, with what it printed before
    the reload. Returns the cell's id."""
    run_all(page, path)
    wait_until(
        lambda: len(cells(page, path)) > 2 and "begun" in text_of(cells(page, path)[2]["outputs"]),
        60,
        "the generated cell to start",
        lambda: dump(page, path),
    )
    running = cells(page, path)[2]["id"]
    reload_lab(page, path, kernel_idle=False)
    wait_until(
        lambda: (
            len(cells(page, path)) > 2
            and cells(page, path)[2]["id"] == running
            and "begun" in text_of(cells(page, path)[2]["outputs"])
        ),
        60,
        "the running cell to be back with its outputs",
        lambda: dump(page, path),
    )
    assert cells(page, path)[2]["state"] == "running", dump(page, path)
    assert status_of(cells(page, path)[1])["state"] == "executing", dump(page, path)
    assert panel(page, path).locator('[data-testid="jupyter-ci-elsewhere"]').is_hidden()
    return running


def open_gate(lab: Lab, gate: str) -> None:
    """Let a :func:`gated` cell go on."""
    (Path(lab.root_dir) / gate).touch()


def test_a_reload_mid_stream_keeps_the_run_and_stop_works(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    model.set_script([Reply.code(SLOW_CODE, delay=0.05), Reply.text("not asked", times=None)])
    path = write_notebook(model_lab, ["%load_ext jupyter_ci", "%%ci count slowly"])
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    run_all(page, path)
    wait_until(
        lambda: len(cells(page, path)) > 2 and "value_3 = 3" in cells(page, path)[2]["source"],
        60,
        "code to stream",
    )
    before = page.evaluate(CLIENT_ID)

    reload_lab(page, path)
    assert page.evaluate(CLIENT_ID)["id"] == before["id"]
    open_chat(page)
    # The cell the reload dropped is back, and the code goes on arriving into it.
    wait_until(
        lambda: len(cells(page, path)) > 2 and "value_40 = 40" in cells(page, path)[2]["source"],
        60,
        "the code to go on arriving after the reload",
        lambda: dump(page, path),
    )
    assert [c["id"] for c in generated(cells(page, path))] == [cells(page, path)[2]["id"]]
    # This tab is the run's: no "in another tab", and its Stop works.
    assert panel(page, path).locator('[data-testid="jupyter-ci-elsewhere"]').is_hidden()
    stop = panel(page, path).locator('[data-testid="jupyter-ci-stop"]')
    stop.wait_for(state="visible", timeout=30_000)
    stop.click()
    status = wait_for_status(page, path, 1, TERMINAL)
    assert (status["state"], status["reason"]) == ("stopped", "user"), dump(page, path)
    lines = cells(page, path)[2]["source"].splitlines()
    assert lines[0] == UNFINISHED_NOTE, dump(page, path)
    assert len(lines) < 301
    assert len(cells(page, path)) == 3, dump(page, path)
    assert len(model.chat_requests) == 1
    # The panel shows the run once, with its request (from the record: its text).
    assert wait_run_state(page, TERMINAL) == "stopped"
    shown = messages(page, "user")
    assert len(shown) == 1, shown
    assert shown[0].endswith("count slowly"), shown
    assert model_context.jupyter_ci_errors == []


def test_a_reload_while_a_cell_waits_for_review_brings_the_review_back(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    model.set_script([Reply.code("print('reviewed', 6 * 7)"), Reply.text("It printed 42.")])
    path = write_notebook(model_lab, ["%load_ext jupyter_ci", "%%ci --review print a product"])
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    open_chat(page)  # open before the reload: the page shows it again as it starts
    run_all(page, path)
    waiting = waiting_cell(page, path)

    reload_lab(page, path)
    # The cell (never saved) is back, waiting with its buttons; the run is this tab's.
    again = waiting_cell(page, path)
    assert (again["id"], again["source"]) == (waiting["id"], waiting["source"])
    assert panel(page, path).locator('[data-testid="jupyter-ci-elsewhere"]').is_hidden()
    assert status_of(cells(page, path)[1])["state"] == "awaiting_approval", dump(page, path)
    # The panel shows the run, waiting, with its steps.
    open_chat(page)
    assert wait_run_state(page, ("awaiting_approval",)) == "awaiting_approval"
    assert "Waiting for your review" in steps(page)
    cell_review(page, path, again["id"]).get_by_role("button", name="Run this cell").click()
    status = wait_for_status(page, path, 1, TERMINAL)
    assert status["state"] == "done", dump(page, path)
    final = cells(page, path)
    assert len(final) == 3, dump(page, path)
    assert "reviewed 42" in text_of(final[2]["outputs"])
    assert len(model.chat_requests) == 2
    assert wait_run_state(page, TERMINAL) == "done"
    assert len(messages(page, "user")) == 1
    assert model_context.jupyter_ci_errors == []


def test_stop_from_another_tab_of_the_same_user_on_the_same_notebook(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    model.set_script([Reply.code(LONG_CELL), Reply.text("not asked: stopped")])
    path = write_notebook(model_lab, ["%load_ext jupyter_ci", "%%ci wait a while"])
    first = model_context.new_page()
    open_lab_app(first, model_lab)
    open_notebook(first, path)
    second = model_context.new_page()
    open_lab_app(second, model_lab)
    open_notebook(second, path)
    open_chat(second)

    run_all(first, path)
    wait_until(
        lambda: (
            len(cells(first, path)) > 2 and "started" in text_of(cells(first, path)[2]["outputs"])
        ),
        60,
        "the generated cell to start",
    )
    second.locator(by_testid("jupyter-ci-stop")).click()
    status = wait_for_status(first, path, 1, TERMINAL)
    assert (status["state"], status["reason"]) == ("stopped", "user"), dump(first, path)
    errors = [o for o in cells(first, path)[2]["outputs"] if o["output_type"] == "error"]
    assert [e["ename"] for e in errors] == ["KeyboardInterrupt"]
    assert len(model.chat_requests) == 1
    assert model_context.jupyter_ci_errors == []


#: JavaScript run before a page's own: the browser has no Web Locks (a page not served over
#: HTTPS or from localhost), so pages claim ids on a BroadcastChannel instead.
NO_WEB_LOCKS = "Object.defineProperty(Navigator.prototype, 'locks', { get: () => undefined });"


@pytest.mark.parametrize("locks", ["web locks", "broadcast channel"])
def test_a_duplicated_tab_is_a_new_client(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer, locks: str
) -> None:
    model.set_script([Reply.code("print('in the first tab')"), Reply.text("Done.")])
    path = write_notebook(model_lab, ["%load_ext jupyter_ci", "%%ci print where"])
    first = model_context.new_page()
    if locks == "broadcast channel":
        first.add_init_script(NO_WEB_LOCKS)
    open_lab_app(first, model_lab)
    open_notebook(first, path)
    first.wait_for_function(f"() => ({CLIENT_ID})() && ({CLIENT_ID})().secret")
    identity = first.evaluate(CLIENT_ID)
    assert first.evaluate("() => navigator.locks === undefined") == (locks != "web locks")
    # Duplicating a browser tab copies its session storage into the new one.
    duplicate = model_context.new_page()
    if locks == "broadcast channel":
        duplicate.add_init_script(NO_WEB_LOCKS)
    duplicate.add_init_script(
        "if (!window.sessionStorage.getItem('jupyter-ci:client')) {"
        f" window.sessionStorage.setItem('jupyter-ci:client', {json.dumps(json.dumps(identity))});"
        " }"
    )
    open_lab_app(duplicate, model_lab)
    open_notebook(duplicate, path)
    # Welcomed by the server: a secret of its own.
    duplicate.wait_for_function(
        f"(secret) => ({CLIENT_ID})().secret !== secret", arg=identity["secret"], timeout=30_000
    )
    assert duplicate.evaluate(CLIENT_ID)["id"] != identity["id"]
    assert first.evaluate(CLIENT_ID) == identity
    # The first tab is still itself: its run's cells go to it, not to the duplicate.
    run_all(first, path)
    status = wait_for_status(first, path, 1, TERMINAL)
    assert status["state"] == "done", dump(first, path)
    assert "in the first tab" in text_of(cells(first, path)[2]["outputs"])
    if not REAL_TIME_COLLABORATION:
        assert generated(cells(duplicate, path)) == []
    # A reload of the first tab is still the same client (nobody else holds its id).
    reload_lab(first, path)
    first.wait_for_function(
        f"(id) => ({CLIENT_ID})() && ({CLIENT_ID})().id === id", arg=identity["id"]
    )
    assert duplicate.evaluate(CLIENT_ID)["id"] != identity["id"]
    assert model_context.jupyter_ci_errors == []


def test_a_reload_while_a_generated_cell_runs_follows_it_and_the_run_goes_on(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    gate = f"gate-{uuid.uuid4().hex[:8]}"
    model.set_script(
        [
            Reply.code(gated(gate, "print('done')")),
            Reply.code("print('next step')"),
            Reply.text("Both steps ran."),
        ]
    )
    path = write_notebook(model_lab, ["%load_ext jupyter_ci", "%%ci wait for the gate"])
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    running = reload_while_it_runs(page, model_lab, path)

    # The kernel goes on with the cell; what it prints now reaches the reloaded page.
    open_gate(model_lab, gate)
    wait_until(
        lambda: "done" in text_of(cells(page, path)[2]["outputs"]),
        60,
        "the cell's later output in the reloaded page",
        lambda: dump(page, path),
    )
    status = wait_for_status(page, path, 1, TERMINAL)
    assert status["state"] == "done", dump(page, path)
    final = generated(cells(page, path))
    assert len(final) == 2, dump(page, path)
    assert final[0]["id"] == running
    # Each output once (with real-time collaboration the earlier page's are in the document).
    assert text_of(final[0]["outputs"]) == "begun\ndone\n", dump(page, path)
    assert final[0]["execution_count"] is not None
    assert final[0]["state"] == "idle"
    assert "next step" in text_of(final[1]["outputs"])
    # The model saw the cell end well, with its output, and wrote the next step.
    assert len(model.chat_requests) == 3
    assert "done" in json.dumps(model.chat_requests[1].body)
    assert model_context.jupyter_ci_errors == []


def test_stop_after_a_reload_while_a_generated_cell_runs(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    gate = f"gate-{uuid.uuid4().hex[:8]}"  # never opened: only Stop ends the cell
    model.set_script([Reply.code(gated(gate, "print('not reached')")), Reply.text("not asked")])
    path = write_notebook(model_lab, ["%load_ext jupyter_ci", "%%ci wait for the gate"])
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    reload_while_it_runs(page, model_lab, path)

    stop = panel(page, path).locator('[data-testid="jupyter-ci-stop"]')
    stop.wait_for(state="visible", timeout=30_000)
    stop.click()
    status = wait_for_status(page, path, 1, TERMINAL)
    assert (status["state"], status["reason"]) == ("stopped", "user"), dump(page, path)
    wait_until(
        lambda: cells(page, path)[2]["state"] == "idle",
        30,
        "the interrupted cell to end in the page",
        lambda: dump(page, path),
    )
    outputs = cells(page, path)[2]["outputs"]
    assert [o["ename"] for o in outputs if o["output_type"] == "error"] == ["KeyboardInterrupt"]
    assert "not reached" not in text_of(outputs)
    assert len(model.chat_requests) == 1
    assert model_context.jupyter_ci_errors == []


def test_a_cell_that_fails_after_a_reload_is_fixed(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    gate = f"gate-{uuid.uuid4().hex[:8]}"
    model.set_script(
        [
            Reply.code(gated(gate, "raise ValueError('the gate opened')")),
            Reply.code("print('fixed')"),
            Reply.text("Fixed it."),
        ]
    )
    path = write_notebook(model_lab, ["%load_ext jupyter_ci", "%%ci wait for the gate"])
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    running = reload_while_it_runs(page, model_lab, path)

    open_gate(model_lab, gate)
    status = wait_for_status(page, path, 1, TERMINAL)
    assert status["state"] == "done", dump(page, path)
    [fixed] = generated(cells(page, path))
    assert (fixed["id"], fixed["source"]) == (running, "print('fixed')"), dump(page, path)
    assert text_of(fixed["outputs"]) == "fixed\n"
    # The failure, read from the kernel's output channel, went to the model with its error.
    assert len(model.chat_requests) == 3
    assert "the gate opened" in json.dumps(model.chat_requests[1].body)
    assert model_context.jupyter_ci_errors == []


def test_the_cells_run_all_held_back_run_after_a_reload(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    model.set_script([Reply.code(SLOW_CODE, delay=0.05), Reply.text("Counted.")])
    path = write_notebook(
        model_lab, ["%load_ext jupyter_ci", "%%ci count slowly", "print('held back ran')"]
    )
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    run_all(page, path)
    wait_until(
        lambda: len(cells(page, path)) > 3 and "value_3 = 3" in cells(page, path)[2]["source"],
        60,
        "code to stream",
        lambda: dump(page, path),
    )
    held = cells(page, path)[3]
    # Not run yet: aborted by the kernel (no output), or, when its request reached the kernel
    # after the %%ci had stopped the queue (a busy machine), refused with the held-back line.
    assert held["source"] == "print('held back ran')", dump(page, path)
    names = [o.get("ename") for o in held["outputs"]]
    assert names in ([], ["JupyterCIHeldBack"]), dump(page, path)
    if held["outputs"]:
        assert held["outputs"][0]["traceback"] == [HELD_BACK], dump(page, path)

    reload_lab(page, path)
    status = wait_for_status(page, path, 1, TERMINAL)
    assert status["state"] == "done", dump(page, path)
    # The page that claimed the request is gone; the reloaded one runs what it held back.
    wait_until(
        lambda: "held back ran" in text_of(cells(page, path)[3]["outputs"]),
        60,
        "the held-back cell to run",
        lambda: dump(page, path),
    )
    wait_until(
        lambda: "ran the 1 cell" in str(status_of(cells(page, path)[1]).get("continuation")),
        30,
        "the %%ci cell to say so",
        lambda: dump(page, path),
    )
    final = cells(page, path)
    assert final[3]["id"] == held["id"]
    assert text_of(final[3]["outputs"]) == "held back ran\n"
    assert final[3]["execution_count"] is not None
    assert len(model.chat_requests) == 2
    assert model_context.jupyter_ci_errors == []
