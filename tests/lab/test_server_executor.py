"""``%%ci`` run by a server-side executor (as jupyter-server-nbmodel runs cells): the kernel
manager's own client sends the cell's code with no metadata, so no stamp reaches the magic; the
cell a tab said it scheduled (``expect_handoff``) is handed off to it all the same.

The executor here makes exactly nbmodel's call (``km.client().execute_interactive(code)``) on a
real kernel of a real Jupyter server; the browser side, with nbmodel itself installed, is
``tests/browser/test_magic_handoff.py`` in the nbmodel stage of ``.ci/run``.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

from jupyter_ci import expected, protocol
from jupyter_ci.server.app import JupyterCIServer
from jupyter_ci.testing import Reply, ScriptedModelServer
from jupyter_ci.testing.lab_tab import ScriptedTab, code_cell

from .support import finished, start_request

MAGIC = "%%ci set y to 2"


async def execute_as_server(client: Any, code: str) -> list[dict[str, Any]]:
    """Run ``code`` as nbmodel does; the iopub messages of the execution."""
    messages: list[dict[str, Any]] = []
    try:
        await client.execute_interactive(code, output_hook=messages.append, timeout=20)
    except TimeoutError:
        raise AssertionError(f"no end of {code!r}: {messages!r}") from None
    return messages


async def expect(tab: ScriptedTab, kernel_id: str) -> dict[str, Any]:
    """What the labextension sends when it schedules the %%ci cell ``magic``."""
    return await tab.request(
        {
            "request": "expect_handoff",
            "notebook_path": "a.ipynb",
            "kernel_id": kernel_id,
            "cell_id": "magic",
            "code": MAGIC,
        }
    )


def exists(path: str) -> bool:
    return os.path.exists(path)


def handoffs(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        m["content"]["data"][protocol.HANDOFF_MIME]
        for m in messages
        if m["msg_type"] == "display_data" and protocol.HANDOFF_MIME in m["content"]["data"]
    ]


def printed(messages: list[dict[str, Any]]) -> str:
    return "".join(m["content"]["text"] for m in messages if m["msg_type"] == "stream")


async def test_a_cell_the_tab_expects_is_handed_off_from_the_servers_client(
    app: JupyterCIServer,
    jp_serverapp: Any,
    model_server: ScriptedModelServer,
    start_kernel: Callable[[], Awaitable[str]],
    tab_factory: Callable[..., ScriptedTab],
) -> None:
    model_server.set_script([Reply.code("y = 2"), Reply.text("y is 2.")])
    kernel_id = await start_kernel()
    manager = jp_serverapp.kernel_manager.get_kernel(kernel_id)
    where = expected.path_for(manager.connection_file)
    tab = tab_factory()
    tab.open_notebook("a.ipynb", kernel_id, [code_cell(MAGIC, "magic")])
    assert (await tab.connect() or {}).get("ok") is True
    server_client = manager.client()  # shares the kernel manager's session, as nbmodel's does
    server_client.start_channels()
    try:
        await server_client.wait_for_ready(timeout=60)
        await execute_as_server(server_client, "%load_ext jupyter_ci")

        # Unexpected, the cell runs in the kernel (which has no model: it says so).
        alone = await execute_as_server(server_client, MAGIC)
        assert handoffs(alone) == []
        assert "No model is configured" in printed(alone)
        assert not exists(where)

        # The tab scheduled it: the server tells the kernel, which hands it off with its cell.
        reply = await expect(tab, kernel_id)
        assert reply == {"reply_to": reply["reply_to"], "ok": True, "expected": True}
        assert exists(where)
        messages = await execute_as_server(server_client, MAGIC)
        [handoff] = handoffs(messages)
        assert handoff["cell_id"] == "magic"
        assert handoff["prompt"] == "set y to 2"
        assert handoff["kernel_session"] == server_client.session.session
        errors = [m["content"]["ename"] for m in messages if m["msg_type"] == "error"]
        assert errors == ["JupyterCIHandoff"]
        assert "No model is configured" not in printed(messages)

        # The tab claims the handoff: the run starts and the expectation is gone with its file.
        request = start_request(
            "a.ipynb",
            kernel_id,
            handoff["prompt"],
            origin="magic",
            handoff_nonce=handoff["nonce"],
            anchor_cell_id="magic",
        )
        started = await tab.request(request)
        assert started["ok"] is True, started
        end = await tab.wait_for_event(finished, started["run_id"])
        assert end["state"] == "done"
        assert not exists(where)
        # The tab ran the generated cell as jupyter-ci's own (marked): that ended the hold on
        # the %%ci's batch, so the executor's next request runs (no time window to wait out)...
        y = await execute_as_server(server_client, "print(y)")
        assert printed(y) == "2\n"
        # ... the same code again, expected once and taken: it runs in the kernel.
        again = await execute_as_server(server_client, MAGIC)
        assert handoffs(again) == []
        assert "No model is configured" in printed(again)
    finally:
        server_client.stop_channels()


async def test_an_expectation_is_only_for_the_servers_own_clients(
    app: JupyterCIServer,
    jp_serverapp: Any,
    start_kernel: Callable[[], Awaitable[str]],
    tab_factory: Callable[..., ScriptedTab],
) -> None:
    kernel_id = await start_kernel()
    manager = jp_serverapp.kernel_manager.get_kernel(kernel_id)
    tab = tab_factory()
    tab.open_notebook("a.ipynb", kernel_id, [code_cell(MAGIC, "magic")])
    assert (await tab.connect() or {}).get("ok") is True
    reply = await expect(tab, kernel_id)
    assert reply["expected"] is True
    # Another client of the kernel (a console, another tab) sends the same code: not handed off.
    other = manager.client()
    other.session = other.session.clone()
    other.session.session = "another-client"
    other.start_channels()
    try:
        await other.wait_for_ready(timeout=60)
        await execute_as_server(other, "%load_ext jupyter_ci")
        messages = await execute_as_server(other, MAGIC)
        assert handoffs(messages) == []
        assert "No model is configured" in printed(messages)
    finally:
        other.stop_channels()
    # A kernel this server does not run cannot be told.
    unknown = await expect(tab, "no-such-kernel")
    assert unknown["ok"] is True
    assert unknown["expected"] is False
    # A restart forgets what the kernel was expected to receive before it.
    where = expected.path_for(manager.connection_file)
    assert exists(where)
    await jp_serverapp.kernel_manager.restart_kernel(kernel_id)
    await tab.wait_until(lambda: not exists(where), timeout=30)
