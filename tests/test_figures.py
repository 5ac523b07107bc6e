"""Plots told in words to a model that does not see images (headless and in-kernel paths; the
JupyterLab path is in tests/lab/test_status_words.py)."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from IPython.core.interactiveshell import InteractiveShell

from jupyter_ci.agent.figures import figure_notes, figures_here
from jupyter_ci.api import run_notebook
from jupyter_ci.testing import Reply, ScriptedModelServer

from .loop_support import write_notebook

PLOT = """import matplotlib
matplotlib.use("module://matplotlib_inline.backend_inline")
import matplotlib.pyplot as plt
fig, ax = plt.subplots()
setosa = ([4.3, 5.0, 5.8], [1.0, 1.5, 1.9])
virginica = ([6.3, 7.0, 7.9], [5.0, 6.0, 6.9])
ax.scatter(*setosa, label="setosa")
ax.scatter(*virginica, label="virginica")
ax.set_title("Iris petals")
ax.set_xlabel("sepal_length")
ax.set_ylabel("petal_length")
ax.legend()
plt.show()"""


#: A cell listing the user's names (not IPython's own, which start with "_") and history length.
NAMES = (
    "import json\nprint(json.dumps({'names': sorted(n for n in globals() if not n.startswith('_'))"
    ", 'history': len(In) - 1}))"
)
USER_NAMES = {
    "In",
    "Out",
    "exit",
    "quit",
    "get_ipython",
    "open",
    "matplotlib",
    "plt",
    "fig",
    "ax",
    "setosa",
    "virginica",
    "json",
}


def sent_text(server: ScriptedModelServer, index: int) -> str:
    return json.dumps(server.chat_requests[index].body["messages"])


@pytest.mark.parametrize(("vision", "described"), [("auto", True), ("off", True), ("on", False)])
def test_a_text_only_model_is_told_the_figure_in_words(
    tmp_path: Path, vision: str, described: bool
) -> None:
    path = write_notebook(tmp_path / "a.ipynb", ["x = 1"])
    script = [
        Reply.code(PLOT),
        Reply.code(NAMES),
        Reply.text("Done."),
    ]
    with ScriptedModelServer(script) as server:
        outcome = run_notebook(
            path,
            "plot the iris petals",
            options={"model": "openai/scripted", "api_base": server.base_url, "vision": vision},
        )
        assert outcome.ok, outcome.status_line()
        told = sent_text(server, 1)
    notebook = nbformat.read(str(path), as_version=4)
    plot = notebook.cells[1]
    # The figure's output is as it always is: nothing of ours in it.
    assert [sorted(out.get("data", {})) for out in plot.outputs] == [["image/png", "text/plain"]]
    if described:
        assert "described for a model that does not see images" in told
        assert "Figure 1: 1 axes" in told
        assert "title 'Iris petals'" in told
        assert "x 'sepal_length' from" in told
        assert "y 'petal_length' from" in told
        assert "shows 6 scatter points" in told
        assert "legend 'setosa', 'virginica'" in told
    else:
        assert "described for a model" not in told
        assert "image_url" in told  # the image itself went to the model
    # Nothing was added to the user's namespace or history: the next cell lists them.
    seen = json.loads(notebook.cells[2].outputs[0]["text"])
    assert seen["names"] == sorted(USER_NAMES)
    assert seen["history"] == 2  # the two cells that ran (the plot, this one), nothing of ours


def test_notes_are_taken_silently_in_the_kernel_process() -> None:
    shell = InteractiveShell.instance()
    before = set(shell.user_ns)
    assert figures_here(shell, False) == []
    shell.run_cell(PLOT)
    lines = figures_here(shell, True)
    assert lines[0] == "Figure 1: 1 axes"
    assert "legend 'setosa', 'virginica'" in lines[1]
    assert figures_here(shell, True) == []  # taken away once read
    shell.run_cell(PLOT)
    assert figures_here(shell, False) == []  # a run's start clears what the user plotted
    assert figures_here(shell, True) == []
    assert set(shell.user_ns) - before == {"matplotlib", "plt", "fig", "ax", "setosa", "virginica"}
    assert len(figure_notes(["x" * 5000])) <= 1200
