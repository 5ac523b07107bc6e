"""Driving the jupyter-ci chat panel in the model Lab: open it, ask, read what it shows.

Everything goes through the panel as a user would use it (typing, Enter, buttons); what the
run did to the notebook is read back from the notebook's model (see ``notebooks.py``).
"""

from __future__ import annotations

import json
import threading
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .lab import Lab
from .notebooks import command, open_lab_app, open_notebook, wait_until, write_notebook

#: The chat panel's root.
PANEL = "#jupyter-ci-panel"


def by_testid(name: str) -> str:
    """A CSS selector for a ``data-testid`` inside the panel."""
    return f'{PANEL} [data-testid="{name}"]'


def open_chat(page: Any) -> Any:
    """Open the side panel (by its command) and wait until it can take a request."""
    command(page, "jupyter-ci:open-panel")
    page.locator(by_testid("jupyter-ci-input")).wait_for(state="visible", timeout=60_000)
    page.locator(by_testid("jupyter-ci-status"), has_text="model").wait_for(timeout=60_000)
    return page.locator(PANEL)


def chat_about_new_notebook(
    context: Any, lab: Lab, sources: list[str], *, clipboard: bool = False
) -> tuple[Any, str]:
    """A new notebook of code cells ``sources``, open in a new page of ``context`` with the
    panel open on it (and the clipboard allowed, for Copy); returns the page and its path."""
    path = write_notebook(lab, sources)
    if clipboard:
        context.grant_permissions(["clipboard-read", "clipboard-write"])
    page = context.new_page()
    open_lab_app(page, lab)
    open_notebook(page, path)
    open_chat(page)
    return page, path


def ask(page: Any, text: str) -> None:
    """Type a request into the panel's box and press Enter."""
    box = page.locator(by_testid("jupyter-ci-input"))
    box.click()
    box.fill(text)
    box.press("Enter")


def runs(page: Any) -> Any:
    """The locator of the run progress blocks in the conversation."""
    return page.locator(by_testid("jupyter-ci-run"))


def wait_run_state(
    page: Any, states: tuple[str, ...], index: int = -1, timeout: float = 120
) -> str:
    """Wait until run block ``index`` of the conversation is in one of ``states`` (a final
    state counts once the run's ``finished`` event is in: its last step is shown)."""

    def check() -> str | None:
        found = page.evaluate(
            "(sel) => { const terminal = ['done', 'failed', 'stopped'];"
            " return Array.from(document.querySelectorAll(sel))"
            ".map(e => e.dataset.finished === 'true' || !terminal.includes(e.dataset.state)"
            " ? e.dataset.state : 'finishing'); }",
            by_testid("jupyter-ci-run"),
        )
        if not found:
            return None
        state = found[index]
        return state if state in states else None

    result: str = wait_until(
        check, timeout, f"a run block in {list(states)}", lambda: conversation_text(page)
    )
    return result


def steps(page: Any, index: int = -1) -> list[str]:
    """The step labels of run block ``index``."""
    found: list[list[str]] = page.evaluate(
        "(sel) => Array.from(document.querySelectorAll(sel)).map(run => "
        "Array.from(run.querySelectorAll('[data-testid=\"jupyter-ci-step\"]'))"
        ".map(s => s.textContent.trim()))",
        by_testid("jupyter-ci-run"),
    )
    return found[index] if found else []


def conversation_text(page: Any) -> str:
    """Everything the conversation shows, as text."""
    locator = page.locator(by_testid("jupyter-ci-conversation"))
    return str(locator.inner_text()) if locator.count() else "(no conversation)"


def messages(page: Any, role: str) -> list[str]:
    """The texts of the conversation's messages of one role (user, assistant, notice), once
    the Markdown of each is rendered (rendermime renders asynchronously)."""
    page.wait_for_function(
        "([sel, role]) => Array.from(document.querySelectorAll("
        'sel + ` [data-role="${role}"] .jp-jupyter-ci-markdown`))'
        ".every(e => e.dataset.rendered === 'true')",
        arg=[PANEL, role],
        timeout=30_000,
    )
    found: list[str] = page.evaluate(
        '([sel, role]) => Array.from(document.querySelectorAll(sel + ` [data-role="${role}"]`))'
        ".map(e => Array.from(e.children)"
        ".filter(c => !c.matches('.jp-jupyter-ci-author, .jp-jupyter-ci-answer-actions'))"
        ".map(c => c.innerText).join('\\n').trim() || e.innerText.trim())",
        [PANEL, role],
    )
    return found


