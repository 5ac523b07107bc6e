"""Files a run writes, in real JupyterLab with the scripted model: listed under the %%ci status
(live, saved with the notebook, in its text/plain twin) and under the run in the panel, each
opening in JupyterLab and downloadable; a second request that rewrites a file says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jupyter_ci.testing import Reply, ScriptedModelServer

from .chat import ask, open_chat, runs, set_theme, wait_run_state
from .lab import Lab, screenshot
from .notebooks import (
    TERMINAL,
    activate,
    cells,
    dump,
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

WRITE = "open('clean.csv', 'w').write('a,b\\n1,2\\n')"
REWRITE = "open('clean.csv', 'w').write('a,b\\n1,2\\n3,4\\n')"


def files_under_status(page: Any, path: str) -> list[dict[str, str]]:
    """The files listed under the %%ci cell's status output: path, text, download link."""
    found: list[dict[str, str]] = page.evaluate(
        """(path) => [...document.querySelectorAll(
               '[data-testid=jupyter-ci-status-output] [data-testid=jupyter-ci-files] li')]
             .map(li => ({
               path: li.dataset.path,
               text: li.textContent.trim(),
               download: li.querySelector('a[download]').getAttribute('href'),
             }))""",
        path,
    )
    return found


def test_the_files_a_run_wrote_are_listed_and_open(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    (Path(model_lab.root_dir) / "work").mkdir(exist_ok=True)
    path = write_notebook(
        model_lab,
        ["%load_ext jupyter_ci", "%%ci save the cleaned data to clean.csv"],
        name="work/files.ipynb",
    )
    model.set_script(
        [
            Reply.code(WRITE),
            Reply.text("Saved clean.csv."),
            Reply.code(REWRITE),
            Reply.text("Added a row."),
        ]
    )
    page = model_context.new_page()
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    run_all(page, path)
    assert wait_for_status(page, path, 1, TERMINAL)["state"] == "done", dump(page, path)

    # Under the status: the file, relative to the notebook's folder, with its size.
    listed = wait_until(
        lambda: files_under_status(page, path) or None,
        30,
        "the files list",
        lambda: dump(page, path),
    )
    assert [(f["path"], f["text"]) for f in listed] == [
        ("work/clean.csv", "clean.csv (created, 8 B) download")
    ]
    assert listed[0]["download"].endswith("/files/work/clean.csv?download=1")
    downloaded = page.evaluate("(url) => fetch(url).then(r => r.text())", listed[0]["download"])
    assert downloaded == "a,b\n1,2\n"
    # The same in the saved output: its data and its text/plain twin.
    status = status_of(cells(page, path)[1])
    assert status is not None
    assert status["files"] == [{"path": "clean.csv", "change": "created", "size": 8}]
    assert status["files_folder"] == "work"
    assert "files: clean.csv (created, 8 B)" in text_of(cells(page, path)[1]["outputs"])
    screenshot(page, "run-files-status-light")

    # The link opens the file in JupyterLab.
    panel(page, path).locator(
        "[data-testid=jupyter-ci-status-output] .jp-jupyter-ci-Files-open"
    ).click()
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="clean.csv").wait_for(
        timeout=30_000
    )

    # The panel lists it under the run, and opens it too.
    activate(page, path)
    open_chat(page)
    wait_until(lambda: runs(page).count() >= 1, 30, "the run in the panel")
    in_panel = runs(page).last.locator("[data-testid=jupyter-ci-files]")
    in_panel.locator("li", has_text="clean.csv (created, 8 B)").wait_for(timeout=30_000)
    assert in_panel.locator("a[download]").get_attribute("href") == listed[0]["download"]
    set_theme(page, "JupyterLab Dark")
    screenshot(page, "run-files-panel-dark")
    set_theme(page, "JupyterLab Light")

    # A second request, from the panel, that rewrites the file: listed as modified.
    ask(page, "add a row to clean.csv")
    wait_until(lambda: runs(page).count() >= 2, 30, "the second run")
    assert wait_run_state(page, ("done", "failed", "stopped")) == "done"
    runs(page).last.locator("[data-testid=jupyter-ci-files]").locator(
        "li", has_text="clean.csv (modified, 12 B)"
    ).wait_for(timeout=30_000)
    assert model_context.jupyter_ci_errors == []
