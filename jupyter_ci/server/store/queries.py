"""The conversation store's reads and writes, each a function of the connection.

Every function here runs on the store's worker thread only (see
:class:`~jupyter_ci.server.store.conversations.ConversationStore`), takes the connection last, and
writes inside one transaction. Run events are recorded by :mod:`.projection`.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from typing import Any

from .records import (
    Conversation,
    Message,
    RunRecord,
    UsageTotals,
    as_int,
    cell_of,
    conversation_of,
    dumps,
    loads,
    norm_path,
    storable,
)
from .schema import transaction


def conversation_for(scope: str, path: str, conn: sqlite3.Connection) -> Conversation:
    """The conversation at a notebook path (made on first use)."""
    query = "SELECT * FROM conversations WHERE scope = ? AND path = ?"
    row = conn.execute(query, (scope, path)).fetchone()
    if row is None:
        with transaction(conn):
            row = conn.execute(query, (scope, path)).fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO conversations (id, scope, path, last_path, created) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (uuid.uuid4().hex, scope, path, path, time.time()),
                )
                row = conn.execute(query, (scope, path)).fetchone()
    return conversation_of(row)


def find_conversation(scope: str, path: str, conn: sqlite3.Connection) -> Conversation | None:
    """The conversation at a notebook path, or None (makes none)."""
    row = conn.execute(
        "SELECT * FROM conversations WHERE scope = ? AND path = ?", (scope, path)
    ).fetchone()
    return None if row is None else conversation_of(row)


def conversation(conversation_id: str, conn: sqlite3.Connection) -> Conversation | None:
    """A conversation by id (archived ones too), or None."""
    row = conn.execute("SELECT * FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
    return None if row is None else conversation_of(row)


def _live_under(conn: sqlite3.Connection, scope: str, path: str) -> list[tuple[str, str]]:
    """(id, path) of the live conversations at ``path`` or under the folder ``path``."""
    rows = conn.execute(
        "SELECT id, path FROM conversations WHERE scope = ? "
        "AND (path = ? OR substr(path, 1, ?) = ?)",
        (scope, path, len(path) + 1, path + "/"),
    ).fetchall()
    return [(str(row["id"]), str(row["path"])) for row in rows]


def rename(scope: str, old: str, new: str, conn: sqlite3.Connection) -> int:
    """Conversations follow a renamed notebook or folder; how many moved."""
    now = time.time()
    with transaction(conn):
        moving = _live_under(conn, scope, old)
        moving_ids = {conversation_id for conversation_id, _ in moving}
        # Whatever lived at the destination was replaced by the renamed file(s).
        for conversation_id, _ in _live_under(conn, scope, new):
            if conversation_id not in moving_ids:
                conn.execute(
                    "UPDATE conversations SET path = NULL, archived = ? WHERE id = ?",
                    (now, conversation_id),
                )
        # Two phases, so no intermediate state breaks the unique (scope, path) index.
        for conversation_id, _ in moving:
            conn.execute("UPDATE conversations SET path = NULL WHERE id = ?", (conversation_id,))
        for conversation_id, path in moving:
            target = storable(new + path[len(old) :])
            conn.execute(
                "UPDATE conversations SET path = ?, last_path = ? WHERE id = ?",
                (target, target, conversation_id),
            )
    return len(moving)


def canonical_paths(conn: sqlite3.Connection) -> int:
    """Give live conversations stored under another spelling of a path (``sub/../x.ipynb``,
    written before paths had one form) their canonical path; how many changed.

    One whose canonical path another live conversation already has is archived (kept, no
    longer found by path): the one stored under the canonical spelling is the one tabs used.
    """
    rows = conn.execute(
        "SELECT id, scope, path FROM conversations WHERE path IS NOT NULL"
    ).fetchall()
    moves: list[tuple[str, str, str]] = []
    for row in rows:
        try:
            canonical = norm_path(str(row["path"]))
        except ValueError:
            canonical = ""  # names no notebook: archived below
        if canonical != row["path"]:
            moves.append((str(row["id"]), str(row["scope"]), canonical))
    if not moves:
        return 0
    now = time.time()
    with transaction(conn):
        for conversation_id, scope, canonical in moves:
            taken = (
                canonical
                and conn.execute(
                    "SELECT 1 FROM conversations WHERE scope = ? AND path = ?", (scope, canonical)
                ).fetchone()
            )
            if canonical and not taken:
                conn.execute(
                    "UPDATE conversations SET path = ?, last_path = ? WHERE id = ?",
                    (canonical, canonical, conversation_id),
                )
            else:
                conn.execute(
                    "UPDATE conversations SET path = NULL, archived = ? WHERE id = ?",
                    (now, conversation_id),
                )
    return len(moves)


def forget(scope: str, path: str, conn: sqlite3.Connection) -> int:
    """Archive the conversations of a deleted notebook or folder; how many."""
    with transaction(conn):
        gone = _live_under(conn, scope, path)
        conn.executemany(
            "UPDATE conversations SET path = NULL, archived = ? WHERE id = ?",
            [(time.time(), conversation_id) for conversation_id, _ in gone],
        )
    return len(gone)


def clear(conversation_id: str, conn: sqlite3.Connection) -> None:
    """Delete a conversation's messages and runs (the conversation stays)."""
    require_conversation(conn, conversation_id)
    with transaction(conn):
        conn.execute(
            "DELETE FROM run_events WHERE run_id IN "
            "(SELECT id FROM runs WHERE conversation_id = ?)",
            (conversation_id,),
        )
        conn.execute(
            "DELETE FROM run_cells WHERE run_id IN (SELECT id FROM runs WHERE conversation_id = ?)",
            (conversation_id,),
        )
        conn.execute("DELETE FROM runs WHERE conversation_id = ?", (conversation_id,))
        conn.execute("DELETE FROM messages WHERE conversation_id = ?", (conversation_id,))


