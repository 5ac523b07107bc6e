"""The conversation database's schema: append-only migrations, and the transaction helper.

``MIGRATIONS[n]`` brings a database from ``PRAGMA user_version`` n to n + 1; a migration is never
edited once released, only followed by another. A database written by a newer jupyter-ci (a higher
``user_version``) is never modified.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress

#: A migration: the statements that bring the schema from version N to N + 1.
Migration = Sequence[str]

#: ``MIGRATIONS[n]`` brings a database from ``user_version`` n to n + 1. Append, never edit.
MIGRATIONS: tuple[Migration, ...] = (
    (
        # Facts about the file itself (the last writer's version, when it was last opened).
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        # path is NULL once archived (renamed over or deleted); last_path keeps where it was.
        # scope is the server's root directory: notebook paths are relative to it.
        """CREATE TABLE conversations (
            id TEXT PRIMARY KEY,
            scope TEXT NOT NULL,
            path TEXT,
            last_path TEXT NOT NULL,
            created REAL NOT NULL,
            archived REAL
        )""",
        # NULL paths are distinct in a UNIQUE index, so archived conversations never collide.
        "CREATE UNIQUE INDEX conversations_by_path ON conversations (scope, path)",
        """CREATE TABLE messages (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
            run_id TEXT,
            role TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'notice')),
            text TEXT NOT NULL,
            created REAL NOT NULL
        )""",
        "CREATE INDEX messages_by_conversation ON messages (conversation_id, id)",
        # options, usage, summary and error are JSON; last_seq is the highest event seq stored.
        """CREATE TABLE runs (
            id TEXT PRIMARY KEY,
            conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
            prompt TEXT NOT NULL,
            options TEXT NOT NULL,
            anchor_cell_id TEXT,
            origin TEXT NOT NULL,
            state TEXT NOT NULL,
            reason TEXT NOT NULL DEFAULT '',
            usage TEXT,
            summary TEXT,
            error TEXT,
            created REAL NOT NULL,
            finished REAL,
            last_seq INTEGER NOT NULL DEFAULT 0
        )""",
        "CREATE INDEX runs_by_conversation ON runs (conversation_id, created)",
        "CREATE INDEX runs_by_anchor ON runs (conversation_id, anchor_cell_id, created)",
        # The cells a run generated, in insertion order, with their latest source and its hash.
        """CREATE TABLE run_cells (
            run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            cell_id TEXT NOT NULL,
            position INTEGER NOT NULL,
            step INTEGER,
            source TEXT NOT NULL,
            source_hash TEXT NOT NULL,
            attempt INTEGER NOT NULL DEFAULT 1,
            status TEXT,
            execution_count INTEGER,
            PRIMARY KEY (run_id, cell_id)
        )""",
        "CREATE INDEX run_cells_by_position ON run_cells (run_id, position)",
        # Every event but tokens, as the JSON the clients saw, for replay after a restart.
        """CREATE TABLE run_events (
            run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            type TEXT NOT NULL,
            time REAL NOT NULL,
            data TEXT NOT NULL,
            PRIMARY KEY (run_id, seq)
        )""",
    ),
    (
        # What the model was shown of each generated cell's last execution (for the export),
        # and each run's answer and status line as the loop composed them.
        "ALTER TABLE run_cells ADD COLUMN digest TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE runs ADD COLUMN answer TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE runs ADD COLUMN status_line TEXT NOT NULL DEFAULT ''",
    ),
)

#: The schema version this code writes (``PRAGMA user_version``).
SCHEMA_VERSION = len(MIGRATIONS)

#: Seconds a statement waits for another process's lock before giving up.
DEFAULT_BUSY_TIMEOUT = 5.0


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """One write transaction: committed at the end of the block, rolled back on any error."""
    # IMMEDIATE takes the write lock at once, so a busy database waits (busy timeout) here
    # rather than failing halfway through.
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        # A failed COMMIT can leave the transaction open; the next BEGIN must not find it.
        if conn.in_transaction:
            with suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        raise


def user_version(conn: sqlite3.Connection) -> int:
    """The schema version a database file says it has."""
    return int(conn.execute("PRAGMA user_version").fetchone()[0])
