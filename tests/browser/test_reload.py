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
from typing import Any

from jupyter_ci.agent.cells import UNFINISHED_NOTE
from jupyter_ci.testing import Reply, ScriptedModelServer

from .chat import messages, open_chat, wait_run_state
from .lab import Lab
from .notebooks import (
    TERMINAL,
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

#: jupyter-collaboration is installed (the Lab then shares one document between its tabs).
REAL_TIME_COLLABORATION = importlib.util.find_spec("jupyter_server_ydoc") is not None

#: Code that streams for a while (300 lines, one chunk at a time).
SLOW_CODE = "\n".join(f"value_{i} = {i}" for i in range(300))

#: JavaScript: the tab's client id, as the server knows it.
CLIENT_ID = "() => JSON.parse(window.sessionStorage.getItem('jupyter-ci:client') || 'null')"


def reload_lab(page: Any, path: str) -> None:
    """Reload the page, as the user does (F5), and wait for the notebook to be back."""
    page.reload()
    page.locator("#jp-main-dock-panel").wait_for(state="visible", timeout=60_000)
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell", timeout=60_000)
    page.evaluate("() => window.jupyterapp.restored")
    open_notebook(page, path)


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
    [request] = messages(page, "user")
    assert request.endswith("count slowly"), request
    assert model_context.jupyter_ci_errors == []