def add_message(
    conversation_id: str,
    role: str,
    text: str,
    run_id: str | None,
    created: float | None,
    conn: sqlite3.Connection,
) -> Message:
    """Append a message to a conversation."""
    require_conversation(conn, conversation_id)
    with transaction(conn):
        return insert_message(conn, conversation_id, role, text, run_id, created)


def insert_message(
    conn: sqlite3.Connection,
    conversation_id: str,
    role: str,
    text: str,
    run_id: str | None,
    created: float | None,
) -> Message:
    """Insert a message (the caller holds the transaction)."""
    when = time.time() if created is None else created
    cursor = conn.execute(
        "INSERT INTO messages (conversation_id, run_id, role, text, created) "
        "VALUES (?, ?, ?, ?, ?)",
        (conversation_id, run_id, role, storable(text), when),
    )
    return Message(int(cursor.lastrowid or 0), conversation_id, role, text, run_id, when)


def messages(conversation_id: str, limit: int | None, conn: sqlite3.Connection) -> list[Message]:
    """The last ``limit`` messages (all if None), oldest first."""
    rows = conn.execute(
        "SELECT * FROM (SELECT * FROM messages WHERE conversation_id = ? "
        "ORDER BY id DESC LIMIT ?) ORDER BY id",
        (conversation_id, -1 if limit is None else max(limit, 0)),
    ).fetchall()
    return [
        Message(
            int(row["id"]),
            str(row["conversation_id"]),
            str(row["role"]),
            str(row["text"]),
            row["run_id"],
            float(row["created"]),
        )
        for row in rows
    ]


def start_run(
    conversation_id: str,
    run_id: str,
    prompt: str,
    options: dict[str, Any],
    anchor_cell_id: str | None,
    origin: str,
    conn: sqlite3.Connection,
) -> RunRecord:
    """Record a new run, state ``queued``."""
    require_conversation(conn, conversation_id)
    if conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is not None:
        raise ValueError(f"a run with id {run_id!r} is already recorded")
    with transaction(conn):
        conn.execute(
            "INSERT INTO runs (id, conversation_id, prompt, options, anchor_cell_id, origin, "
            "state, reason, created) VALUES (?, ?, ?, ?, ?, ?, 'queued', '', ?)",
            (
                run_id,
                conversation_id,
                storable(prompt),
                dumps(options),
                anchor_cell_id,
                origin,
                time.time(),
            ),
        )
    record = run_record(run_id, conn)
    assert record is not None
    return record


