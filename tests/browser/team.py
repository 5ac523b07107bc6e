"""Where teams run Jupyter: a JupyterHub with two users, and a JupyterLab whose kernels come from a
kernel gateway, each with jupyter-ci and the scripted model; helpers shared by their tests.

Neither JupyterHub, configurable-http-proxy nor jupyter_kernel_gateway is a dependency of
jupyter-ci: ``.ci/run``'s team stage installs them (the proxy from npm), runs
``tests/browser/test_team_*.py`` and removes them again. Elsewhere those tests are skipped, saying
what is missing.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from functools import partial
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from playwright.sync_api import TimeoutError as PlaywrightTimeout

from jupyter_ci.testing import Reply

from .chat import PANEL, ask, by_testid, conversation_text, messages, open_chat
from .chat import wait_run_state as wait_run
from .lab import Lab, free_port, start_lab, stop_process
from .notebooks import (
    TERMINAL,
    cells,
    dump,
    generated,
    open_lab_app,
    open_notebook,
    run_all,
    text_of,
    wait_for_status,
    wait_until,
    write_notebook,
)

#: The proxy JupyterHub starts: found on PATH (the team stage puts npm's bin folder there), or
#: named by this variable.
CHP = os.environ.get("JUPYTER_CI_CHP", "configurable-http-proxy")
#: DummyAuthenticator's one password for every user (a test hub on 127.0.0.1 only).
HUB_PASSWORD = "team-test-password"
#: The hub's users.
ALICE, BOB = "alice", "bob"
#: Where the team stage comes from, for skip reasons.
STAGE = ".ci/run's team stage installs it"
#: Set by that stage: there a missing piece fails the tests instead of skipping them.
IN_TEAM_STAGE = os.environ.get("JUPYTER_CI_TEAM_STAGE", "") == "1"


def hub_missing() -> str:
    """Why the hub tests cannot run here ("" when they can, or in the team stage)."""
    if IN_TEAM_STAGE:
        return ""
    if find_spec("jupyterhub") is None:
        return f"JupyterHub is not installed ({STAGE}: pip install jupyterhub)"
    if shutil.which(CHP) is None:
        return (
            f"configurable-http-proxy is not on PATH ({STAGE}: "
            "npm install configurable-http-proxy; or set JUPYTER_CI_CHP)"
        )
    return ""


def gateway_missing() -> str:
    """Why the gateway tests cannot run here ("" when they can, or in the team stage)."""
    if IN_TEAM_STAGE:
        return ""
    if find_spec("kernel_gateway") is None:
        return (
            f"jupyter_kernel_gateway is not installed ({STAGE}: pip install jupyter_kernel_gateway)"
        )
    return ""


# --- JupyterHub ---------------------------------------------------------------------------------


@dataclass
class HubUser(Lab):
    """One user's single-user server, reached through the hub's proxy (``url`` ends in
    ``/user/<name>/``). ``token`` is an API token of that user's (for REST calls); browsers log
    in through the hub's login form instead, as people do."""

    name: str = ""

    def workspace_url(self) -> str:
        """A fresh workspace; the browser is already logged in (no token in the URL)."""
        return f"{self.url}lab/workspaces/t{uuid.uuid4().hex[:12]}?reset"


@dataclass
class Hub:
    """A running JupyterHub: its public URL (the proxy), an admin service token and its users."""

    url: str
    api_token: str
    base: Path
    log_path: Path
    process: subprocess.Popen[bytes]
    users: dict[str, HubUser] = field(default_factory=dict)

    def api(self, method: str, path: str, body: Any = None, token: str | None = None) -> Any:
        """Call the hub's REST API (``/hub/api/<path>``) and return its JSON reply (or None)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.url}hub/api/{path}",
            data=data,
            method=method,
            headers={"Authorization": f"token {token or self.api_token}"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            text = response.read()
        return json.loads(text) if text else None

    def log(self) -> str:
        """The hub's log, with its proxy's and the single-user servers' (they share it)."""
        return self.log_path.read_text(errors="replace")


