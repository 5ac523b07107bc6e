"""A conversation as Markdown, in the order it happened (``/jupyter-ci/conversation/export``).

Each request is followed by its run's recorded events, in order: jupyter-ci's prose, each version
of each cell's code with who wrote it (jupyter-ci, its fix, its other proposal after a Reject, or
the user's edit), the outputs of each try, the user's rejections where they happened, notices,
the answer and the status line. A run whose events are not stored shows its record instead (the
final code of its cells, their outputs, the status line).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..vocabulary import cell_status_labels
from .inert_markdown import inert_markdown
from .store import Message, RunRecord, UsageTotals

#: Lines of a cell's output digest the export shows.
EXPORT_DIGEST_LINES = 12
#: How each role is named.
SPEAKERS = {"user": "You", "assistant": "jupyter-ci", "notice": "Note"}
#: Who wrote a version of a cell's code, by the cause of its ``cell_updated`` event.
AUTHORS = {
    "fix": "jupyter-ci fixed the cell",
    "own_fix": "jupyter-ci fixed the cell itself, without the model or an attempt",
    "edited": "You edited the cell",
    "reproposed": "jupyter-ci proposed another version",
    "stopped": "The run was stopped while jupyter-ci wrote this cell; it was commented out",
    "restored": "Your code was put back: jupyter-ci's proposal was not accepted",
    "kept": "jupyter-ci put back the version that ran: the fixes of its result failed",
}


def export_markdown(
    path: str,
    messages: Sequence[Message],
    runs: Sequence[RunRecord],
    totals: UsageTotals,
    events: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
) -> str:
    """A conversation as Markdown: each request, then what its run did, in order; and what it
    all cost. ``events``: the stored events of the runs, by run id."""
    records = {run.run_id: run for run in runs}
    events = events or {}
    shown: set[str] = set()
    told: set[str] = set()
    lines = [f"# jupyter-ci conversation: {path}", ""]
    for message in messages:
        run_id = message.run_id or ""
        if run_id in told:
            continue  # said in its run's events
        lines += _said(message.role, message.text)
        run = records.get(run_id)
        if run is None or run_id in shown:
            continue
        shown.add(run_id)  # the run's work follows its request
        if events.get(run_id):
            told.add(run_id)
            lines += _RunStory().told(events[run_id])
        else:
            lines += _run_record(run)
    cost = "unknown" if totals.cost is None else f"${totals.cost:.4f}"
    lines.append(
        f"_{totals.runs} run(s), {totals.prompt_tokens + totals.completion_tokens:,} tokens, "
        f"cost {cost}._"
    )
    return "\n".join(lines) + "\n"


def _said(role: str, text: str) -> list[str]:
    """What someone said, made inert: the file is read in viewers that would load the images
    and HTML in it (a model's text can hold a beacon; see inert_markdown.py)."""
    return [f"**{SPEAKERS.get(role, role)}:**", "", inert_markdown(text), ""]


@dataclass
class _RunStory:
    """A run's events told in order; a cell's code is shown once it runs or something is said
    about it (a rejection, the run's end), so each version appears once, where it happened."""

    lines: list[str] = field(default_factory=list)
    #: Code not shown yet, by cell: (who wrote it, the code).
    pending: dict[str, tuple[str, str]] = field(default_factory=dict)

    def told(self, events: Sequence[Mapping[str, Any]]) -> list[str]:
        for event in events:
            self._on(event)
        self._show_all()
        return self.lines

    def _on(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        cell = str(event.get("cell_id", ""))
        if kind == "cell_inserted":
            step = event.get("step")
            who = f"jupyter-ci wrote a cell (step {step})" if isinstance(step, int) else ""
            self._write(cell, who or "jupyter-ci wrote a cell", str(event.get("source", "")))
        elif kind == "cell_updated":
            cause = str(event.get("cause", ""))
            if cause == "streamed" and cell in self.pending:
                # The streamed code, complete: the version just announced.
                self.pending[cell] = (self.pending[cell][0], str(event.get("source", "")))
                return
            author = AUTHORS.get(cause, "jupyter-ci changed the cell")
            attempt = event.get("attempt")
            if cause in ("fix", "edited") and isinstance(attempt, int) and attempt > 1:
                author += f" (attempt {attempt})"
            self._write(cell, author, str(event.get("source", "")))
        elif kind == "cell_deleted":
            self.pending.pop(cell, None)
        elif kind == "execution_started":
            self._show(cell)
        elif kind == "execution_finished":
            self._show(cell)
            self.pending.pop(cell, None)
            self.lines += _output(str(event.get("status", "")), str(event.get("digest", "")))
        elif kind == "message":
            role = str(event.get("role", ""))
            if role == "user":
                self._show_all()  # a rejection follows the code it rejected
            # The model's prose arrives whole after the code of the same reply: it reads
            # before that code, which shows when it runs (or is answered).
            self.lines += _said(role, str(event.get("text", "")))
        elif kind == "finished":
            self._show_all()
            if event.get("text"):
                self.lines += [f"_{event['text']}_", ""]

    def _write(self, cell: str, author: str, source: str) -> None:
        self._show(cell)  # an earlier version, never run, still shows
        self.pending[cell] = (author, source)

    def _show(self, cell: str) -> None:
        author, source = self.pending.get(cell, ("", ""))
        if source.strip():  # else its code is still to come
            del self.pending[cell]
            self.lines += [f"_{author}:_", "", _fenced(source, "python"), ""]

    def _show_all(self) -> None:
        for cell in list(self.pending):
            self._show(cell)


def _output(status: str, digest: str) -> list[str]:
    """A try's outputs, as the model was shown them (cut to :data:`EXPORT_DIGEST_LINES`)."""
    label = cell_status_labels().get(status, status).lower()
    title = "Output" if status in ("ok", "") else f"Output ({label})"
    digest = digest.strip()
    if not digest:
        return [f"{title}: none.", ""] if status not in ("ok", "") else []
    kept = digest.splitlines()
    cut = len(kept) - EXPORT_DIGEST_LINES
    body = "\n".join(kept[:EXPORT_DIGEST_LINES])
    if cut > 0:
        body += f"\n[... {cut} more line{'s' if cut != 1 else ''} ...]"
    return [f"{title}:", "", _fenced(body, "text"), ""]


def _run_record(run: RunRecord) -> list[str]:
    """A run without stored events: its cells' final code and outputs, its status line."""
    lines: list[str] = []
    for cell in run.cells:
        lines += [_fenced(cell.source, "python"), ""]
        lines += _output(cell.status or "", cell.digest)
    if run.status_line:
        lines += [f"_{run.status_line}_", ""]
    return lines


def _fenced(text: str, language: str) -> str:
    """``text`` in a code fence longer than any run of backticks inside it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text.rstrip()}\n{fence}"
