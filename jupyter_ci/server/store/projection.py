"""The run record as a projection of the run's events: how each stored event changes it.

The loop is the only producer of a run's facts; the run manager hands its events (never tokens)
to :func:`record_events`, which stores each one (for replay and the panel's history) and applies
its effect: ``state`` and ``finished`` set the run's state, reason, answer and status line,
``usage`` its usage, ``cell_inserted``/``cell_updated`` the cells it generated or changed with the
hash of each one's latest source, ``attempt`` and ``execution_finished`` a cell's last attempt,
status and output digest, ``message`` the conversation's messages (the model's answers, notices,
and the user's rejections in review). There is no other write path for any of these.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Mapping
from typing import Any

from ...vocabulary import terminal_states
from .queries import insert_message, run_record
from .records import ROLES, RunRecord, dumps, source_hash, storable
from .schema import transaction

#: Makes the ``finished`` event (its type-specific fields) of a run its server left unfinished,
#: from its record and the time of its last stored event (None if it has none).
FinishedFactory = Callable[[RunRecord, float | None], dict[str, Any]]


def record_events(run_id: str, events: list[dict[str, Any]], conn: sqlite3.Connection) -> int:
    """Record several events of a run in one transaction (one sync to disk), in order, with their
    effects; returns how many were new (an event whose ``seq`` is stored is skipped)."""
    with transaction(conn):
        return sum(1 for event in events if apply_event(run_id, event, conn))


def abandon(scope: str, finished: FinishedFactory, conn: sqlite3.Connection) -> list[str]:
    """End the runs of ``scope`` a previous server process left unfinished; their ids.

    Each gets the ``finished`` event ``finished(record)`` makes, stored and applied as any event
    is, so the run's record, its history and a replay all say how it ended.
    """
    ended = terminal_states()
    with transaction(conn):
        rows = conn.execute(
            "SELECT runs.id, runs.state FROM runs JOIN conversations "
            "ON conversations.id = runs.conversation_id WHERE conversations.scope = ?",
            (scope,),
        ).fetchall()
        ids = [str(row["id"]) for row in rows if row["state"] not in ended]
        for run_id in ids:
            record = run_record(run_id, conn)
            assert record is not None
            last = conn.execute(
                "SELECT max(time) FROM run_events WHERE run_id = ?", (run_id,)
            ).fetchone()[0]
            event = {
                "run_id": run_id,
                "seq": record.last_seq + 1,
                "time": time.time(),
                **finished(record, None if last is None else float(last)),
            }
            apply_event(run_id, event, conn)
    return ids


def apply_event(run_id: str, event: dict[str, Any], conn: sqlite3.Connection) -> bool:
    """Store one event and its effects; False (and nothing changed) if its seq is stored."""
    kind = str(event.get("type", ""))
    when = event.get("time")
    when = float(when) if isinstance(when, (int, float)) else time.time()
    row = conn.execute(
        "SELECT conversation_id, last_seq FROM runs WHERE id = ?", (run_id,)
    ).fetchone()
    if row is None:
        raise KeyError(f"no run {run_id!r} is recorded (start_run first)")
    seq = event.get("seq")
    if not isinstance(seq, int) or isinstance(seq, bool):
        seq = int(row["last_seq"]) + 1
    inserted = conn.execute(
        "INSERT OR IGNORE INTO run_events (run_id, seq, type, time, data) VALUES (?, ?, ?, ?, ?)",
        (run_id, seq, kind, when, dumps(event)),
    )
    if inserted.rowcount == 0:
        return False
    conn.execute("UPDATE runs SET last_seq = max(last_seq, ?) WHERE id = ?", (seq, run_id))
    effect = _EFFECTS.get(kind)
    if effect is not None:
        effect(conn, run_id, str(row["conversation_id"]), event, when)
    return True


def _on_state(
    conn: sqlite3.Connection, run_id: str, _conv: str, event: dict[str, Any], _when: float
) -> None:
    conn.execute(
        "UPDATE runs SET state = ?, reason = ? WHERE id = ?",
        (str(event.get("state", "")), str(event.get("reason", "")), run_id),
    )


def _on_cell_inserted(
    conn: sqlite3.Connection, run_id: str, _conv: str, event: dict[str, Any], _when: float
) -> None:
    source = str(event.get("source", ""))
    step = event.get("step")
    conn.execute(
        "INSERT INTO run_cells (run_id, cell_id, position, step, source, source_hash) "
        "VALUES (?, ?, (SELECT coalesce(max(position), 0) + 1 FROM run_cells WHERE run_id = ?), "
        "?, ?, ?) ON CONFLICT (run_id, cell_id) DO UPDATE SET "
        "source = excluded.source, source_hash = excluded.source_hash",
        (
            run_id,
            str(event.get("cell_id", "")),
            run_id,
            step if isinstance(step, int) else None,
            storable(source),
            source_hash(source),
        ),
    )


def _on_cell_updated(
    conn: sqlite3.Connection, run_id: str, _conv: str, event: dict[str, Any], _when: float
) -> None:
    # A cell the run changed without inserting it (a fix of the user's cell) joins the record
    # too, with no step: the export shows its final code.
    source = str(event.get("source", ""))
    attempt = event.get("attempt")
    conn.execute(
        "INSERT INTO run_cells (run_id, cell_id, position, step, source, source_hash, attempt) "
        "VALUES (?, ?, (SELECT coalesce(max(position), 0) + 1 FROM run_cells WHERE run_id = ?), "
        "NULL, ?, ?, ?) ON CONFLICT (run_id, cell_id) DO UPDATE SET source = excluded.source, "
        "source_hash = excluded.source_hash, attempt = max(attempt, excluded.attempt)",
        (
            run_id,
            str(event.get("cell_id", "")),
            run_id,
            storable(source),
            source_hash(source),
            attempt if isinstance(attempt, int) else 1,
        ),
    )


def _on_attempt(
    conn: sqlite3.Connection, run_id: str, _conv: str, event: dict[str, Any], _when: float
) -> None:
    attempt = event.get("attempt")
    if isinstance(attempt, int):
        conn.execute(
            "UPDATE run_cells SET attempt = max(attempt, ?) WHERE run_id = ? AND cell_id = ?",
            (attempt, run_id, str(event.get("cell_id", ""))),
        )


def _on_execution_finished(
    conn: sqlite3.Connection, run_id: str, _conv: str, event: dict[str, Any], _when: float
) -> None:
    count = event.get("execution_count")
    conn.execute(
        "UPDATE run_cells SET status = ?, execution_count = ?, digest = ? "
        "WHERE run_id = ? AND cell_id = ?",
        (
            str(event.get("status", "")),
            count if isinstance(count, int) else None,
            storable(str(event.get("digest", ""))),
            run_id,
            str(event.get("cell_id", "")),
        ),
    )


def _on_message(
    conn: sqlite3.Connection, run_id: str, conv: str, event: dict[str, Any], when: float
) -> None:
    role = event.get("role")
    if role in ROLES:
        insert_message(conn, conv, str(role), str(event.get("text", "")), run_id, when)


def _on_usage(
    conn: sqlite3.Connection, run_id: str, _conv: str, event: dict[str, Any], _when: float
) -> None:
    usage = event.get("usage")
    if isinstance(usage, dict):
        conn.execute("UPDATE runs SET usage = ? WHERE id = ?", (dumps(usage), run_id))


def _on_finished(
    conn: sqlite3.Connection, run_id: str, _conv: str, event: dict[str, Any], when: float
) -> None:
    summary = event.get("summary")
    error = event.get("error")
    usage = summary.get("usage") if isinstance(summary, Mapping) else None
    conn.execute(
        "UPDATE runs SET state = ?, reason = ?, summary = ?, error = ?, "
        "usage = coalesce(?, usage), answer = ?, status_line = ?, finished = ? WHERE id = ?",
        (
            str(event.get("state", "")),
            str(event.get("reason", "")),
            dumps(summary) if isinstance(summary, Mapping) else None,
            dumps(error) if isinstance(error, Mapping) else None,
            dumps(usage) if isinstance(usage, Mapping) else None,
            storable(str(event.get("answer", ""))),
            storable(str(event.get("text", ""))),
            when,
            run_id,
        ),
    )


def _on_cell_deleted(
    conn: sqlite3.Connection, run_id: str, _conv: str, event: dict[str, Any], _when: float
) -> None:
    # A cell the run stopped writing before any code came: gone from the notebook and the record.
    conn.execute(
        "DELETE FROM run_cells WHERE run_id = ? AND cell_id = ?",
        (run_id, str(event.get("cell_id", ""))),
    )


_EFFECTS: dict[str, Callable[[sqlite3.Connection, str, str, dict[str, Any], float], None]] = {
    "state": _on_state,
    "cell_inserted": _on_cell_inserted,
    "cell_updated": _on_cell_updated,
    "cell_deleted": _on_cell_deleted,
    "attempt": _on_attempt,
    "execution_finished": _on_execution_finished,
    "message": _on_message,
    "usage": _on_usage,
    "finished": _on_finished,
}
