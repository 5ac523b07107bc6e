"""Real JupyterLab and headless Chromium for browser tests, and helpers to drive the page.

Every browser test reuses these: :func:`start_lab` runs ``jupyter lab`` on 127.0.0.1 with a token
in isolated Jupyter directories; :func:`launch_chromium` starts Debian's Chromium through
Playwright (never a downloaded browser); the helpers below open Lab, notebooks and cells.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CHROMIUM = os.environ.get("JUPYTER_CI_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
#: A base URL every JupyterLab of the browser tests is served under (``/prefix/``), as behind a
#: proxy or JupyterHub; ``.ci/run`` runs the JupyterLab-path browser tests once more with it.
BASE_URL_ENV = "JUPYTER_CI_TEST_BASE_URL"


def base_url() -> str:
    """The base URL the browser tests' servers use: ``/`` unless :data:`BASE_URL_ENV` names
    another (normalised to ``/a/b/``)."""
    parts = [part for part in os.environ.get(BASE_URL_ENV, "").split("/") if part]
    return "/" + "".join(f"{part}/" for part in parts)


@dataclass
class Lab:
    """A running JupyterLab: where it listens, its token, its files and its log."""

    url: str
    token: str
    root_dir: Path
    log_path: Path
    process: subprocess.Popen[bytes]

    def workspace_url(self) -> str:
        """A fresh workspace, so no layout from an earlier test is restored."""
        return f"{self.url}lab/workspaces/t{uuid.uuid4().hex[:12]}?reset&token={self.token}"

    def log(self) -> str:
        """The server's log so far (for failure messages)."""
        return self.log_path.read_text(errors="replace")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def start_lab(
    base_dir: Path,
    args: list[str] | None = None,
    env: Mapping[str, str] | None = None,
    app: str = "lab",
) -> Iterator[Lab]:
    """Run ``jupyter lab`` (or, with ``app="notebook"``, Notebook 7's ``jupyter notebook``) in
    ``base_dir`` until the block ends; wait until it answers. It is served under
    :func:`base_url` (``lab.url`` includes it)."""
    root = base_dir / "notebooks"
    root.mkdir(parents=True, exist_ok=True)
    port, token = free_port(), uuid.uuid4().hex
    environment = dict(os.environ)
    for name in ("config", "data", "runtime", "settings", "workspaces"):
        (base_dir / name).mkdir(exist_ok=True)
    environment.update(
        JUPYTER_CONFIG_DIR=str(base_dir / "config"),
        JUPYTER_DATA_DIR=str(base_dir / "data"),
        JUPYTER_RUNTIME_DIR=str(base_dir / "runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(base_dir / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(base_dir / "workspaces"),
    )
    environment.update(env or {})
    # Keep JupyterLab's "get notified about news?" toast away from screenshots and clicks.
    notification = base_dir / "settings" / "@jupyterlab" / "apputils-extension"
    notification.mkdir(parents=True, exist_ok=True)
    (notification / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    command = [
        sys.executable,
        "-m",
        "jupyter",
        app,
        "--no-browser",
        "--allow-root",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        *(
            [
                "--LabApp.news_url=None",
                "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            ]
            if app == "lab"
            else []
        ),
        f"--ServerApp.root_dir={root}",
        f"--ServerApp.base_url={base_url()}",
        *(args or []),
    ]
    log_path = base_dir / f"jupyter-{app}.log"
    with log_path.open("wb") as log:
        # In base_dir: files the server writes in its working directory (jupyter-collaboration's
        # .jupyter_ystore.db) stay out of the checkout.
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=environment, cwd=base_dir
        )
    lab = Lab(f"http://127.0.0.1:{port}{base_url()}", token, root, log_path, process)
    try:
        _wait_until_ready(lab, timeout=60)
        yield lab
    finally:
        stop_process(process)


def stop_process(process: subprocess.Popen[bytes], timeout: float = 20) -> bool:
    """End a server the tests started: SIGTERM, then SIGKILL after ``timeout`` seconds. True if
    it had to be killed (it cleaned up nothing of its own then)."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
        return False
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)
        return True


def _wait_until_ready(lab: Lab, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    status_url = f"{lab.url}api/status?token={lab.token}"
    while time.monotonic() < deadline:
        if lab.process.poll() is not None:
            raise RuntimeError(f"jupyter lab exited early:\n{lab.log()}")
        try:
            with urllib.request.urlopen(status_url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"jupyter lab did not answer within {timeout} s:\n{lab.log()}")


def launch_chromium(playwright: Any) -> Any:
    """Debian's Chromium, headless, with the flags this closed network needs."""
    if not shutil.which(CHROMIUM) and not Path(CHROMIUM).exists():
        raise RuntimeError(
            f"{CHROMIUM} is missing: install it with `apt-get install -y chromium` "
            "(.ci/run does), or deselect browser tests with -m 'not browser'."
        )
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)


# --- driving the page ---------------------------------------------------------------------------


def open_lab(page: Any, lab: Lab) -> None:
    """Open Lab in a fresh workspace and wait until the shell is up."""
    page.goto(lab.workspace_url())
    page.locator("#jp-main-dock-panel").wait_for(state="visible", timeout=60_000)
    page.locator(".jp-Launcher").first.wait_for(state="visible", timeout=60_000)


def search_palette(page: Any, text: str, attempts: int = 3) -> Any:
    """Open the command palette by keyboard and type ``text`` in it; its input's locator.

    The palette closes when it loses the focus: a focus change JupyterLab makes late (a
    notebook settling after it opened) can close it before the text is in, or before it is
    seen open at all. It is opened again then, at most ``attempts`` times.
    """
    palette = page.locator("#command-palette input.lm-CommandPalette-input")
    for attempt in range(attempts):
        page.keyboard.press("Control+Shift+c")
        try:
            palette.wait_for(state="visible", timeout=10_000)
            palette.fill(text, timeout=10_000)
        except Exception:
            if attempt == attempts - 1:
                raise
            continue
        return palette
    raise AssertionError("unreachable")


def run_command(page: Any, label: str) -> None:
    """Run a command by its label through the command palette (as a keyboard user would)."""
    search_palette(page, label)
    item = page.locator("#command-palette .lm-CommandPalette-item", has_text=label).first
    item.wait_for(state="visible")
    item.click()


def new_notebook(page: Any) -> Any:
    """Create a notebook from the launcher and wait for its kernel to be idle."""
    page.locator('.jp-LauncherCard[data-category="Notebook"]').first.click()
    notebook = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)").last
    notebook.wait_for(state="visible", timeout=60_000)
    wait_kernel_idle(page)
    return notebook


