"""A browser's kernel websocket sends each kernel message at once (jupyter_ci/server/nodelay.py):
with Nagle's algorithm on, a cell's later messages waited for the browser's delayed
acknowledgement of its first (40 ms on Linux), on every cell run in JupyterLab."""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from jupyter_server.services.kernels.connection.channels import ZMQChannelsWebsocketConnection

from jupyter_ci.server.app import JupyterCIServer
from jupyter_ci.server.nodelay import without_nagle

pytestmark = pytest.mark.usefixtures("app")


def _kernel_info_request(session: str) -> str:
    msg_id = uuid.uuid4().hex
    return json.dumps(
        {
            "header": {
                "msg_id": msg_id,
                "msg_type": "kernel_info_request",
                "session": session,
                "username": "test",
                "version": "5.3",
                "date": "2026-01-01T00:00:00Z",
            },
            "parent_header": {},
            "metadata": {},
            "content": {},
            "channel": "shell",
            "buffers": [],
        }
    )


async def test_a_kernel_websocket_turns_nagle_off(
    jp_serverapp: Any,
    jp_ws_fetch: Any,
    start_kernel: Callable[[], Awaitable[str]],
) -> None:
    kernel_id = await start_kernel()
    session = uuid.uuid4().hex
    ws = await jp_ws_fetch("api", "kernels", kernel_id, "channels", params={"session_id": session})
    try:
        # The connection is open on the server once the kernel answers through it.
        ws.write_message(_kernel_info_request(session))
        while True:
            raw = await ws.read_message()
            assert raw is not None, "the kernel websocket closed"
            if json.loads(raw)["header"]["msg_type"] == "kernel_info_reply":
                break
        connections = [
            connection
            for connection in list(ZMQChannelsWebsocketConnection._open_sockets)
            if connection.kernel_id == kernel_id
        ]
        assert connections, "the server has no open connection to the kernel"
        for connection in connections:
            tcp = connection.websocket_handler.ws_connection.stream.socket
            assert tcp.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
    finally:
        ws.close()


def test_the_servers_own_connection_class_is_kept(jp_serverapp: Any, app: JupyterCIServer) -> None:
    used = jp_serverapp.web_app.settings["kernel_websocket_connection_class"]
    configured = jp_serverapp.kernel_websocket_connection_class
    # Wrapped, not replaced: whatever the server was configured with (a gateway's connection
    # class too) still does the work, and its class-wide registry still closes every socket
    # at the server's stop.
    assert issubclass(used, configured)
    assert used is not configured
    assert used.__name__ == configured.__name__
    assert without_nagle(used) is used
