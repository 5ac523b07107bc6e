"""jupyter-ci behind JupyterHub: two users (DummyAuthenticator), single-user JupyterLab servers
started by SimpleLocalProcessSpawner, configurable-http-proxy in front, jupyter-ci's model given
through ``c.Spawner.environment`` (the scripted model). Each user's server is under
``/user/<name>/``, a non-root base URL.

Skipped unless JupyterHub and configurable-http-proxy are installed (``.ci/run``'s team stage
installs them and removes them again).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from jupyter_ci.testing import ScriptedModelServer

from .chat import stored_conversation
from .conftest import SCRIPTED_KEY, SCRIPTED_MODEL
from .lab import ARTIFACTS
from .team import (
    ALICE,
    BOB,
    Hub,
    HubUser,
    cookie_header,
    handoff_runs_a_generated_cell,
    http_status,
    hub_missing,
    log_in,
    panel_request_stop_and_export,
    query,
    start_hub,
    websocket_status,
)

pytestmark = pytest.mark.skipif(bool(hub_missing()), reason=hub_missing() or "ready")


@pytest.fixture(scope="module")
def hub(
    tmp_path_factory: pytest.TempPathFactory, scripted_server: ScriptedModelServer
) -> Iterator[Hub]:
    """The hub, with both users' servers running; jupyter-ci's settings come from the spawner."""
    base = tmp_path_factory.mktemp("hub")
    environment = {
        "JUPYTER_CI_MODEL": SCRIPTED_MODEL,
        "JUPYTER_CI_API_BASE": scripted_server.base_url,
        "JUPYTER_CI_API_KEY": SCRIPTED_KEY,
    }
    with start_hub(base, environment) as running:
        try:
            yield running
        finally:
            ARTIFACTS.mkdir(exist_ok=True)
            (ARTIFACTS / "jupyterhub.log").write_text(running.log())


@pytest.fixture(scope="module")
def model_lab(hub: Hub) -> HubUser:
    """Alice's server: the Lab the shared browser fixtures (``model_context``) work with."""
    return hub.users[ALICE]


@pytest.fixture
def alice(model_context: Any, hub: Hub) -> Any:
    """A browser context logged in to the hub as Alice."""
    page = model_context.new_page()
    log_in(page, hub, ALICE)
    page.close()
    return model_context


def test_ci_handoff_runs_in_alices_kernel_without_the_key(
    alice: Any, hub: Hub, model: ScriptedModelServer
) -> None:
    printed = handoff_runs_a_generated_cell(alice, hub.users[ALICE], model)
    # Alice's own server ran it; jupyter-ci took its key out before the kernel started.
    assert "user alice" in printed
    assert "key no" in printed


def test_panel_request_stop_and_export_through_the_proxy(
    alice: Any, hub: Hub, model: ScriptedModelServer
) -> None:
    path = panel_request_stop_and_export(alice, hub.users[ALICE], model)
    # Each user's conversations are apart: Bob's server knows nothing of Alice's.
    assert stored_conversation(hub.users[ALICE], path)["messages"]
    assert stored_conversation(hub.users[BOB], path)["messages"] == []


#: Every jupyter-ci HTTP route, as (method, path below the server's URL).
ROUTES = [
    ("GET", "jupyter-ci/status"),
    ("GET", query("jupyter-ci/conversation", path="x.ipynb")),
    ("DELETE", query("jupyter-ci/conversation", path="x.ipynb")),
    ("GET", query("jupyter-ci/conversation/export", path="x.ipynb")),
]


#: An MCP client's first message (Streamable HTTP).
INITIALIZE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "team-test", "version": "1"},
        },
    }
).encode()


def mcp_headers(authorization: str | None) -> dict[str, str]:
    """The headers of an MCP client's POST (with ``Authorization`` when given)."""
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if authorization is not None:
        headers["Authorization"] = authorization
    return headers


def test_bob_is_refused_on_every_jupyter_ci_route_and_the_websocket_of_alices_server(
    chromium: Any, hub: Hub
) -> None:
    alice, bob = hub.users[ALICE], hub.users[BOB]
    ws = f"{alice.url}jupyter-ci/ws"
    # Alice herself is let in (the refusals below are about Bob, not a broken route).
    for method, route in ROUTES:
        status, _ = http_status(
            f"{alice.url}{route}", method, {"Authorization": f"token {alice.token}"}
        )
        assert status in (200, 204), (method, route, status)
    assert websocket_status(ws, {"Authorization": f"token {alice.token}"}) == 101
    # The MCP route: an MCP client's first message, with Alice's token (token or Bearer).
    mcp = f"{alice.url}jupyter-ci/mcp"
    for scheme in ("token", "Bearer"):
        status, _ = http_status(mcp, "POST", mcp_headers(f"{scheme} {alice.token}"), INITIALIZE)
        assert status == 200, (scheme, status)

    # Bob with his API token: 403 everywhere, the websocket included (header or URL token).
    for method, route in ROUTES:
        status, _ = http_status(
            f"{alice.url}{route}", method, {"Authorization": f"token {bob.token}"}
        )
        assert status == 403, (method, route, status)
    assert websocket_status(ws, {"Authorization": f"token {bob.token}"}) == 403
    assert websocket_status(query(ws, token=bob.token)) == 403
    for scheme in ("token", "Bearer"):
        status, _ = http_status(mcp, "POST", mcp_headers(f"{scheme} {bob.token}"), INITIALIZE)
        assert status == 403, (scheme, status)

    # Bob in his browser, logged in to the hub: every cookie he holds gets 403 as well.
    context = chromium.new_context()
    try:
        page = context.new_page()
        log_in(page, hub, BOB)
        cookies = {"Cookie": cookie_header(context)}
        for method, route in ROUTES:
            status, _ = http_status(f"{alice.url}{route}", method, cookies)
            assert status == 403, (method, route, status)
        assert websocket_status(ws, cookies) == 403
        status, _ = http_status(mcp, "POST", {**mcp_headers(None), **cookies}, INITIALIZE)
        assert status == 403, status
        # Opening Alice's JupyterLab: the hub asks whether Bob may, and refuses him.
        response = page.goto(f"{alice.url}lab")
        assert response is not None
        assert response.status == 403, response.url
    finally:
        context.close()
