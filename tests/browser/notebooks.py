"""Driving notebooks in the model Lab by path: files, commands by id, and cell models read back.

The model Lab exposes its app (``window.jupyterapp``), so tests open notebooks and run commands
the way JupyterLab's own menus do, and read what jupyter-ci did from the notebook's model (ids,
sources, outputs, metadata) rather than from pixels; what the user sees (status lines, badges,
diffs, plots) is checked in the DOM.
"""

from __future__ import annotations

import contextlib
import json
import time
import urllib.request
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from jupyter_ci.testing import Reply, ScriptedModelServer

from .lab import Lab, wait_kernel_idle

#: Small iris-like data, written next to the notebooks (no download in tests).
IRIS_CSV = "\n".join(
    [
        "sepal_length,sepal_width,petal_length,petal_width,species",
        *(
            f"{5.0 + i * 0.1:.1f},{3.0 + (i % 5) * 0.1:.1f},{1.4 + i * 0.2:.1f},"
            f"{0.2 + i * 0.05:.2f},{['setosa', 'versicolor', 'virginica'][i % 3]}"
            for i in range(30)
        ),
    ]
)

#: JavaScript: the notebook panel of ``path`` in the page, or null.
_PANEL = """
const findPanel = (path) => {
  const app = window.jupyterapp;
  for (const widget of app.shell.widgets('main')) {
    if (widget.context && widget.context.path === path && widget.content &&
        widget.content.model) {
      return widget;
    }
  }
  return null;
};
"""

#: JavaScript: the cells of the notebook at ``path`` as plain data (null when not open).
_CELLS = (
    "(path) => {"
    + _PANEL
    + """
  const panel = findPanel(path);
  if (!panel) { return null; }
  const cells = [];
  const list = panel.content.model.cells;
  for (let i = 0; i < list.length; i++) {
    const cell = list.get(i);
    const json = cell.toJSON();
    cells.push({
      id: cell.id,
      type: cell.type,
      source: cell.sharedModel.getSource(),
      outputs: json.outputs || [],
      metadata: json.metadata || {},
      execution_count: json.execution_count ?? null,
      state: cell.type === 'code' ? cell.executionState : null
    });
  }
  return cells;
}"""
)


def write_notebook(lab: Lab, sources: Sequence[str], name: str | None = None) -> str:
    """Write a notebook of code cells into the Lab's root; return its path (relative)."""
    import nbformat

    path = name or f"t-{uuid.uuid4().hex[:8]}.ipynb"
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in sources]
    notebook.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(notebook, str(Path(lab.root_dir) / path))
    return path


def write_iris(lab: Lab) -> None:
    """Put iris.csv into the Lab's root (the notebooks' working directory)."""
    (Path(lab.root_dir) / "iris.csv").write_text(IRIS_CSV + "\n")


LOAD_DF = 'import pandas as pd\ndf = pd.read_csv("iris.csv")\ndf.head()'


def iris_request_notebook(lab: Lab, model: ScriptedModelServer) -> str:
    """The common Run All scenario: ``%load_ext``, a ``%%ci`` that loads iris.csv into ``df``
    (the model scripted to answer with LOAD_DF, then a sentence), and a later cell using ``df``.
    Returns the notebook's path."""
    model.set_script([Reply.code(LOAD_DF), Reply.text("df holds the iris data.")])
    write_iris(lab)
    return write_notebook(
        lab,
        ["%load_ext jupyter_ci", "%%ci load the iris data into df", "print('shape', df.shape)"],
    )


def open_lab_app(page: Any, lab: Lab) -> None:
    """Open Lab in a fresh workspace and wait until the app is exposed and started."""
    page.goto(lab.workspace_url())
    page.locator("#jp-main-dock-panel").wait_for(state="visible", timeout=60_000)
    page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell", timeout=60_000)
    page.evaluate("() => window.jupyterapp.restored")


