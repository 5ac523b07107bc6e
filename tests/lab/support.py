"""Helpers of the Lab-path server tests."""

from __future__ import annotations

import asyncio
from typing import Any

from jupyter_ci.server.app import JupyterCIServer

#: jupyter-ci's own key variable, set for the server under test.
KEY = "sk-test-SERVERKEY-0123456789abcdefghij"


def ci_app(serverapp: Any) -> JupyterCIServer:
    """The jupyter-ci extension app loaded in ``serverapp``."""
    extension = serverapp.extension_manager.extensions["jupyter_ci"]
    for point in extension.extension_points.values():
        if isinstance(point.app, JupyterCIServer):
            return point.app
    raise AssertionError("jupyter_ci extension app not loaded")


def start_request(path: str, kernel_id: str, prompt: str, **fields: Any) -> dict[str, Any]:
    """A ``start_run`` request (panel origin unless given)."""
    request: dict[str, Any] = {
        "request": "start_run",
        "notebook_path": path,
        "kernel_id": kernel_id,
        "prompt": prompt,
        "options": {},
        "anchor_cell_id": None,
        "handoff_nonce": None,
    }
    request.update(fields)
    return request


def finished(event: dict[str, Any]) -> bool:
    """Whether a run event is the run's end."""
    return event.get("type") == "finished"


async def exported(jp_fetch: Any, path: str, last: str) -> str:
    """The conversation's Markdown export, once it holds ``last`` (the record is written off
    the run's path)."""

    async def text() -> str:
        response = await jp_fetch("jupyter-ci", "conversation", "export", params={"path": path})
        return str(response.body.decode())

    for _ in range(100):
        found = await text()
        if last in found:
            return found
        await asyncio.sleep(0.05)
    return await text()