def _hub_config(
    base: Path,
    *,
    port: int,
    hub_port: int,
    proxy_api_port: int,
    api_token: str,
    users: list[str],
    environment: Mapping[str, str],
) -> str:
    """jupyterhub_config.py for a hub on 127.0.0.1 whose users run JupyterLab as local processes
    (homes under ``base``), with jupyter-ci's model settings given through the spawner."""
    singleuser = Path(sys.executable).with_name("jupyterhub-singleuser")
    settings = {
        "port": port,
        "hub_port": hub_port,
        "proxy_api": f"http://127.0.0.1:{proxy_api_port}",
        "chp": shutil.which(CHP) or CHP,
        "homes": str(base / "homes" / "{username}"),
        "db": f"sqlite:///{base / 'jupyterhub.sqlite'}",
        "cookie_secret": str(base / "jupyterhub_cookie_secret"),
        "pid_file": str(base / "proxy.pid"),
        "password": HUB_PASSWORD,
        "users": users,
        "token": api_token,
        "cmd": [str(singleuser)],
        "environment": dict(environment),
    }
    return f"""# Written by tests/browser/team.py
settings = {json.dumps(settings, indent=1)}
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = settings["port"]
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = settings["hub_port"]
c.JupyterHub.db_url = settings["db"]
c.JupyterHub.cookie_secret_file = settings["cookie_secret"]
c.ConfigurableHTTPProxy.api_url = settings["proxy_api"]
c.ConfigurableHTTPProxy.command = [settings["chp"]]
c.ConfigurableHTTPProxy.pid_file = settings["pid_file"]
c.JupyterHub.authenticator_class = "dummy"
c.DummyAuthenticator.password = settings["password"]
c.Authenticator.allowed_users = set(settings["users"])
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = settings["homes"]
c.Spawner.cmd = settings["cmd"]
c.Spawner.default_url = "/lab"
c.Spawner.args = [
    "--allow-root",
    "--LabApp.news_url=None",
    "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    "--LabApp.expose_app_in_browser=True",
]
# jupyter-ci's model: the settings every user's server gets (the README's "For a team").
c.Spawner.environment = settings["environment"]
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120
c.JupyterHub.services = [{{"name": "ci-tests", "api_token": settings["token"]}}]
c.JupyterHub.load_roles = [
    {{
        "name": "ci-tests",
        "services": ["ci-tests"],
        "scopes": ["admin:users", "admin:servers", "tokens", "list:users"],
    }}
]
"""


@contextmanager
def start_hub(base: Path, environment: Mapping[str, str]) -> Iterator[Hub]:
    """Run JupyterHub with :data:`ALICE` and :data:`BOB` until the block ends; start both
    users' servers and give each an API token. ``environment`` is ``c.Spawner.environment``."""
    port, hub_port, proxy_api_port = free_port(), free_port(), free_port()
    api_token = uuid.uuid4().hex
    users = [ALICE, BOB]
    for name in users:
        # Keep JupyterLab's "get notified about news?" toast away, as start_lab does.
        settings = base / "homes" / name / ".jupyter" / "lab" / "user-settings"
        notification = settings / "@jupyterlab" / "apputils-extension"
        notification.mkdir(parents=True, exist_ok=True)
        (notification / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    config = base / "jupyterhub_config.py"
    config.write_text(
        _hub_config(
            base,
            port=port,
            hub_port=hub_port,
            proxy_api_port=proxy_api_port,
            api_token=api_token,
            users=users,
            environment=environment,
        )
    )
    log_path = base / "jupyterhub.log"
    command = [sys.executable, "-m", "jupyterhub", "-f", str(config)]
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, cwd=base, start_new_session=True
        )
    hub = Hub(f"http://127.0.0.1:{port}/", api_token, base, log_path, process)
    try:
        _wait_for(lambda: _answers(f"{hub.url}hub/api/"), 90, "JupyterHub to answer", hub)
        for name in users:  # both spawns at once: each server takes seconds to start
            hub.api("POST", f"users/{name}/server")
        for name in users:
            token = hub.api("POST", f"users/{name}/tokens", {"note": "jupyter-ci tests"})["token"]
            user = HubUser(
                url=f"{hub.url}user/{name}/",
                token=token,
                root_dir=base / "homes" / name,
                log_path=log_path,
                process=process,
                name=name,
            )
            _wait_for(
                partial(_answers, f"{user.url}api/status", token),
                120,
                f"{name}'s server to answer through the proxy",
                hub,
            )
            hub.users[name] = user
        yield hub
    finally:
        for name in hub.users:
            with suppress(OSError):
                hub.api("DELETE", f"users/{name}/server")
        if stop_process(process, timeout=30):
            _stop_proxy(base / "proxy.pid")


def _stop_proxy(pid_file: Path) -> None:
    """End the proxy a killed hub left running (a hub that stops normally ends it itself)."""
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return
    with suppress(OSError):
        os.kill(pid, 15)