#: JavaScript: the generated cells each run block lists (see :func:`run_cells`). The buttons are
#: found by test id: Copy's name says "Copied" for a moment after a click.
_RUN_CELLS = """([sel, insert, copy]) => Array.from(document.querySelectorAll(sel)).map(run =>
  Array.from(run.querySelectorAll('[data-testid="jupyter-ci-run-cell"]')).map(cell => ({
    cell_id: cell.dataset.cellId || null,
    writing: cell.dataset.writing === 'true',
    rendered: cell.querySelector('.jp-jupyter-ci-markdown')?.dataset.rendered === 'true',
    code: (cell.querySelector('pre')?.textContent ?? '').replace(/\\n$/, ''),
    insert_disabled: cell.querySelector(`button[data-testid="${insert}"]`).disabled,
    copy_disabled: cell.querySelector(`button[data-testid="${copy}"]`).disabled
  })))"""


def run_cells(page: Any, index: int = -1) -> list[dict[str, Any]]:
    """The generated cells run block ``index`` lists: each cell's id, the code it shows (once
    rendered), whether it is still being written, and whether its Insert below and Copy buttons
    are disabled."""
    found: list[list[dict[str, Any]]] = page.evaluate(
        _RUN_CELLS, [by_testid("jupyter-ci-run"), INSERT_ID, COPY_ID]
    )
    return found[index] if found else []


#: The accessible names of the buttons over code in the panel (messages' code blocks, cells).
INSERT = "Insert this code as a new cell below"
COPY = "Copy this code to the clipboard"
#: Their test ids (Copy's name changes to "Copied to the clipboard" for a moment after a click).
INSERT_ID = "jupyter-ci-insert-code"
COPY_ID = "jupyter-ci-copy-code"

#: JavaScript: every code block of the panel with Insert below and Copy buttons; each Copy that
#: is enabled is clicked and the clipboard read back (at once: the panel re-renders as a run
#: streams, so a button found now may be gone a moment later).
_COPY_ALL = """async ([sel, insert, copy]) => {
  const found = [];
  for (const button of document.querySelectorAll(`${sel} button[data-testid="${copy}"]`)) {
    const bar = button.parentElement;
    const other = bar.querySelector(`button[data-testid="${insert}"]`);
    const block = { copy_disabled: button.disabled, insert_disabled: !other || other.disabled };
    if (!button.disabled) {
      await navigator.clipboard.writeText('');
      button.click();
      block.copied = await navigator.clipboard.readText();
    }
    found.push(block);
  }
  return found;
}"""


def copy_every_code_block(page: Any) -> list[dict[str, Any]]:
    """What each code block's Copy gives now (``copied``, when enabled), with whether its
    Insert below and Copy buttons are disabled. Needs clipboard permissions."""
    found: list[dict[str, Any]] = page.evaluate(_COPY_ALL, [PANEL, INSERT_ID, COPY_ID])
    return found


def stored_conversation(lab: Lab, path: str) -> dict[str, Any]:
    """The notebook's conversation as the server stores it (``GET /jupyter-ci/conversation``)."""
    query = urllib.parse.urlencode({"path": path})
    request = urllib.request.Request(
        f"{lab.url}jupyter-ci/conversation?{query}",
        headers={"Authorization": f"token {lab.token}"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        stored: dict[str, Any] = json.loads(response.read())
    return stored


def set_theme(page: Any, name: str) -> None:
    """Switch JupyterLab's theme and wait until it applies."""
    command(page, "apputils:change-theme", {"theme": name})
    page.wait_for_function(
        "(name) => document.body.dataset.jpThemeName === name", arg=name, timeout=60_000
    )
    # Lab shows a splash while it changes themes; switching again before it is gone makes Lab
    # itself fail to remove it (a page error that is not ours).
    page.locator("#jupyterlab-splash").wait_for(state="detached", timeout=60_000)


def request_text(request: Any) -> str:
    """Every message of a recorded model request, joined (what the model was sent)."""
    return "\n".join(
        json.dumps(m.get("content")) if not isinstance(m.get("content"), str) else m["content"]
        for m in request.messages
    )


@contextmanager
def fake_ollama(models: list[str]) -> Iterator[str]:
    """An HTTP server that answers Ollama's ``/api/tags`` with ``models``; yields its URL."""
    body = json.dumps({"models": [{"name": name} for name in models]}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path != "/api/tags":
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
