"""Reading a tab's notebook outside any run: what a request would send, and re-run checks.

A probe is a :class:`~jupyter_ci.server.lab.workspace.LabWorkspace` over the tab's notebook with a
call channel of its own, for as long as the check takes. :func:`preview` shows exactly what a
request would send to the model first (nothing is sent); :func:`previous_cells` decides whether a
re-run ``%%ci`` asks the model again, and what its new answer replaces, from the run record.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
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


@dataclass(frozen=True)
class Rerun:
    """What a re-run ``%%ci`` does: ask the model again or not, what it tells the user first,
    and which cells of its earlier answer the new one replaces (by id, with the hash the record
    holds for each: the run deletes one only if its source still has it, when its first new
    cell comes). When the model is not asked, ``status_line`` is the last run's, which still
    stands (the cell shows it again, with ``note``)."""

    generate: bool
    note: str = ""
    replaces: dict[str, str] = field(default_factory=dict)
    status_line: str = ""


async def previous_cells(
    probes: Probes,
    recorder: RunRecorder,
    client_id: str,
    notebook_path: str,
    anchor: str,
    regenerate: bool,
) -> Rerun:
    """Whether to ask the model again for a ``%%ci`` cell, what to say first, and what the new
    answer replaces.

    The record of the cell's own last request decides (a panel request whose cells went after the
    same cell is not that request): which cells it made (ids and source hashes; cell metadata is
    only a hint: copy and paste duplicates it, and a pasted copy has a new id: it is the user's),
    and how it ended. While its cells are still in the notebook the model is not asked again,
    whether the request was done or stopped, unless ``--regenerate`` says so; a request that
    failed (a cell still failing, a missing package) is asked again. Either way the note says
    what will happen before it does, and only the unedited cells are replaced (an install a
    request proposed stays).
    """
    record = await recorder.last_run_at(notebook_path, anchor)
    if record is None or not record.cells:
        return Rerun(True)
    failed = record.state == "failed"
    try:
        with probes.workspace(client_id, notebook_path) as workspace:
            cells = await workspace.read_cells(outputs=False)
            sources = {cell.id: cell.source for cell in cells}
    except JupyterCIError as err:
        raise RunRefused(
            "notebook_unavailable", f"Could not read the notebook: {err.message}"
        ) from None
    present = [cell for cell in record.cells if cell.cell_id in sources]
    if not present:
        return Rerun(True)
    if not regenerate and not failed:
        # Done or stopped alike; the last run's status line says which, the note only why the
        # model is not asked.
        return Rerun(False, _not_asked(len(present)), status_line=record.status_line)
    replaces = {
        c.cell_id: c.source_hash
        for c in present
        if source_hash(sources[c.cell_id]) == c.source_hash
        and not c.source.startswith("%pip install")
    }
    kept = len(present) - len(replaces)
    if replaces:
        plan = (
            f"the {_cells(len(replaces))} it left below will be replaced by the new answer "
            f"unless you edit {'it' if len(replaces) == 1 else 'them'} first"
        )
        plan += f"; {_cells(kept)} you edited or ran to install {_are(kept)} kept." if kept else "."
    else:
        plan = f"the {_cells(kept)} it left below {_are(kept)} kept (you edited them)."
    if failed:
        words = reason_words().get(record.reason, record.reason)
        note = f"The last request here failed ({words}): asking again; {plan}"
    else:
        note = f"Asking again (--regenerate): {plan}"
    return Rerun(True, note, replaces)


def _not_asked(count: int) -> str:
    """The one line a re-run ``%%ci`` whose cells are below it says (under its last status)."""
    if count == 1:
        return "Not asked again: its cell is below (--regenerate to replace it)"
    return f"Not asked again: its {count} cells are below (--regenerate to replace them)"


def _cells(count: int) -> str:
    return "1 cell" if count == 1 else f"{count} cells"


def _are(count: int) -> str:
    return "is" if count == 1 else "are"
