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
from .notebooks import command, wait_until

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
        ".map(e => Array.from(e.children).filter(c => !c.matches('.jp-jupyter-ci-author'))"
        ".map(c => c.innerText).join('\\n').trim() || e.innerText.trim())",
        [PANEL, role],
    )
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
