"""``%%ci`` when jupyter-server-nbmodel runs the notebook's cells from the server.

nbmodel's cell executor sends each cell to the server, which runs it with the kernel manager's
own client and no cell metadata: the labextension's stamp never reaches the kernel. The tab's
``expect_handoff`` lets the magic hand the request over all the same. Runs only where
jupyter-server-nbmodel is installed (a stage of ``.ci/run``); the other browser tests run there
too.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from jupyter_ci.testing import Reply, ScriptedModelServer

from .conftest import NBMODEL
from .lab import Lab
from .notebooks import (
    cells,
    dump,
    generated,
    open_lab_app,
    open_notebook,
    restart_and_run_all,
    status_of,
    text_of,
    wait_for_status,
    wait_until,
    write_iris,
    write_notebook,
)

pytestmark = pytest.mark.skipif(
    not NBMODEL, reason="jupyter-server-nbmodel is not installed (see its stage in .ci/run)"
)

TERMINAL = ("done", "failed", "stopped", "refused", "reused", "unavailable")
LOAD_DF = 'import pandas as pd\ndf = pd.read_csv("iris.csv")\ndf.head()'


def executed_by_server(lab: Lab, cell_id: str) -> list[str]:
    """nbmodel's log lines for executions of the cell (one per execution it ran)."""
    pattern = re.compile(rf"Executed cell {re.escape(cell_id)} of document .*status=(\w+)")
    return [m.group(1) for m in pattern.finditer(lab.log())]


def test_restart_and_run_all_hands_the_magic_over_from_the_server(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    model.set_script([Reply.code(LOAD_DF), Reply.text("df holds the iris data.")])
    write_iris(model_lab)
    path = write_notebook(
        model_lab,
        ["%load_ext jupyter_ci", "%%ci load the iris data into df", "print('shape', df.shape)"],
    )
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)

    restart_and_run_all(page, path)
    status = wait_for_status(page, path, 1, TERMINAL)
    assert status["state"] == "done", dump(page, path)
    wait_until(
        lambda: str(status_of(cells(page, path)[1]).get("continuation", "")).startswith("ran"),
        what="the held-back cell ran",
        explain=lambda: dump(page, path),
    )
    final = cells(page, path)
    magic, made, later = final[1], final[2], final[3]
    # nbmodel ran the %%ci from the server (its queue-stopping error is how it ended there),
    # yet the server's loop made the cell: the in-kernel loop never ran (no model in the kernel).
    assert executed_by_server(model_lab, final[0]["id"]) == ["ok"], model_lab.log()[-3000:]
    assert executed_by_server(model_lab, magic["id"]) == ["error"]
    assert [c["id"] for c in generated(final)] == [made["id"]]
    assert made["source"] == LOAD_DF
    assert len(model.chat_requests) == 2
    everything = "\n".join(text_of(c["outputs"]) for c in final)
    assert "No model is configured" not in everything
    assert "JupyterCIHandoff" not in everything
    # The cell after it was cancelled by nbmodel's queue, then run by jupyter-ci after the
    # generated one, and used its variable.
    assert "shape (30, 5)" in text_of(later["outputs"]), dump(page, path)
    assert executed_by_server(model_lab, later["id"]) == []
    assert "ran the 1 cell after this one" in str(status_of(magic)["continuation"])
    assert len(magic["outputs"]) == 1
    assert text_of(magic["outputs"]).startswith("jupyter-ci: done — 1 cell")
    assert model_context.jupyter_ci_errors == []
