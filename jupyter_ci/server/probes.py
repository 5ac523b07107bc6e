"""Reading a tab's notebook outside any run: what a request would send, and re-run checks.

A probe is a :class:`~jupyter_ci.server.lab.workspace.LabWorkspace` over the tab's notebook with a
call channel of its own, for as long as the check takes. :func:`preview` shows exactly what a
request would send to the model first (nothing is sent); :func:`previous_cells` decides whether a
re-run ``%%ci`` asks the model again, from the run record.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ..agent.loop import AgentRun, RunRequest
from ..agent.messages import text_of
from ..errors import JupyterCIError
from ..models.base import Model
from ..settings import Settings
from ..vocabulary import reason_words
from .lab.calls import CallChannel
from .lab.workspace import LabWorkspace
from .recording import RunRecorder
from .run_types import RunRefused
from .store import source_hash


class Probes:
    """The probes in progress, by id; each belongs to the tab it reads."""

    def __init__(self, send: Callable[[str, dict[str, Any]], bool]) -> None:
        self._send = send
        self._open: dict[str, tuple[str, CallChannel]] = {}

    @contextlib.contextmanager
    def workspace(self, client_id: str, notebook_path: str) -> Iterator[LabWorkspace]:
        """A workspace over the tab's notebook outside any run, while the block lasts."""
        probe_id = f"probe-{uuid.uuid4().hex}"
        channel = CallChannel(
            probe_id, notebook_path, lambda message: self._send(client_id, message)
        )
        self._open[probe_id] = (client_id, channel)
        try:
            yield LabWorkspace(channel, call_timeout=30)
        finally:
            channel.close()
            self._open.pop(probe_id, None)

    def deliver(self, client_id: str, reply: Mapping[str, Any]) -> bool:
        """Hand a call reply of the tab to the probe that made the call (False if none did)."""
        return any(
            owner == client_id and channel.deliver(reply)
            for owner, channel in list(self._open.values())
        )


async def preview(
    probes: Probes,
    client_id: str,
    request: Mapping[str, Any],
    run_request: RunRequest,
    settings: Settings,
    model: Model,
) -> dict[str, Any]:
    """Exactly what ``run_request`` would send to the model first, and its token count.

    The notebook and the variables are read through the tab, as a run would; nothing is sent
    to the model. Raises :class:`RunRefused` with what went wrong.
    """
    try:
        with probes.workspace(client_id, str(request["notebook_path"])) as workspace:
            messages = await AgentRun(run_request, workspace, model).opening_messages()
    except JupyterCIError as err:
        raise RunRefused.of(err) from None
    shown = []
    for message in messages:
        content = text_of(message.get("content"), placeholders=True)
        role = str(message.get("role", ""))
        shown.append({"role": role, "content": content, "tokens": model.count_tokens(content)})
    return {
        "model": settings.model,
        "messages": shown,
        "prompt_tokens": sum(m["tokens"] for m in shown),
        "context_tokens": settings.context_tokens,
    }


async def previous_cells(
    probes: Probes,
    recorder: RunRecorder,
    client_id: str,
    notebook_path: str,
    anchor: str,
    regenerate: bool,
) -> tuple[bool, str]:
    """Whether to generate for a ``%%ci`` cell again, and a note for the user.

    What the anchor's last run left in the notebook decides. The run record (cell ids and source
    hashes) is the truth; cell metadata is only a hint (copy and paste duplicates it, and a
    pasted copy has a new id: it is the user's).
    """
    record = await recorder.last_run_at(notebook_path, anchor)
    if record is None or not record.cells:
        return True, ""
    # A request that did not get done (a cell failed, a package was missing, it was stopped):
    # running its %%ci again asks again, replacing what it left (an install it proposed stays).
    unfinished = record.state != "done"
    regenerate = regenerate or unfinished
    try:
        with probes.workspace(client_id, notebook_path) as workspace:
            sources = {cell.id: cell.source for cell in await workspace.read_cells()}
            present = [cell for cell in record.cells if cell.cell_id in sources]
            if not present:
                return True, ""
            if not regenerate:
                count = len(present)
                return False, (
                    f"The {count} cell{'s' if count != 1 else ''} this %%ci generated "
                    f"{'are' if count != 1 else 'is'} still below it: not asking the model "
                    "again. Use %%ci --regenerate to replace them (cells you edited are kept)."
                )
            unedited = [
                c
                for c in present
                if source_hash(sources[c.cell_id]) == c.source_hash
                and not c.source.startswith("%pip install")
            ]
            for cell in unedited:
                await workspace.delete_cell(cell.cell_id)
    except JupyterCIError as err:
        raise RunRefused(
            "notebook_unavailable", f"Could not read the notebook: {err.message}"
        ) from None
    kept = len(present) - len(unedited)
    note = f"Replaced {len(unedited)} generated cell{'s' if len(unedited) != 1 else ''}"
    note += f"; kept {kept} you edited or ran to install." if kept else "."
    if unfinished:
        words = reason_words().get(record.reason, record.reason)
        note = (
            f"The last request here did not finish ({record.state}: {words}): asking again. {note}"
        )
    return True, note