def open_notebook(page: Any, path: str, kernel_timeout: float = 60_000) -> Any:
    """Open the notebook at ``path``, make it current, and wait for its kernel to be idle
    (at most ``kernel_timeout`` ms)."""
    page.evaluate(
        "async (path) => { await window.jupyterapp.commands.execute('docmanager:open', "
        "{path, factory: 'Notebook'}); }",
        path,
    )
    wait_for_kernel(page, path, kernel_timeout)
    activate(page, path)
    wait_kernel_idle(page)
    return page.locator(f'.jp-NotebookPanel[data-jupyter-ci-path="{path}"]')


def wait_for_kernel(page: Any, path: str, timeout: float = 60_000) -> None:
    """Wait until the notebook's kernel is connected and idle."""
    page.wait_for_function(
        "(path) => {"
        + _PANEL
        + """
  const panel = findPanel(path);
  const kernel = panel && panel.sessionContext.session && panel.sessionContext.session.kernel;
  return !!kernel && kernel.connectionStatus === 'connected' && kernel.status === 'idle';
}""",
        arg=path,
        timeout=timeout,
    )


def activate(page: Any, path: str) -> None:
    """Make the notebook the current widget (commands act on it) and tag its node."""
    page.evaluate(
        "(path) => {"
        + _PANEL
        + """
  const panel = findPanel(path);
  panel.node.dataset.jupyterCiPath = path;
  window.jupyterapp.shell.activateById(panel.id);
}""",
        path,
    )


def panel(page: Any, path: str) -> Any:
    """The locator of the notebook panel (tagged by :func:`activate`)."""
    return page.locator(f'.jp-NotebookPanel[data-jupyter-ci-path="{path}"]')


def cells(page: Any, path: str) -> list[dict[str, Any]]:
    """The notebook's cells, read from its model: id, type, source, outputs, metadata."""
    found = page.evaluate(_CELLS, path)
    if found is None:
        raise AssertionError(f"{path} is not open in the page")
    return list(found)


def command(page: Any, command_id: str, args: dict[str, Any] | None = None) -> Any:
    """Run a JupyterLab command by id (on the current widget) and return its result."""
    return page.evaluate(
        "([id, args]) => window.jupyterapp.commands.execute(id, args)",
        [command_id, args or {}],
    )


def set_source(page: Any, path: str, index: int, source: str) -> None:
    """Replace the source of cell ``index`` (as if the user typed it)."""
    page.evaluate(
        "([path, index, source]) => {"
        + _PANEL
        + """
  findPanel(path).content.model.cells.get(index).sharedModel.setSource(source);
}""",
        [path, index, source],
    )


def run_cell(page: Any, path: str, index: int) -> None:
    """Select cell ``index`` and run it (Shift+Enter's command, without advancing)."""
    activate(page, path)
    page.evaluate(
        "([path, index]) => {"
        + _PANEL
        + """
  findPanel(path).content.activeCellIndex = index;
  window.jupyterapp.commands.execute('notebook:run-cell');
}""",
        [path, index],
    )


def run_all(page: Any, path: str) -> None:
    """Run all cells of the notebook, as Run ▸ Run All Cells does (without waiting for them:
    jupyter-server-nbmodel's executor rejects when a cell stops the queue)."""
    activate(page, path)
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")


def _confirmed(page: Any, path: str, command: str) -> Any:
    """Run a notebook command that asks for confirmation, and accept it; returns the button."""
    activate(page, path)
    page.evaluate("(id) => { window.jupyterapp.commands.execute(id); }", command)
    accept = page.locator(".jp-Dialog .jp-mod-accept")
    accept.wait_for(state="visible", timeout=30_000)
    accept.click()
    return accept


def restart_and_run_all(page: Any, path: str) -> None:
    """Kernel ▸ Restart Kernel and Run All Cells…, accepting the confirmation."""
    _confirmed(page, path, "notebook:restart-run-all")


def restart_kernel(page: Any, path: str) -> None:
    """Kernel ▸ Restart Kernel…, accepting the confirmation; returns once the kernel is idle."""
    _confirmed(page, path, "notebook:restart-kernel").wait_for(state="hidden", timeout=30_000)
    wait_kernel_idle(page)


