"""``ask``: jupyter-ci's own loop as one MCP tool.

The agent hands a request to jupyter-ci's agent (the model the server configured, its key on the
server): in JupyterLab it is a run of the run manager through the tab that has the notebook open,
as a request from the panel would be (the user sees it there, Stop and review apply); headless,
the loop runs over the file and the server's kernel for it. The result is the run's outcome: its
answer, its cells (their final code, how each last ran and its outputs' digest) and its status
line, read from the run's events (the record the loop makes).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from ..agent.digest import new_nonce, wrap_untrusted
from ..agent.loop import AgentRun, RunRequest
from ..errors import JupyterCIError
from .calls import Caller, failure_of, wait_reporting
from .notebooks import Notebooks
from .recording import Recording
from .results import AskCell, AskResult, ToolFailure


class Asks:
    """Runs jupyter-ci's loop for an agent's request."""

    def __init__(self, notebooks: Notebooks) -> None:
        self.notebooks = notebooks
        self._tasks: set[asyncio.Future[Any]] = set()

    async def ask(
        self, caller: Caller, path: str, request: str, options: dict[str, Any], timeout: float
    ) -> AskResult:
        """Run the loop on the request and wait (up to ``timeout``) for its outcome."""
        if not request.strip():
            raise ToolFailure("The request is empty: say what to do in the notebook.")
        tab = self.notebooks.tab_for(path)
        try:
            if tab is not None:
                return await self._live(caller, tab, path, request, options, timeout)
            return await self._headless(caller, path, request, options, timeout)
        except JupyterCIError as err:
            raise failure_of(err) from None

    async def _live(
        self,
        caller: Caller,
        tab: str,
        path: str,
        request: str,
        options: dict[str, Any],
        timeout: float,
    ) -> AskResult:
        manager = self.notebooks.backend.manager
        kernel_id = await self.notebooks.pool.kernel_of(path)
        if kernel_id is None:
            raise ToolFailure(
                f"{path} is open in JupyterLab without a kernel; select a kernel for it there, "
                "then ask again."
            )
        started = await manager.start(
            tab,
            {
                "notebook_path": path,
                "kernel_id": kernel_id,
                "prompt": request,
                "options": options,
                "anchor_cell_id": None,
                "handoff_nonce": None,
                "origin": "mcp",
            },
        )
        run = manager.get(started.run_id) if started.run_id else None
        if run is None or run.writer is None:
            raise ToolFailure(started.note or "jupyter-ci did not start a run for the request.")
        ended = asyncio.ensure_future(_ended(run))
        done = await wait_reporting(ended, timeout, caller, lambda: _state_text(run.events))
        if not done:
            return _running(path)
        return _outcome(path, run.events)

    async def _headless(
        self, caller: Caller, path: str, request: str, options: dict[str, Any], timeout: float
    ) -> AskResult:
        backend = self.notebooks.backend
        if backend.resolve is None or backend.make_model is None:
            raise ToolFailure("ask needs jupyter-ci's model, which this server does not have.")
        settings = backend.resolve({"options": options})
        model = backend.make_model(settings)
        await self.notebooks.file(path).writable()
        recording = Recording(backend.recorder, path, request, settings)
        history = await recording.history()
        events: list[dict[str, Any]] = []

        def on_event(event: dict[str, Any]) -> None:
            if event.get("type") != "token":
                events.append(event)
            recording.event(event)

        run = AgentRun(
            RunRequest(request, settings, history=history.turns),
            self.notebooks.workspace(path),
            model,
            on_event=on_event,
            use_tools=settings.tool_calling == "on",
        )
        recording.begin(run.run_id, history.conversation_id)
        task = asyncio.ensure_future(_run_recorded(run, recording))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        done = await wait_reporting(task, timeout, caller, lambda: _state_text(events))
        if not done:
            return _running(path)
        return _outcome(path, events)


async def _run_recorded(run: AgentRun, recording: Recording) -> None:
    try:
        await run.run()
    finally:
        await recording.end()


async def _ended(run: Any) -> None:
    """Until the managed run ended and its end is recorded (its record's writer ends then, queued
    or not)."""
    await asyncio.wait({run.writer})


def _state_text(events: Sequence[Mapping[str, Any]]) -> str:
    for event in reversed(events):
        if event.get("type") in ("state", "finished") and event.get("text"):
            return str(event["text"])
    return "jupyter-ci: queued"


def _running(path: str) -> AskResult:
    return AskResult(
        path=path,
        state="running",
        reason="",
        status_line="jupyter-ci's run goes on in the notebook.",
        error="The call stopped waiting; read_notebook shows its cells as it writes them.",
    )


def _outcome(path: str, events: Sequence[Mapping[str, Any]]) -> AskResult:
    """The run's outcome, read from its events."""
    cells: dict[str, AskCell] = {}
    finished: Mapping[str, Any] = {}
    for event in events:
        kind = event.get("type")
        cell_id = str(event.get("cell_id") or "")
        if kind in ("cell_inserted", "cell_updated"):
            cell = cells.setdefault(cell_id, AskCell(cell_id=cell_id, source=""))
            cell.source = str(event.get("source", ""))
        elif kind == "cell_deleted":
            cells.pop(cell_id, None)
        elif kind == "execution_finished" and cell_id in cells:
            cells[cell_id].status = str(event.get("status"))
            digest = str(event.get("digest") or "")
            cells[cell_id].outputs = wrap_untrusted(digest, new_nonce(), "kernel output")
        elif kind == "finished":
            finished = event
    error = finished.get("error")
    return AskResult(
        path=path,
        state=str(finished.get("state", "")),
        reason=str(finished.get("reason", "")),
        status_line=str(finished.get("text", "")),
        answer=str(finished.get("answer") or ""),
        cells=list(cells.values()),
        error=str(error.get("message")) if isinstance(error, Mapping) else None,
    )