def run_record(run_id: str, conn: sqlite3.Connection) -> RunRecord | None:
    """A run by id, with its cells, or None."""
    row = conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
    if row is None:
        return None
    cells = conn.execute(
        "SELECT * FROM run_cells WHERE run_id = ? ORDER BY position", (run_id,)
    ).fetchall()
    finished = row["finished"]
    return RunRecord(
        run_id=str(row["id"]),
        conversation_id=str(row["conversation_id"]),
        prompt=str(row["prompt"]),
        options=loads(row["options"]) or {},
        anchor_cell_id=row["anchor_cell_id"],
        origin=str(row["origin"]),
        state=str(row["state"]),
        reason=str(row["reason"]),
        usage=loads(row["usage"]),
        summary=loads(row["summary"]),
        error=loads(row["error"]),
        cells=tuple(cell_of(cell) for cell in cells),
        created=float(row["created"]),
        finished=None if finished is None else float(finished),
        last_seq=int(row["last_seq"]),
        answer=str(row["answer"] or ""),
        status_line=str(row["status_line"] or ""),
    )


def runs(conversation_id: str, conn: sqlite3.Connection) -> list[RunRecord]:
    """A conversation's runs, oldest first."""
    rows = conn.execute(
        "SELECT id FROM runs WHERE conversation_id = ? ORDER BY rowid", (conversation_id,)
    ).fetchall()
    records = [run_record(str(row["id"]), conn) for row in rows]
    return [record for record in records if record is not None]


def latest_for_anchor(
    conversation_id: str, anchor_cell_id: str, conn: sqlite3.Connection
) -> RunRecord | None:
    """The newest run of a ``%%ci`` cell (its own requests: origin ``magic``), or None.

    A panel request whose cells went after the same cell is anchored there too; its cells are
    never the ``%%ci``'s.
    """
    # rowid grows with each insert, so it orders runs even when two share a timestamp.
    row = conn.execute(
        "SELECT id FROM runs WHERE conversation_id = ? AND anchor_cell_id = ? "
        "AND origin = 'magic' ORDER BY rowid DESC LIMIT 1",
        (conversation_id, anchor_cell_id),
    ).fetchone()
    return None if row is None else run_record(str(row["id"]), conn)


def events(run_id: str, after_seq: int, conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """A run's stored events after ``after_seq``, in order."""
    rows = conn.execute(
        "SELECT data FROM run_events WHERE run_id = ? AND seq > ? ORDER BY seq",
        (run_id, after_seq),
    ).fetchall()
    return [loads(row["data"]) for row in rows]


def events_of(run_ids: list[str], conn: sqlite3.Connection) -> dict[str, list[dict[str, Any]]]:
    """The stored events of several runs, by run id."""
    return {run_id: events(run_id, 0, conn) for run_id in run_ids}


def usage_totals(conversation_id: str, conn: sqlite3.Connection) -> UsageTotals:
    """Tokens and cost over a conversation's runs."""
    rows = conn.execute(
        "SELECT usage FROM runs WHERE conversation_id = ?", (conversation_id,)
    ).fetchall()
    prompt = completion = 0
    cost: float | None = 0.0
    for row in rows:
        usage = loads(row["usage"]) or {}
        run_prompt = as_int(usage.get("prompt_tokens"))
        run_completion = as_int(usage.get("completion_tokens"))
        prompt += run_prompt
        completion += run_completion
        run_cost = usage.get("cost")
        if isinstance(run_cost, (int, float)) and not isinstance(run_cost, bool):
            cost = None if cost is None else cost + float(run_cost)
        elif run_prompt + run_completion > 0:
            cost = None  # tokens spent at an unknown price: the total is unknown, not lower
    return UsageTotals(prompt, completion, cost, len(rows))


def require_conversation(conn: sqlite3.Connection, conversation_id: str) -> None:
    """KeyError unless the conversation exists."""
    found = conn.execute("SELECT 1 FROM conversations WHERE id = ?", (conversation_id,))
    if found.fetchone() is None:
        raise KeyError(f"no conversation {conversation_id!r}")