def close_notebook(page: Any, path: str) -> None:
    """Close the notebook's tab as the user does (File ▸ Close Tab), discarding changes."""
    activate(page, path)
    page.evaluate("() => { window.jupyterapp.commands.execute('application:close'); }")
    discard = page.locator(".jp-Dialog button", has_text="Discard")
    try:
        discard.wait_for(state="visible", timeout=10_000)
    except Exception:  # not dirty: closed without asking
        return
    discard.click()


def shutdown_kernels(lab: Lab) -> None:
    """Shut down every kernel of the Lab (after a test: the machine has two cores)."""
    headers = {"Authorization": f"token {lab.token}"}
    request = urllib.request.Request(f"{lab.url}api/kernels", headers=headers)
    with urllib.request.urlopen(request, timeout=10) as response:
        kernels = json.loads(response.read())
    for kernel in kernels:
        delete = urllib.request.Request(
            f"{lab.url}api/kernels/{kernel['id']}", headers=headers, method="DELETE"
        )
        with contextlib.suppress(OSError):
            urllib.request.urlopen(delete, timeout=30).close()


def text_of(outputs: Sequence[dict[str, Any]]) -> str:
    """Every text of a cell's outputs, joined (streams, text/plain, errors)."""
    parts: list[str] = []
    for output in outputs:
        kind = output.get("output_type")
        if kind == "stream":
            parts.append(_joined(output.get("text", "")))
        elif kind == "error":
            parts.append(f"{output.get('ename')}: {output.get('evalue')}")
        else:
            parts.append(_joined(output.get("data", {}).get("text/plain", "")))
    return "\n".join(parts)


def _joined(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def status_of(cell: dict[str, Any]) -> dict[str, Any] | None:
    """The jupyter-ci status data of a ``%%ci`` cell's output (None if it has none)."""
    for output in cell["outputs"]:
        data = output.get("data", {})
        if "application/vnd.jupyter-ci.status+json" in data:
            status: dict[str, Any] = data["application/vnd.jupyter-ci.status+json"]
            return status
    return None


def generated(all_cells: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The cells carrying jupyter-ci's generated-cell hint."""
    return [
        c
        for c in all_cells
        if isinstance(c["metadata"].get("jupyter_ci"), dict)
        and "run_id" in c["metadata"]["jupyter_ci"]
    ]


def wait_until(
    check: Callable[[], Any],
    timeout: float = 90,
    what: str = "the condition",
    explain: Callable[[], str] | None = None,
) -> Any:
    """Poll ``check()`` until it returns something truthy; return it (AssertionError on
    timeout, with ``explain()`` if given). For conditions read from the page between
    actions."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.1)
    detail = f"\n{explain()}" if explain is not None else ""
    raise AssertionError(f"{what} did not hold within {timeout} s (last: {last!r}){detail}")


def frames(page: Any, count: int = 2) -> None:
    """Wait until the page has drawn ``count`` more animation frames (layout and paint done
    after a change), an event of the page's own instead of a fixed delay."""
    page.evaluate(
        """(count) => new Promise((done) => {
          const step = (left) => left ? requestAnimationFrame(() => step(left - 1)) : done();
          step(count);
        })""",
        count,
    )


#: The states a %%ci's status output ends in.
TERMINAL = ("done", "failed", "stopped", "refused", "reused", "unavailable")


def wait_for_status(
    page: Any,
    path: str,
    cell_index: int,
    states: Sequence[str],
    timeout: float = 120,
    *,
    finished: bool = False,
) -> dict[str, Any]:
    """Wait until the status output of cell ``cell_index`` is in one of ``states`` (with
    ``finished``: and has the run's ``finished`` event's summary, which follows the last
    ``state`` event; the line is the same in both)."""

    def check() -> dict[str, Any] | None:
        status = status_of(cells(page, path)[cell_index])
        if not status or status.get("state") not in states:
            return None
        return status if status.get("summary") or not finished else None

    result: dict[str, Any] = wait_until(
        check, timeout, f"status of cell {cell_index} in {list(states)}", lambda: dump(page, path)
    )
    return result


def dump(page: Any, path: str) -> str:
    """The notebook's cells as JSON, for failure messages."""
    return json.dumps(cells(page, path), indent=1)[:6000]