def wait_kernel_idle(page: Any, timeout: float = 60_000) -> None:
    """Wait for the status bar to say the kernel is idle (the toolbar says so too early)."""
    page.locator("#jp-main-statusbar", has_text="Idle").wait_for(timeout=timeout)


def run_in_new_cell(page: Any, notebook: Any, source: str) -> Any:
    """Type ``source`` into the notebook's last cell, run it, and return that cell's locator.

    The text is inserted, not typed key by key, so editor auto-closing of brackets cannot
    change it.
    """
    cells = notebook.locator(".jp-Notebook .jp-Cell")
    count = cells.count()
    cell = cells.nth(count - 1)
    editor = cell.locator(".jp-InputArea-editor .cm-content")
    editor.click()
    page.keyboard.insert_text(source)
    page.keyboard.press("Shift+Enter")
    notebook.locator(".jp-Notebook .jp-Cell").nth(count).wait_for(state="attached")
    prompt = cell.locator(".jp-InputArea-prompt")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        text = prompt.inner_text()
        if "[" in text and "*" not in text and text.strip() != "[ ]:":
            return cell
        time.sleep(0.1)
    raise AssertionError(f"cell did not finish: {source!r}")


def screenshot(page: Any, name: str) -> Path:
    """Save a screenshot under test-artifacts/ and return its path."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path
