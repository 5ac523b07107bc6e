"""Cases that failed under attack, through a real server: each tab acts only on its own runs, no
tab takes another's place, run lists carry no one else's requests, every bad message gets an
answer, and no piece of the key reaches a tab or the database."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from jupyter_ci.server import hub, ws
from jupyter_ci.server.app import JupyterCIServer
from jupyter_ci.server.hub import PROMPT_SHOWN
from jupyter_ci.server.runs import MAX_PROMPT_CHARS
from jupyter_ci.testing import Fault, Reply, ScriptedModelServer
from jupyter_ci.testing.lab_tab import ScriptedTab, code_cell

from .rawsocket import RawSocket
from .support import finished, start_request

TabFactory = Callable[..., ScriptedTab]
KernelStarter = Callable[[], Awaitable[str]]

LONG = "import time\nprint('started', flush=True)\ntime.sleep(600)"
#: A key shaped like a real one (random letters: no piece of it is an English word).
KEY = "sk-proj-q7RwX2vLm9TzB4nKc8YpD1sFh6GjA3uE5oWi0eZx"


@pytest.fixture
def server_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """jupyter-ci's key in the server's environment (this module's own)."""
    monkeypatch.setenv("JUPYTER_CI_API_KEY", KEY)
    return KEY


async def _running(
    model_server: ScriptedModelServer, start_kernel: KernelStarter, tab_factory: TabFactory
) -> tuple[ScriptedTab, str, str]:
    """A tab with a run of a long cell going (the kernel has begun the cell)."""
    model_server.set_script([Reply.code(LONG), Reply.text("never")])
    kernel_id = await start_kernel()
    owner = tab_factory()
    owner.open_notebook("a.ipynb", kernel_id, [code_cell("x = 1", "c0")])
    await owner.connect()
    reply = await owner.request(start_request("a.ipynb", kernel_id, "wait " + "a" * 500))
    await owner.wait_until(lambda: len(owner.started_cells) == 1)
    return owner, kernel_id, str(reply["run_id"])


async def test_a_tab_acts_only_on_its_own_runs_and_cannot_take_another_tabs_place(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
) -> None:
    owner, _, run_id = await _running(model_server, start_kernel, tab_factory)
    other = tab_factory()  # another tab of the same user, with no notebook open
    hello = await other.connect()
    assert hello is not None
    # It sees that a run is going, not what was asked.
    [info] = hello["runs"]
    assert (info["run_id"], info["prompt"]) == (run_id, "")
    for message in (
        {"request": "stop_run", "run_id": run_id},
        {"request": "replay", "run_id": run_id, "after_seq": 0},
        {"request": "review", "run_id": run_id, "cell_id": "c0", "decision": "run", "source": None},
    ):
        refused = await other.request(message)
        assert refused["ok"] is False, message
        assert refused["error"]["code"] == "not_your_run", message
    # Saying hello as the owner (its client id) is refused: the run's calls stay with the owner.
    thief = tab_factory(client_id=owner.client_id)
    taken = await thief.connect()
    assert taken is not None
    assert (taken["ok"], taken["error"]["code"]) == (False, "client_taken")
    # The owner, reconnecting with its secret, goes on and stops its own run.
    await owner.disconnect()
    again = await owner.connect()
    assert again is not None
    assert again["ok"] is True, again
    stopped = await owner.request({"request": "stop_run", "run_id": run_id})
    assert stopped["ok"] is True
    end = await owner.wait_for_event(finished, run_id, timeout=60)
    assert (end["state"], end["reason"]) == ("stopped", "user")
    assert not any(m.get("method") == "run_cell" for m in thief.received)


async def test_run_lists_carry_a_requests_start_only_to_tabs_of_its_notebook(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
) -> None:
    owner, kernel_id, run_id = await _running(model_server, start_kernel, tab_factory)
    same = tab_factory()
    same.open_notebook("a.ipynb", kernel_id)
    elsewhere = tab_factory()
    for tab in (same, elsewhere):
        await tab.connect()
    await owner.request({"request": "stop_run", "run_id": run_id})
    await owner.wait_for_event(finished, run_id, timeout=60)

    def notices(tab: ScriptedTab) -> list[dict[str, Any]]:
        return [m for m in tab.received if m.get("notice") == "runs" and m["runs"]]

    await same.wait_until(lambda: bool(notices(same)))
    await elsewhere.wait_until(lambda: bool(notices(elsewhere)))
    seen = {info["prompt"] for notice in notices(same) for info in notice["runs"]}
    assert seen == {("wait " + "a" * 500)[:PROMPT_SHOWN]}
    assert {info["prompt"] for n in notices(elsewhere) for info in n["runs"]} == {""}
    # A request longer than any model's context is refused with what to do, not stored.
    long = await owner.request(start_request("a.ipynb", kernel_id, "x" * (MAX_PROMPT_CHARS + 1)))
    assert (long["ok"], long["error"]["code"]) == (False, "prompt_too_long")
    assert "Attach the data as a file" in long["error"]["hint"]


async def test_every_bad_message_gets_an_answer_and_the_socket_goes_on(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
) -> None:
    model_server.set_script([Reply.text("Nothing to run.")])
    kernel_id = await start_kernel()
    tab = tab_factory()
    tab.open_notebook("a.ipynb", kernel_id)
    await tab.connect()
    # JSON nested 100,000 deep: an error notice, not a silent RecursionError in the log.
    start = len(tab.received)
    tab.send_raw("[" * 100_000 + "]" * 100_000)
    notice = await tab.wait_for(lambda m: m.get("notice") == "error", start=start)
    assert notice["error"]["code"] == "bad_message"
    assert "nested too deeply" in notice["error"]["message"]
    # An attachment path with a NUL character: the preview and the run answer, saying so.
    request = start_request("a.ipynb", kernel_id, "look", attachments=["data\x00.csv"])
    preview = await tab.request(
        {
            "request": "preview",
            "notebook_path": "a.ipynb",
            "kernel_id": kernel_id,
            "prompt": "look",
            "options": {},
            "anchor_cell_id": None,
            "attachments": ["data\x00.csv"],
        }
    )
    assert preview["ok"] is True, preview
    shown = json.dumps(preview["preview"]["messages"])
    assert "is not a file name (it holds a NUL character)" in shown
    started = await tab.request(request)
    assert started["ok"] is True, started
    end = await tab.wait_for_event(finished, started["run_id"], timeout=60)
    assert end["state"] == "done"


async def test_no_piece_of_the_key_reaches_a_tab_or_the_database(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
    tmp_path: Path,
) -> None:
    echoes = [KEY[4:-4], KEY.upper(), KEY[::-1]]
    model_server.set_script(
        [Reply.fail(Fault.auth(message=f"Incorrect API key provided: {echo}.")) for echo in echoes]
    )
    kernel_id = await start_kernel()
    tab = tab_factory()
    tab.open_notebook("a.ipynb", kernel_id)
    await tab.connect()
    for echo in echoes:
        reply = await tab.request(start_request("a.ipynb", kernel_id, "hello"))
        end = await tab.wait_for_event(finished, reply["run_id"], timeout=60)
        assert (end["state"], end["reason"]) == ("failed", "model_error"), end["error"]
        assert "Incorrect API key provided: [key]" in end["error"]["message"], echo
    await app.store.close()  # everything written, so the file holds all there is
    sent = json.dumps(tab.received).lower()
    stored = (tmp_path / "conversations.sqlite").read_bytes().decode("utf-8", "replace").lower()
    for start in range(len(KEY) - 5):
        piece = KEY[start : start + 6].lower()
        for text, where in ((sent, "sent to the tab"), (stored, "stored")):
            assert piece not in text, (piece, where)
            assert piece[::-1] not in text, (piece[::-1], where)


def _hello(client_id: str, secret: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {
        "request": "hello",
        "client_id": client_id,
        "protocol_version": 1,
        "notebook_paths": [],
    }
    if secret is not None:
        message["client_secret"] = secret
    return message


async def _login_cookie(jp_fetch: Any) -> str:
    """The login cookie Jupyter sets for a token-authenticated request: with it, every
    connection is the same user (as a browser's tabs are)."""
    response = await jp_fetch("api", "status")
    cookies = [value.split(";")[0] for value in response.headers.get_list("Set-Cookie")]
    assert cookies, "the server set no login cookie"
    return "; ".join(cookies)


async def test_hello_floods_are_bounded_per_connection_and_per_user(
    app: JupyterCIServer, tab_factory: TabFactory, jp_fetch: Any
) -> None:
    cookie = await _login_cookie(jp_fetch)
    flood = tab_factory(cookie=cookie)
    assert (await flood.connect() or {}).get("ok") is True
    for n in range(hub.HELLOS_PER_CONNECTION - 1):
        reply = await flood.request(_hello(f"flood-a-{n:08d}"))
        assert reply["ok"] is True, reply
    refused = await flood.request(_hello("flood-a-too-many"))
    assert (refused["ok"], refused["error"]["code"]) == (False, "too_many_hellos")
    await flood.wait_until(lambda: flood.close_code is not None)
    assert flood.close_code == 1008
    assert "hello at most" in str(flood.close_reason)
    # New client ids of one user: a minute's worth, then a clear refusal.
    accepted = hub.HELLOS_PER_CONNECTION
    refusal: dict[str, Any] = {}
    for attempt in range(hub.NEW_CLIENTS_PER_MINUTE):
        tab = tab_factory(cookie=cookie)
        await tab.connect(hello=False)
        for n in range(hub.HELLOS_PER_CONNECTION):
            reply = await tab.request(_hello(f"flood-{attempt}-{n:08d}"))
            if not reply["ok"]:
                refusal = reply
                break
            accepted += 1
        await tab.disconnect()
        if refusal:
            break
    assert accepted == hub.NEW_CLIENTS_PER_MINUTE
    assert refusal["error"]["code"] == "too_many_clients", refusal
    assert refusal["error"]["message"] == (
        f"Too many new jupyter-ci tabs: at most {hub.NEW_CLIENTS_PER_MINUTE} a minute per user."
    )
    assert refusal["error"]["hint"] == "Wait a minute, then reload the page."


async def test_a_flood_of_new_client_ids_cannot_evict_a_tab_that_holds_a_run(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The server remembers a bounded number of client ids (here 30, not 10,000, to keep the
    # test short), and the flood's rate limits are lifted: only the eviction rule is tested.
    monkeypatch.setattr(hub, "KNOWN_CLIENTS", 30)
    monkeypatch.setattr(hub, "NEW_CLIENTS_PER_MINUTE", 10**6)
    monkeypatch.setattr(hub, "HELLOS_PER_CONNECTION", 10**6)
    owner, _, run_id = await _running(model_server, start_kernel, tab_factory)
    flood = tab_factory()
    await flood.connect()
    for n in range(3 * 30 + 1):
        reply = await flood.request(_hello(f"flood-{n:08d}"))
        assert reply["ok"] is True, reply
    # The owner's id (every tab sees it in the run list) is still bound to its secret.
    thief = tab_factory(client_id=owner.client_id)
    taken = await thief.connect()
    assert taken is not None
    assert (taken["ok"], taken["error"]["code"]) == (False, "client_taken")
    # The owner, even after its connection dropped, is still itself and stops its run.
    await owner.disconnect()
    again = await owner.connect()
    assert again is not None
    assert again["ok"] is True
    stopped = await owner.request({"request": "stop_run", "run_id": run_id})
    assert stopped["ok"] is True
    end = await owner.wait_for_event(finished, run_id, timeout=60)
    assert (end["state"], end["reason"]) == ("stopped", "user")
    assert not any(m.get("method") for m in thief.received)


async def test_a_client_that_stops_reading_is_closed_and_can_reconnect_and_replay(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A run with 20 kB of events (the model's prose), asked for again and again by a client
    # that never reads: without a cap its queued replies grow the server without bound.
    monkeypatch.setattr(ws, "MAX_QUEUED_BYTES", 2 * 1024 * 1024)
    model_server.set_script([Reply.text(" ".join(f"{n:04d}" + "x" * 95 for n in range(200)))])
    kernel_id = await start_kernel()
    owner = tab_factory()
    owner.open_notebook("a.ipynb", kernel_id)
    await owner.connect()
    started = await owner.request(start_request("a.ipynb", kernel_id, "talk"))
    run_id = started["run_id"]
    end = await owner.wait_for_event(finished, run_id, timeout=60)
    assert end["state"] == "done", end["error"]

    gone = asyncio.Event()
    disconnected = app.hub.on_disconnected

    def on_disconnected(client_id: str) -> None:
        if client_id == "slow-reader-0001":
            gone.set()
        if disconnected is not None:
            disconnected(client_id)

    monkeypatch.setattr(app.hub, "on_disconnected", on_disconnected)
    slow = await RawSocket.connect(owner.ws_url, owner.token)
    await slow.send(
        {**_hello("slow-reader-0001"), "notebook_paths": ["a.ipynb"], "request_id": "hello"}
    )
    secret = ""
    while not secret:
        opcode, raw = await slow.read()
        assert opcode in (1, 9), (opcode, raw)  # text, or the server's ping
        if opcode == 1:
            secret = json.loads(raw).get("client_secret", "")
    replays = 2_000  # 40 MB of replies asked for
    for n in range(replays):
        await slow.send(
            {"request": "replay", "request_id": f"r{n}", "run_id": run_id, "after_seq": 0}
        )
    await asyncio.wait_for(gone.wait(), 60)
    # What reached the client before the server closed it: about the cap, not 40 MB.
    received, closing = 0, b""
    while True:
        opcode, payload = await asyncio.wait_for(slow.read(), 60)
        if opcode in (-1, 8):
            closing = payload
            break
        received += len(payload)
    slow.close()
    assert received < 8 * 1024 * 1024, received
    code = int.from_bytes(closing[:2], "big")
    assert (code, closing[2:].decode()) == (1008, ws.TOO_SLOW)
    # The client comes back, with its secret, and gets what it asked for.
    again = tab_factory(client_id="slow-reader-0001")
    again.client_secret = secret
    again.open_notebook("a.ipynb", kernel_id)
    hello = await again.connect()
    assert hello is not None
    assert hello["ok"] is True
    replay = await again.request({"request": "replay", "run_id": run_id, "after_seq": 0})
    assert replay["ok"] is True
    await again.wait_for_event(finished, run_id, timeout=30)


async def test_a_notebook_path_has_one_form_wherever_it_enters(
    app: JupyterCIServer,
    model_server: ScriptedModelServer,
    start_kernel: KernelStarter,
    tab_factory: TabFactory,
    jp_fetch: Any,
) -> None:
    model_server.set_script([Reply.text("Hello.")])
    kernel_id = await start_kernel()
    tab = tab_factory()
    tab.open_notebook("sub/a.ipynb", kernel_id)
    await tab.connect()
    # A run asked for under another spelling of the path is the notebook's: its calls name
    # the path as the tab has it, and its request is in the notebook's one conversation.
    reply = await tab.request(start_request("sub/./x/../a.ipynb", kernel_id, "hello there"))
    assert reply["ok"] is True, reply
    end = await tab.wait_for_event(finished, reply["run_id"], timeout=60)
    assert end["state"] == "done", end["error"]
    calls = [m for m in tab.received if "method" in m]
    assert calls
    assert {call["notebook_path"] for call in calls} == {"sub/a.ipynb"}

    async def said(path: str) -> list[str]:
        response = await jp_fetch("jupyter-ci", "conversation", params={"path": path})
        return [m["text"] for m in json.loads(response.body)["messages"] if m["role"] == "user"]

    for alias in ("sub/a.ipynb", "/sub/a.ipynb", "sub//a.ipynb", "other/../sub/a.ipynb"):
        assert await said(alias) == ["hello there"], alias
    # A backslash is part of a name here: sub\a.ipynb is another file, with no conversation.
    assert await said("sub\\a.ipynb") == []
    # A path above the server's root is refused, saying so, wherever it comes.
    with pytest.raises(HTTPClientError) as refused:
        await jp_fetch("jupyter-ci", "conversation", params={"path": "../a.ipynb"})
    assert refused.value.code == 400
    above = await tab.request(start_request("sub/../../a.ipynb", kernel_id, "hi"))
    assert (above["ok"], above["error"]["code"]) == (False, "bad_path")
    assert "goes above the server's root" in above["error"]["message"]
