"""Kernel messages reach the browser as soon as the server has them (TCP_NODELAY).

Jupyter Server writes each kernel message to the browser's kernel websocket as it comes from the
kernel, and tornado leaves Nagle's algorithm on for websockets. A cell's messages come in a
burst (``status: busy``, ``execute_input``, outputs, ``execute_reply``, ``status: idle``): the
first goes out, and the kernel of the server's machine holds the rest until the browser
acknowledges it, which the browser, with nothing to send back, delays (40 ms on Linux). So every
cell run in JupyterLab, the user's and the ones jupyter-ci runs through the tab, ended about
40 ms after the kernel was done; an MCP ``run_cell`` through a tab paid it on each call
(``python -m benchmarks.mcp_overhead``).

:func:`without_nagle` wraps the server's kernel websocket connection class (whatever it is: the
local kernels' or a gateway's) so each connection turns Nagle's algorithm off for its websocket
when it connects, as browsers do for their side. Nothing else of the connection changes.
"""

from __future__ import annotations

from typing import Any

#: Marks a class :func:`without_nagle` made (it is not wrapped twice).
_WRAPPED = "_jupyter_ci_nodelay"


def without_nagle(base: type[Any]) -> type[Any]:
    """A subclass of the kernel websocket connection class ``base`` whose connections send
    each message at once (``set_nodelay(True)`` on their websocket as they connect)."""
    if getattr(base, _WRAPPED, False):
        return base

    class Wrapped(base):  # type: ignore[misc]
        def connect(self) -> Any:
            nodelay(getattr(self, "websocket_handler", None))
            return super().connect()

    Wrapped.__name__ = base.__name__
    Wrapped.__qualname__ = base.__qualname__
    Wrapped.__doc__ = f"{base.__doc__ or base.__name__}\n\nWith Nagle's algorithm off."
    setattr(Wrapped, _WRAPPED, True)
    return Wrapped


def nodelay(handler: Any) -> bool:
    """Turn Nagle's algorithm off for a tornado websocket handler's connection; False when it
    has no open connection (then nothing is done)."""
    if handler is None or getattr(handler, "ws_connection", None) is None:
        return False
    handler.set_nodelay(True)
    return True