def _answers(url: str, token: str | None = None) -> bool:
    headers = {"Authorization": f"token {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=5):
            return True
    except (OSError, urllib.error.HTTPError):
        return False


def _wait_for(check: Any, timeout: float, what: str, hub: Hub) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if hub.process.poll() is not None:
            raise RuntimeError(f"JupyterHub exited early:\n{hub.log()[-6000:]}")
        if check():
            return
        time.sleep(0.3)
    raise RuntimeError(f"waiting for {what} took over {timeout} s:\n{hub.log()[-6000:]}")


def log_in(page: Any, hub: Hub, name: str) -> None:
    """Log ``name`` in through the hub's login form, as a person does; wait for JupyterLab."""
    page.goto(f"{hub.url}hub/login")
    page.locator("input#username_input").fill(name)
    page.locator("input#password_input").fill(HUB_PASSWORD)
    page.locator("#login_submit").click()
    page.wait_for_url(f"**/user/{name}/lab**", timeout=60_000)


# --- a kernel gateway ---------------------------------------------------------------------------


@contextmanager
def start_gateway(base: Path) -> Iterator[tuple[str, str]]:
    """Run ``jupyter kernelgateway`` on 127.0.0.1 in its own folder until the block ends; yield
    its URL and token."""
    port, token = free_port(), uuid.uuid4().hex
    root = base / "gateway"
    root.mkdir(parents=True, exist_ok=True)
    environment = dict(os.environ)
    environment.update(
        JUPYTER_RUNTIME_DIR=str(root / "runtime"), JUPYTER_CONFIG_DIR=str(root / "config")
    )
    # The gateway is the kernels' host: a key of jupyter-ci's must never be in its environment.
    environment.pop("JUPYTER_CI_API_KEY", None)
    # Its kernels say where they run (WHERE_CELL prints it).
    environment["JUPYTER_CI_TEST_KERNEL_HOST"] = "gateway"
    command = [
        sys.executable,
        "-m",
        "jupyter",
        "kernelgateway",
        "--KernelGatewayApp.ip=127.0.0.1",
        f"--KernelGatewayApp.port={port}",
        "--KernelGatewayApp.port_retries=0",
        f"--KernelGatewayApp.auth_token={token}",
        # JupyterLab lists the gateway's kernels (its running-kernels panel, its sessions).
        "--JupyterWebsocketPersonality.list_kernels=True",
        # A gateway's kernels get PATH and the variables listed here, not its whole environment.
        "--KernelGatewayApp.env_process_whitelist=JUPYTER_CI_TEST_KERNEL_HOST",
    ]
    log_path = base / "kernelgateway.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=environment, cwd=root
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while not _answers(f"{url}/api", token):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the kernel gateway did not start:\n{log_path.read_text()}")
            time.sleep(0.2)
        _warm_up(url, token)
        yield url, token
    finally:
        stop_process(process)


def _warm_up(url: str, token: str, timeout: float = 90) -> None:
    """Start one kernel on the gateway, wait for its answer to a ``kernel_info_request`` (over
    its websocket, as a frontend asks), and shut it down.

    A first kernel start on a busy machine takes seconds; JupyterLab meanwhile connects to the
    kernel twice with one session id, and once (of several runs) the gateway kept the
    connection the page had given up, so the page never saw the kernel idle. Warm, the tests'
    kernels start in a fraction of a second, as they do on the second start.
    """
    headers = {"Authorization": f"token {token}"}
    create = urllib.request.Request(
        f"{url}/api/kernels", data=b'{"name": "python3"}', method="POST", headers=headers
    )
    with urllib.request.urlopen(create, timeout=60) as response:
        kernel = f"{url}/api/kernels/{json.loads(response.read())['id']}"
    try:
        channels = "ws" + kernel.removeprefix("http") + "/channels"
        # In a thread of its own: the tests' thread runs Playwright's event loop.
        with ThreadPoolExecutor(1) as thread:
            waited = asyncio.wait_for(_kernel_info(channels, headers), timeout)
            thread.submit(asyncio.run, waited).result()
    except TimeoutError:
        message = f"the gateway's first kernel did not answer within {timeout} s"
        raise RuntimeError(message) from None
    finally:
        delete = urllib.request.Request(kernel, method="DELETE", headers=headers)
        with suppress(OSError):
            urllib.request.urlopen(delete, timeout=60).close()


async def _kernel_info(channels: str, headers: dict[str, str]) -> None:
    """Ask the kernel at ``channels`` (its websocket) for its info until it answers."""
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    connection = await websocket_connect(HTTPRequest(channels, headers=headers))
    try:
        session = uuid.uuid4().hex
        while True:
            msg_id = uuid.uuid4().hex
            header = {
                "msg_id": msg_id,
                "msg_type": "kernel_info_request",
                "session": session,
                "username": "",
                "date": "",
                "version": "5.3",
            }
            message = {"header": header, "parent_header": {}, "metadata": {}, "content": {}}
            await connection.write_message(json.dumps({**message, "channel": "shell"}))
            # A kernel still starting may miss the request: ask again after a while.
            with suppress(TimeoutError):
                while True:
                    text = await asyncio.wait_for(connection.read_message(), 5)
                    if text is None:
                        raise RuntimeError("the gateway closed the kernel's websocket")
                    reply = json.loads(text)
                    if reply.get("parent_header", {}).get("msg_id") == msg_id and (
                        reply.get("msg_type") == "kernel_info_reply"
                    ):
                        return
    finally:
        connection.close()


@contextmanager
def start_gateway_lab(
    base: Path, args: list[str], env: Mapping[str, str] | None = None
) -> Iterator[tuple[Lab, Path]]:
    """A kernel gateway and a JupyterLab whose kernels come from it (``--gateway-url``); yield the
    Lab and the gateway's log."""
    with start_gateway(base) as (url, token):
        lab_args = [f"--gateway-url={url}", f"--GatewayClient.auth_token={token}", *args]
        with start_lab(base, args=lab_args, env=env) as lab:
            yield lab, base / "kernelgateway.log"


def rest(lab: Lab, method: str, path: str) -> Any:
    """Call the Jupyter server's REST API (``path`` below ``lab.url``) with the Lab's token."""
    request = urllib.request.Request(
        f"{lab.url}{path}", method=method, headers={"Authorization": f"token {lab.token}"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        text = response.read()
    return json.loads(text) if text else None


def query(url: str, **params: str) -> str:
    """``url`` with a query string."""
    return f"{url}?{urllib.parse.urlencode(params)}"


# --- what is checked in each place --------------------------------------------------------------

#: A generated cell that says where it runs: the user the kernel's server runs for (JupyterHub
#: sets JUPYTERHUB_USER), the gateway's mark, and whether jupyter-ci's key reached the kernel.
WHERE_CELL = (
    "import os\n"
    "print('user', os.environ.get('JUPYTERHUB_USER', '-'),"
    " 'host', os.environ.get('JUPYTER_CI_TEST_KERNEL_HOST', '-'),"
    " 'key', 'yes' if os.environ.get('JUPYTER_CI_API_KEY') else 'no')\n"
    "print('x is', 21 * 2)"
)
#: A cell that says when it has begun, then runs for up to 60 s (unless interrupted).
LONG_CELL = "import time\nprint('started', flush=True)\nfor _ in range(600):\n    time.sleep(0.1)"


def handoff_runs_a_generated_cell(context: Any, lab: Lab, model: Any) -> str:
    """``%%ci`` handed to the tab, its generated cell run in the notebook's kernel; returns what
    that cell printed."""
    model.set_script([Reply.code(WHERE_CELL), Reply.text("x is 42.")])
    path = write_notebook(lab, ["%load_ext jupyter_ci", "%%ci compute x"])
    page = context.new_page()
    open_lab_app(page, lab)
    open_team_notebook(page, path)
    run_all(page, path)
    status = wait_for_status(page, path, 1, TERMINAL)
    assert status["state"] == "done", dump(page, path)
    all_cells = cells(page, path)
    made = generated(all_cells)
    assert [cell["source"] for cell in made] == [WHERE_CELL], dump(page, path)
    printed = text_of(made[0]["outputs"])
    assert "x is 42" in printed, dump(page, path)
    assert len(model.chat_requests) == 2
    assert context.jupyter_ci_errors == []
    return printed


def open_team_notebook(page: Any, path: str) -> None:
    """:func:`open_notebook`, reconnecting the kernel once if it says nothing for 20 s.

    Under load a kernel gateway can route a new kernel's messages to a dead connection: the
    page's first kernel websocket, which JupyterLab closes and opens again at once, reaches
    jupyter_server's gateway relay twice with one session id, and the kernel gateway, taking
    the closed one for the live one ("Replacing stale connection"), sends everything there.
    The page's kernel is then connected and silent for good (reproduced 3 times in 5 under
    load, with and without jupyter-ci's changes to the server's kernel websockets; never the
    local kernels' relay). A user reconnects the kernel; so does this, once."""
    try:
        open_notebook(page, path, kernel_timeout=20_000)
        return
    except PlaywrightTimeout:
        page.evaluate(
            "(path) => { const w = Array.from(window.jupyterapp.shell.widgets('main'))"
            ".find(w => w.context && w.context.path === path);"
            " return w.sessionContext.session.kernel.reconnect(); }",
            path,
        )
    open_notebook(page, path)


def long_cell_started_from_the_panel(
    context: Any, lab: Lab, model: Any, then: list[Reply]
) -> tuple[Any, str]:
    """A new notebook open in a new page with the panel, a request asked there whose cell
    (:data:`LONG_CELL`) has started in the kernel; the model answers with ``then`` afterwards.
    Returns the page and the notebook's path."""
    model.set_script([Reply.code(LONG_CELL, prose="This takes a while."), *then])
    path = write_notebook(lab, ["c = 3"])
    page = context.new_page()
    open_lab_app(page, lab)
    open_team_notebook(page, path)
    open_chat(page)
    ask(page, "wait a minute")
    wait_until(
        lambda: any("started" in text_of(c["outputs"]) for c in cells(page, path)),
        90,
        "the long cell to start",
        lambda: dump(page, path),
    )
    return page, path


def panel_request_stop_and_export(context: Any, lab: Lab, model: Any) -> str:
    """From the panel: a request whose long cell Stop interrupts in the kernel, then a request
    that runs to its end, then Export; returns the notebook's path."""
    then = [Reply.code("print('after stop', 6 * 7)"), Reply.text("It printed 42.")]
    page, path = long_cell_started_from_the_panel(context, lab, model, then)
    terminal = ("done", "failed", "stopped")
    stop = page.locator(by_testid("jupyter-ci-stop"))
    page.locator(f"{PANEL} [data-testid='jupyter-ci-step']", has_text="Running").wait_for()
    stop.click()
    assert wait_run(page, terminal, timeout=60) == "stopped", conversation_text(page)
    assert "KeyboardInterrupt" in text_of(cells(page, path)[1]["outputs"]), dump(page, path)

    page.locator(by_testid("jupyter-ci-send")).wait_for(timeout=30_000)
    ask(page, "print six times seven")
    wait_until(lambda: page.locator(by_testid("jupyter-ci-run")).count() == 2, 30, "a new run")
    assert wait_run(page, terminal) == "done", conversation_text(page)
    # (New cells go below the active cell: find it by its code.)
    printed = [text_of(c["outputs"]) for c in cells(page, path) if "6 * 7" in c["source"]]
    assert printed == ["after stop 42\n"], dump(page, path)
    assert messages(page, "assistant")[-1] == "It printed 42."

    with page.expect_download(timeout=30_000) as download:
        page.locator(by_testid("jupyter-ci-export")).click()
    assert download.value.suggested_filename == f"{path[:-6]}-jupyter-ci.md"
    exported = Path(download.value.path()).read_text()
    for expected in ("wait a minute", "print six times seven", "It printed 42.", "6 * 7"):
        assert expected in exported, exported
    assert context.jupyter_ci_errors == []
    return path


# --- raw HTTP, as a client that follows no redirect sees it -------------------------------------


def http_status(
    url: str,
    method: str = "GET",
    headers: Mapping[str, str] | None = None,
    body: bytes | None = None,
) -> tuple[int, str]:
    """The status of one request to ``url`` and its ``Location`` header (no redirect followed)."""
    import http.client

    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.netloc, timeout=30)
    try:
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        connection.request(method, target, body=body, headers=dict(headers or {}))
        response = connection.getresponse()
        response.read()
        return response.status, response.getheader("Location") or ""
    finally:
        connection.close()


def websocket_status(url: str, headers: Mapping[str, str] | None = None) -> int:
    """The status of a websocket handshake with ``url`` (http://...): 101 when it is accepted."""
    import base64

    upgrade = {
        "Connection": "Upgrade",
        "Upgrade": "websocket",
        "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": base64.b64encode(os.urandom(16)).decode(),
        **dict(headers or {}),
    }
    return http_status(url, "GET", upgrade)[0]


def cookie_header(context: Any) -> str:
    """Every cookie the browser context holds, whatever its path, as one ``Cookie`` header."""
    return "; ".join(f"{c['name']}={c['value']}" for c in context.cookies())
