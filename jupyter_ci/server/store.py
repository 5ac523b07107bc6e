"""The conversation store: each notebook's conversation and every run, kept in SQLite.

DESIGN.md §8 "Storage" and "Conversation identity", §4 "Record". One conversation per notebook
path (within one server root, the store's ``scope``), following renames; every run with its
prompt, options, anchor cell, state, usage, cost, outcome, its persisted events (never tokens)
and its generated cells with a hash of each cell's source (the truth for re-running a ``%%ci``
cell: a generated cell whose current source still hashes the same was not edited).

Threading. All SQLite work happens on one worker thread the store owns (a one-thread executor),
never on the server's event loop; the connection is created there and SQLite's own
``check_same_thread`` guard stays on. Jobs run in the order they were submitted, so a caller may
fire :meth:`ConversationStore.record_event` without awaiting it and still rely on the order.

Journal mode. The default rollback journal (``DELETE``), set explicitly on every open, not WAL:
WAL needs shared memory (the ``-shm`` file) that network filesystems do not provide, and Jupyter
data directories often live on NFS homes. WAL's gain, readers that do not wait for a writer, is
of no use with a single connection used from a single thread; the write volume (one small
transaction per run event, never per token) is far below what a rollback journal handles. The
busy timeout covers a second server (another root, same data directory) writing at the same time.

Failure. :meth:`ConversationStore.open` never raises for an unusable database: it falls back to
an in-memory database, sets ``persistent`` to False and ``problem`` to one sentence for the user.
A database written by a newer jupyter-ci (a higher ``PRAGMA user_version``) is never modified.

Source hash. :func:`source_hash` is the SHA-256 hex digest of the cell's exact source encoded as
UTF-8 (no normalisation of line endings or whitespace). A lone surrogate, which UTF-8 cannot
encode, counts as U+FFFD, as the browser's ``TextEncoder`` does; so the browser computes the same
digest with ``crypto.subtle.digest("SHA-256", new TextEncoder().encode(source))``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, TypeVar

from .._version import __version__
from ..errors import JupyterCIError

T = TypeVar("T")

log = logging.getLogger(__name__)

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
)

#: The schema version this code writes (``PRAGMA user_version``).
SCHEMA_VERSION = len(MIGRATIONS)

#: Seconds a statement waits for another process's lock before giving up.
DEFAULT_BUSY_TIMEOUT = 5.0

ROLES = ("user", "assistant", "notice")
ORIGINS = ("panel", "magic", "cli")
FINAL_STATES = ("done", "failed", "stopped")

#: What to do about any problem: said at the end of every ``problem`` sentence.
_REMEDY = "set c.JupyterCI.db_path to a writable file on a local disk"

# Option names whose words (split on non-alphanumerics) include one of these are dropped before
# storing: the options are already public, this is a second line of defence.
_SECRET_WORDS = frozenset(
    {
        "key",
        "apikey",
        "token",
        "secret",
        "password",
        "passwd",
        "credential",
        "credentials",
        "auth",
        "authorization",
        "bearer",
        "cookie",
        "headers",
    }
)
_SECRET_NAMES = frozenset({"api_base", "base_url", "api_url"})


def default_db_path() -> Path:
    """Where conversations are kept when ``c.JupyterCI.db_path`` is empty."""
    from jupyter_core.paths import jupyter_data_dir  # lazy: only the server needs it

    return Path(jupyter_data_dir()) / "jupyter-ci.sqlite"


def source_hash(source: str) -> str:
    """The hash a generated cell's source is recorded and compared with (see the module doc)."""
    return hashlib.sha256(_utf8(source)).hexdigest()


def public_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` without anything named like a key, token, secret or endpoint (recursively)."""
    return {
        str(name): _public_value(value)
        for name, value in options.items()
        if not _is_secret_name(str(name))
    }


# --- records ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Conversation:
    """A notebook's conversation. ``path`` is the notebook's path (its last one once archived)."""

    id: str
    scope: str
    path: str
    created: float
    #: When it was detached from its path (notebook deleted, or another renamed onto it).
    archived: float | None = None


@dataclass(frozen=True)
class Message:
    """One message of a conversation, as the chat panel shows it and the model's history has it."""

    id: int
    conversation_id: str
    role: str
    text: str
    run_id: str | None
    created: float


@dataclass(frozen=True)
class GeneratedCell:
    """A cell a run inserted: its id, the hash and text of its latest source, how it last ran."""

    cell_id: str
    source_hash: str
    source: str
    step: int | None
    attempt: int
    #: The last execution's status (ok, error, aborted, timed_out); None if it never ran.
    status: str | None
    execution_count: int | None


@dataclass(frozen=True)
class RunRecord:
    """A run as persisted: the request, where it stands or how it ended, its generated cells."""

    run_id: str
    conversation_id: str
    prompt: str
    options: Mapping[str, Any]
    anchor_cell_id: str | None
    origin: str
    state: str
    reason: str
    #: The run's Usage (prompt_tokens, completion_tokens, cost); None before the first reply.
    usage: Mapping[str, Any] | None
    #: The RunSummary of the finished event (cells, attempts, usage, seconds).
    summary: Mapping[str, Any] | None
    error: Mapping[str, Any] | None
    cells: tuple[GeneratedCell, ...]
    created: float
    finished: float | None
    #: The highest event sequence number stored (tokens are not stored, so there are gaps).
    last_seq: int

    @property
    def is_finished(self) -> bool:
        """Whether the run reached done, failed or stopped."""
        return self.state in FINAL_STATES

    @property
    def cell_hashes(self) -> list[tuple[str, str]]:
        """``(cell_id, source_hash)`` of each generated cell, in insertion order."""
        return [(cell.cell_id, cell.source_hash) for cell in self.cells]

    @property
    def cost(self) -> float | None:
        """The run's cost in USD; None when unknown (never read unknown as zero)."""
        usage = self.usage or {}
        cost = usage.get("cost")
        return float(cost) if isinstance(cost, (int, float)) else None


@dataclass(frozen=True)
class UsageTotals:
    """Tokens and cost summed over a conversation's runs; ``cost`` None if any was unknown."""

    prompt_tokens: int
    completion_tokens: int
    cost: float | None
    runs: int


class StoreError(JupyterCIError):
    """The conversation database failed after it was opened (disk full, file gone, locked)."""

    code = "store_error"

    def __init__(self, message: str) -> None:
        super().__init__(message, hint=f"To keep conversations, {_REMEDY}.")


class _Unusable(Exception):
    """Internal: the database file cannot be used; ``problem`` says so to the user."""

    def __init__(self, why: str, *, problem: str | None = None) -> None:
        super().__init__(why)
        self.problem = problem or _problem(why)


def _problem(why: str) -> str:
    return f"Conversations will not persist: {why}; {_REMEDY}."


# --- the store --------------------------------------------------------------------------------


class ConversationStore:
    """Conversations, messages and runs of one Jupyter server, in SQLite on a worker thread.

    ``path`` is the database file (None or "" for :func:`default_db_path`, ``":memory:"`` for a
    deliberately transient store). ``scope`` tells servers with different root directories
    apart when they share the file: pass the server's absolute root directory. Every method is
    a coroutine to call from the event loop (``record_event`` returns a future, see there);
    call :meth:`open` first and :meth:`close` at shutdown.
    """

    _MEMORY: ClassVar[str] = ":memory:"

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        scope: str = "",
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        migrations: Sequence[Migration] = MIGRATIONS,
        logger: logging.Logger | None = None,
    ) -> None:
        if path is None or str(path) == "":
            self.path: Path | None = default_db_path()
        elif str(path) == self._MEMORY:
            self.path = None
        else:
            self.path = Path(path).expanduser()
        self.scope = scope
        self.busy_timeout = busy_timeout
        #: Whether what is stored survives a restart (False: in memory, see ``problem``).
        self.persistent = False
        #: One sentence for the user when conversations will not (or no longer) persist.
        self.problem: str | None = None
        self.log = logger or log
        self._migrations = tuple(migrations)
        self._executor: ThreadPoolExecutor | None = None
        self._status = "new"  # new → open → closed; read and written on the event loop only
        # Touched only on the worker thread.
        self._conn: sqlite3.Connection | None = None
        self._threads: set[int] = set()

    @property
    def schema_version(self) -> int:
        """The schema version this store writes."""
        return len(self._migrations)

    @property
    def threads_used(self) -> frozenset[int]:
        """Idents of the threads the database was used from (one: the worker). Diagnostics."""
        return frozenset(self._threads)

    async def __aenter__(self) -> ConversationStore:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # --- opening and closing ------------------------------------------------------------------

    async def open(self) -> None:
        """Open (create, migrate) the database; on any failure fall back to memory, saying why.

        Never raises for an unusable file: afterwards ``persistent`` and ``problem`` tell.
        """
        if self._status != "new":
            return
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="jupyter-ci-store")
        loop = asyncio.get_running_loop()
        persistent, problem = await loop.run_in_executor(self._executor, self._open_in_worker)
        self.persistent, self.problem = persistent, problem
        self._status = "open"
        if problem:
            self.log.warning("jupyter-ci: %s", problem)

    async def close(self) -> None:
        """Finish the jobs already submitted, close the database and stop the worker thread."""
        if self._status != "open" or self._executor is None:
            self._status = "closed"
            return
        self._status = "closed"
        executor = self._executor
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(executor, self._close_in_worker)
        executor.shutdown(wait=False)

    def _open_in_worker(self) -> tuple[bool, str | None]:
        self._threads.add(threading.get_ident())
        if self.path is None:
            self._conn = self._open_memory()
            return False, None
        try:
            self._conn = self._open_file(self.path)
            return True, None
        except _Unusable as err:
            problem = err.problem
        except (OSError, sqlite3.Error, ValueError) as err:
            # ValueError: a path SQLite cannot take (an embedded NUL character).
            problem = _problem(_why(self.path, err))
        self._conn = self._open_memory()
        return False, problem

    def _open_file(self, path: Path) -> sqlite3.Connection:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise _Unusable(
                f"the folder for {path} could not be created ({err.strerror or err})"
            ) from err
        if path.is_dir():
            raise _Unusable(f"{path} is a folder, not a database file")
        conn = self._connect(str(path))
        try:
            # Read before anything is written: a newer schema must leave the file untouched.
            version = _user_version(conn)
            if version > self.schema_version:
                raise self._newer(version)
            conn.execute("PRAGMA journal_mode = DELETE").fetchone()
            self._migrate(conn)
            self._write_probe(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _newer(self, version: int) -> _Unusable:
        return _Unusable(
            "newer schema",
            problem=(
                f"Conversations will not persist: {self.path} was written by a newer "
                f"jupyter-ci (schema version {version}; this one knows up to "
                f"{self.schema_version}) and was left untouched; upgrade jupyter-ci, "
                "or set c.JupyterCI.db_path to another file."
            ),
        )

    def _open_memory(self) -> sqlite3.Connection:
        conn = self._connect(self._MEMORY)
        self._migrate(conn)
        return conn

    def _connect(self, target: str) -> sqlite3.Connection:
        # isolation_level=None: we issue BEGIN/COMMIT ourselves (the module's implicit
        # transactions would not cover DDL in migrations).
        conn = sqlite3.connect(target, timeout=self.busy_timeout, isolation_level=None)
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
        conn.execute("PRAGMA foreign_keys = ON")
        return conn

    def _migrate(self, conn: sqlite3.Connection) -> None:
        """Apply the missing migrations in order, all in one transaction."""
        if _user_version(conn) == self.schema_version:
            return
        with _transaction(conn):
            # Read again under the write lock: another server may have migrated meanwhile.
            version = _user_version(conn)
            if version > self.schema_version:
                raise self._newer(version)
            for number in range(version, self.schema_version):
                for statement in self._migrations[number]:
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {int(self.schema_version)}")

    def _write_probe(self, conn: sqlite3.Connection) -> None:
        # Opening for reading succeeds on read-only files and folders; find out now, not at the
        # first run event, whether writes (and the journal file next to the database) work.
        with _transaction(conn):
            conn.executemany(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                [("opened", repr(time.time())), ("writer", __version__)],
            )

    def _close_in_worker(self) -> None:
        self._threads.add(threading.get_ident())
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # --- running jobs on the worker -----------------------------------------------------------

    def _submit(self, job: Callable[[sqlite3.Connection], T]) -> asyncio.Future[T]:
        """Queue ``job`` on the worker now (so jobs keep the order of the calls)."""
        if self._status != "open" or self._executor is None:
            raise RuntimeError(
                "The conversation store is not open: call open() first (and not after close())."
            )
        loop = asyncio.get_running_loop()
        return loop.run_in_executor(self._executor, self._run_job, job)

    def _run_job(self, job: Callable[[sqlite3.Connection], T]) -> T:
        self._threads.add(threading.get_ident())
        if self._conn is None:
            raise RuntimeError("The conversation store's database is closed.")
        return job(self._conn)

    async def _do(self, job: Callable[[sqlite3.Connection], T]) -> T:
        try:
            return await self._submit(job)
        except sqlite3.Error as err:
            raise self._failed(err) from err

    def _failed(self, err: BaseException) -> StoreError:
        where = str(self.path) if self.path is not None else "memory"
        message = f"The conversation database ({where}) failed: {err}."
        if self.persistent:
            self.problem = f"Conversations may not be saved: {err}; {_REMEDY}."
        self.log.warning("jupyter-ci: %s", message)
        return StoreError(message)

    # --- conversations ------------------------------------------------------------------------

    async def conversation_for(self, notebook_path: str) -> Conversation:
        """The conversation of the notebook at ``notebook_path``, created on first use."""
        path = _norm(notebook_path)
        return await self._do(partial(_conversation_for, self.scope, path))

    async def conversation(self, conversation_id: str) -> Conversation | None:
        """A conversation by id (archived ones too), or None."""
        return await self._do(partial(_conversation, conversation_id))

    async def rename(self, old_path: str, new_path: str) -> int:
        """Make conversations follow a renamed notebook (or folder); returns how many moved.

        A folder's rename moves the conversations of every notebook under it. A conversation
        already at a destination path belonged to a file that the rename replaced: it is
        archived (kept, with its runs, but no longer found by path) and the moved one takes the
        path. Jupyter's contents API refuses renames onto existing files, so this arises only
        when files were moved behind Jupyter's back.
        """
        old, new = _norm(old_path), _norm(new_path)
        if old == new:
            return 0
        return await self._do(partial(_rename, self.scope, old, new))

    async def forget_path(self, notebook_path: str) -> int:
        """Archive the conversation of a deleted notebook (or of every notebook in a folder).

        A new notebook later created at the same path starts a new conversation; the archived
        one keeps its messages and runs. Returns how many were archived.
        """
        return await self._do(partial(_forget, self.scope, _norm(notebook_path)))

    async def clear(self, conversation_id: str) -> None:
        """Delete a conversation's messages and runs (with their cells and events).

        The conversation itself (id, path) stays. Do not clear while one of its runs is active:
        that run's later events would be dropped (and logged).
        """
        await self._do(partial(_clear, conversation_id))

    # --- messages -----------------------------------------------------------------------------

    async def add_message(
        self, conversation_id: str, role: str, text: str, run_id: str | None = None
    ) -> Message:
        """Append a message (``user``, ``assistant`` or ``notice``) to a conversation.

        ``message`` run events are appended by :meth:`record_event` already; use this for the
        user's prompt and for anything said outside a run's events.
        """
        if role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
        return await self._do(partial(_add_message, conversation_id, role, text, run_id, None))

    async def messages(self, conversation_id: str, limit: int | None = 200) -> list[Message]:
        """The last ``limit`` messages (all if None), oldest first."""
        return await self._do(partial(_messages, conversation_id, limit))

    # --- runs ---------------------------------------------------------------------------------

    async def start_run(
        self,
        conversation_id: str,
        run_id: str,
        prompt: str,
        options: Mapping[str, Any],
        anchor_cell_id: str | None,
        origin: str,
    ) -> RunRecord:
        """Record a new run (state ``queued``). Options named like secrets are dropped.

        The prompt is not added as a message: call :meth:`add_message` for it (read the history
        for the model before, so the prompt is not in it twice).
        """
        if origin not in ORIGINS:
            raise ValueError(f"origin must be one of {', '.join(ORIGINS)}, not {origin!r}")
        job = partial(
            _start_run,
            conversation_id,
            run_id,
            prompt,
            public_options(options),
            anchor_cell_id,
            origin,
        )
        return await self._do(job)

    def record_event(self, run_id: str, event: Mapping[str, Any]) -> asyncio.Future[None]:
        """Persist one run event (one transaction); ``token`` events are ignored.

        Besides the event itself (for :meth:`events`): ``state`` and ``finished`` update the
        run's state, ``usage`` its usage, ``cell_inserted``/``cell_updated`` its generated cells
        and their source hashes, ``attempt`` and ``execution_finished`` the cell's last attempt
        and status, ``message`` appends to the conversation's messages.

        The job is queued at the call, so it may be called from a synchronous event callback
        without awaiting. It never raises: failures (unknown run, database errors) are logged,
        and a database failure is also reflected in ``problem``; a run must not fail because
        its record could not be written. Await the returned future to wait for the write.
        """
        loop = asyncio.get_running_loop()
        result: asyncio.Future[None] = loop.create_future()
        if event.get("type") == "token":
            result.set_result(None)
            return result
        try:
            job = self._submit(partial(_record_event, run_id, dict(event)))
        except RuntimeError:
            self.log.debug("jupyter-ci: event of run %s after the store closed: dropped", run_id)
            result.set_result(None)
            return result

        def settle(done: asyncio.Future[None]) -> None:
            err = None if done.cancelled() else done.exception()
            if isinstance(err, sqlite3.Error):
                self._failed(err)
            elif err is not None:
                # KeyError/ValueError: an unknown run or a repeated seq; anything else is a bug.
                expected = isinstance(err, (KeyError, ValueError))
                self.log.warning(
                    "jupyter-ci: a %s event of run %s was not recorded: %s",
                    event.get("type"),
                    run_id,
                    err,
                    exc_info=None if expected else err,
                )
            if not result.done():
                result.set_result(None)

        job.add_done_callback(settle)
        return result

    async def record_events(self, run_id: str, events: Sequence[Mapping[str, Any]]) -> int:
        """Persist several events of a run in one transaction; returns how many were new.

        The same effects as :meth:`record_event` for each, in order; ``token`` events and
        events already stored (same ``seq``) are skipped. Raises :class:`StoreError` on a
        database failure and ``KeyError`` for an unknown run.
        """
        kept = [dict(event) for event in events if event.get("type") != "token"]
        if not kept:
            return 0
        return await self._do(partial(_record_events, run_id, kept))

    async def set_cell_source(self, run_id: str, cell_id: str, source: str) -> GeneratedCell:
        """Record a generated cell's final source (and its hash) where no event carried it.

        Streamed cells are inserted empty and filled by tokens, which are not stored; review
        edits replace a source without an event. Raises KeyError if the run did not insert it.
        """
        return await self._do(partial(_set_cell_source, run_id, cell_id, source))

    async def finish_run(
        self,
        run_id: str,
        state: str,
        reason: str,
        summary: Mapping[str, Any] | None,
        error: Mapping[str, Any] | None,
    ) -> RunRecord:
        """Record how a run ended (``done``, ``failed`` or ``stopped``) with its summary."""
        if state not in FINAL_STATES:
            raise ValueError(f"state must be one of {', '.join(FINAL_STATES)}, not {state!r}")
        job = partial(_finish_run, run_id, state, reason, summary, error, time.time())
        return await self._do(job)

    async def abandon_unfinished_runs(
        self, state: str = "failed", reason: str = "server_stopped"
    ) -> list[str]:
        """End this scope's runs left unfinished by a previous server process; their ids.

        Call once at startup, before any run starts: a run cannot outlive its server.
        """
        if state not in FINAL_STATES:
            raise ValueError(f"state must be one of {', '.join(FINAL_STATES)}, not {state!r}")
        return await self._do(partial(_abandon, self.scope, state, reason))

    async def run(self, run_id: str) -> RunRecord | None:
        """A run by id, or None."""
        return await self._do(partial(_run_record, run_id))

    async def runs(self, conversation_id: str) -> list[RunRecord]:
        """A conversation's runs, oldest first."""
        return await self._do(partial(_runs, conversation_id))

    async def latest_run_for_anchor(
        self, conversation_id: str, anchor_cell_id: str
    ) -> RunRecord | None:
        """The newest run of this conversation anchored at ``anchor_cell_id`` (a ``%%ci`` cell).

        Finished or not: check ``state``. Its cells' hashes tell which generated cells are
        unedited (compare :func:`source_hash` of their current source).
        """
        return await self._do(partial(_latest_for_anchor, conversation_id, anchor_cell_id))

    async def events(self, run_id: str, after_seq: int = 0) -> list[dict[str, Any]]:
        """A run's persisted events with ``seq`` greater than ``after_seq``, in order.

        Tokens were never stored: replay shows cells as inserted and updated, and the run
        record's ``cells`` hold their final sources.
        """
        return await self._do(partial(_events, run_id, after_seq))

    async def events_of(self, run_ids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
        """The persisted events of several runs, by run id, in one trip to the database."""
        return await self._do(partial(_events_of, list(run_ids)))

    async def usage_totals(self, conversation_id: str) -> UsageTotals:
        """Tokens and cost over a conversation's runs; cost None if any run's was unknown.

        A run that used no tokens costs nothing even when its model's price is unknown.
        """
        return await self._do(partial(_usage_totals, conversation_id))


# --- worker-side functions (each gets the connection; run only on the worker thread) ---------


@contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
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


def _user_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def _conversation_for(scope: str, path: str, conn: sqlite3.Connection) -> Conversation:
    query = "SELECT * FROM conversations WHERE scope = ? AND path = ?"
    row = conn.execute(query, (scope, path)).fetchone()
    if row is None:
        with _transaction(conn):
            row = conn.execute(query, (scope, path)).fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO conversations (id, scope, path, last_path, created) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (uuid.uuid4().hex, scope, path, path, time.time()),
                )
                row = conn.execute(query, (scope, path)).fetchone()
    return _conversation_of(row)


def _conversation(conversation_id: str, conn: sqlite3.Connection) -> Conversation | None:
    row = conn.execute("SELECT * FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
    return None if row is None else _conversation_of(row)


def _live_under(conn: sqlite3.Connection, scope: str, path: str) -> list[tuple[str, str]]:
    """(id, path) of the live conversations at ``path`` or under the folder ``path``."""
    rows = conn.execute(
        "SELECT id, path FROM conversations WHERE scope = ? "
        "AND (path = ? OR substr(path, 1, ?) = ?)",
        (scope, path, len(path) + 1, path + "/"),
    ).fetchall()
    return [(str(row["id"]), str(row["path"])) for row in rows]


def _rename(scope: str, old: str, new: str, conn: sqlite3.Connection) -> int:
    now = time.time()
    with _transaction(conn):
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
            target = _text(new + path[len(old) :])
            conn.execute(
                "UPDATE conversations SET path = ?, last_path = ? WHERE id = ?",
                (target, target, conversation_id),
            )
    return len(moving)


def _forget(scope: str, path: str, conn: sqlite3.Connection) -> int:
    with _transaction(conn):
        gone = _live_under(conn, scope, path)
        conn.executemany(
            "UPDATE conversations SET path = NULL, archived = ? WHERE id = ?",
            [(time.time(), conversation_id) for conversation_id, _ in gone],
        )
    return len(gone)


def _clear(conversation_id: str, conn: sqlite3.Connection) -> None:
    _require_conversation(conn, conversation_id)
    with _transaction(conn):
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


def _add_message(
    conversation_id: str,
    role: str,
    text: str,
    run_id: str | None,
    created: float | None,
    conn: sqlite3.Connection,
) -> Message:
    _require_conversation(conn, conversation_id)
    with _transaction(conn):
        return _insert_message(conn, conversation_id, role, text, run_id, created)


def _insert_message(
    conn: sqlite3.Connection,
    conversation_id: str,
    role: str,
    text: str,
    run_id: str | None,
    created: float | None,
) -> Message:
    when = time.time() if created is None else created
    cursor = conn.execute(
        "INSERT INTO messages (conversation_id, run_id, role, text, created) "
        "VALUES (?, ?, ?, ?, ?)",
        (conversation_id, run_id, role, _text(text), when),
    )
    return Message(int(cursor.lastrowid or 0), conversation_id, role, text, run_id, when)


def _messages(conversation_id: str, limit: int | None, conn: sqlite3.Connection) -> list[Message]:
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


def _start_run(
    conversation_id: str,
    run_id: str,
    prompt: str,
    options: dict[str, Any],
    anchor_cell_id: str | None,
    origin: str,
    conn: sqlite3.Connection,
) -> RunRecord:
    _require_conversation(conn, conversation_id)
    if conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is not None:
        raise ValueError(f"a run with id {run_id!r} is already recorded")
    with _transaction(conn):
        conn.execute(
            "INSERT INTO runs (id, conversation_id, prompt, options, anchor_cell_id, origin, "
            "state, reason, created) VALUES (?, ?, ?, ?, ?, ?, 'queued', '', ?)",
            (
                run_id,
                conversation_id,
                _text(prompt),
                _dumps(options),
                anchor_cell_id,
                origin,
                time.time(),
            ),
        )
    record = _run_record(run_id, conn)
    assert record is not None
    return record


def _record_event(run_id: str, event: dict[str, Any], conn: sqlite3.Connection) -> None:
    with _transaction(conn):
        if not _apply_event(run_id, event, conn):
            raise ValueError(f"event {event.get('seq')} of run {run_id!r} is already recorded")


def _record_events(run_id: str, events: list[dict[str, Any]], conn: sqlite3.Connection) -> int:
    """Record several events in one transaction (one sync to disk); returns how many were new."""
    with _transaction(conn):
        return sum(1 for event in events if _apply_event(run_id, event, conn))


def _apply_event(run_id: str, event: dict[str, Any], conn: sqlite3.Connection) -> bool:
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
        (run_id, seq, kind, when, _dumps(event)),
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
            _text(source),
            source_hash(source),
        ),
    )


def _on_cell_updated(
    conn: sqlite3.Connection, run_id: str, _conv: str, event: dict[str, Any], _when: float
) -> None:
    # Only cells this run generated are tracked; a fix of someone else's cell stays an event.
    source = str(event.get("source", ""))
    attempt = event.get("attempt")
    conn.execute(
        "UPDATE run_cells SET source = ?, source_hash = ?, attempt = max(attempt, ?) "
        "WHERE run_id = ? AND cell_id = ?",
        (
            _text(source),
            source_hash(source),
            attempt if isinstance(attempt, int) else 1,
            run_id,
            str(event.get("cell_id", "")),
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
        "UPDATE run_cells SET status = ?, execution_count = ? WHERE run_id = ? AND cell_id = ?",
        (
            str(event.get("status", "")),
            count if isinstance(count, int) else None,
            run_id,
            str(event.get("cell_id", "")),
        ),
    )


def _on_message(
    conn: sqlite3.Connection, run_id: str, conv: str, event: dict[str, Any], when: float
) -> None:
    role = event.get("role")
    if role in ROLES:
        _insert_message(conn, conv, str(role), str(event.get("text", "")), run_id, when)


def _on_usage(
    conn: sqlite3.Connection, run_id: str, _conv: str, event: dict[str, Any], _when: float
) -> None:
    usage = event.get("usage")
    if isinstance(usage, dict):
        conn.execute("UPDATE runs SET usage = ? WHERE id = ?", (_dumps(usage), run_id))


def _on_finished(
    conn: sqlite3.Connection, run_id: str, _conv: str, event: dict[str, Any], when: float
) -> None:
    summary = event.get("summary")
    error = event.get("error")
    _write_finish(
        conn,
        run_id,
        str(event.get("state", "")),
        str(event.get("reason", "")),
        summary if isinstance(summary, dict) else None,
        error if isinstance(error, dict) else None,
        when,
    )


_EFFECTS: dict[str, Callable[[sqlite3.Connection, str, str, dict[str, Any], float], None]] = {
    "state": _on_state,
    "cell_inserted": _on_cell_inserted,
    "cell_updated": _on_cell_updated,
    "attempt": _on_attempt,
    "execution_finished": _on_execution_finished,
    "message": _on_message,
    "usage": _on_usage,
    "finished": _on_finished,
}


def _write_finish(
    conn: sqlite3.Connection,
    run_id: str,
    state: str,
    reason: str,
    summary: Mapping[str, Any] | None,
    error: Mapping[str, Any] | None,
    when: float,
) -> None:
    usage = summary.get("usage") if summary is not None else None
    conn.execute(
        "UPDATE runs SET state = ?, reason = ?, summary = ?, error = ?, "
        "usage = coalesce(?, usage), finished = ? WHERE id = ?",
        (
            state,
            reason,
            None if summary is None else _dumps(summary),
            None if error is None else _dumps(error),
            _dumps(usage) if isinstance(usage, dict) else None,
            when,
            run_id,
        ),
    )


def _set_cell_source(
    run_id: str, cell_id: str, source: str, conn: sqlite3.Connection
) -> GeneratedCell:
    with _transaction(conn):
        cursor = conn.execute(
            "UPDATE run_cells SET source = ?, source_hash = ? WHERE run_id = ? AND cell_id = ?",
            (_text(source), source_hash(source), run_id, cell_id),
        )
        if cursor.rowcount == 0:
            raise KeyError(f"run {run_id!r} did not insert a cell {cell_id!r}")
    row = conn.execute(
        "SELECT * FROM run_cells WHERE run_id = ? AND cell_id = ?", (run_id, cell_id)
    ).fetchone()
    return _cell_of(row)


def _finish_run(
    run_id: str,
    state: str,
    reason: str,
    summary: Mapping[str, Any] | None,
    error: Mapping[str, Any] | None,
    when: float,
    conn: sqlite3.Connection,
) -> RunRecord:
    with _transaction(conn):
        if conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None:
            raise KeyError(f"no run {run_id!r} is recorded")
        _write_finish(conn, run_id, state, reason, summary, error, when)
    record = _run_record(run_id, conn)
    assert record is not None
    return record


def _abandon(scope: str, state: str, reason: str, conn: sqlite3.Connection) -> list[str]:
    with _transaction(conn):
        rows = conn.execute(
            "SELECT runs.id FROM runs JOIN conversations ON conversations.id = "
            "runs.conversation_id WHERE conversations.scope = ? "
            "AND runs.state NOT IN ('done', 'failed', 'stopped')",
            (scope,),
        ).fetchall()
        ids = [str(row["id"]) for row in rows]
        conn.executemany(
            "UPDATE runs SET state = ?, reason = ?, finished = ? WHERE id = ?",
            [(state, reason, time.time(), run_id) for run_id in ids],
        )
    return ids


def _run_record(run_id: str, conn: sqlite3.Connection) -> RunRecord | None:
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
        options=_loads(row["options"]) or {},
        anchor_cell_id=row["anchor_cell_id"],
        origin=str(row["origin"]),
        state=str(row["state"]),
        reason=str(row["reason"]),
        usage=_loads(row["usage"]),
        summary=_loads(row["summary"]),
        error=_loads(row["error"]),
        cells=tuple(_cell_of(cell) for cell in cells),
        created=float(row["created"]),
        finished=None if finished is None else float(finished),
        last_seq=int(row["last_seq"]),
    )


def _runs(conversation_id: str, conn: sqlite3.Connection) -> list[RunRecord]:
    rows = conn.execute(
        "SELECT id FROM runs WHERE conversation_id = ? ORDER BY rowid", (conversation_id,)
    ).fetchall()
    records = [_run_record(str(row["id"]), conn) for row in rows]
    return [record for record in records if record is not None]


def _latest_for_anchor(
    conversation_id: str, anchor_cell_id: str, conn: sqlite3.Connection
) -> RunRecord | None:
    # rowid grows with each insert, so it orders runs even when two share a timestamp.
    row = conn.execute(
        "SELECT id FROM runs WHERE conversation_id = ? AND anchor_cell_id = ? "
        "ORDER BY rowid DESC LIMIT 1",
        (conversation_id, anchor_cell_id),
    ).fetchone()
    return None if row is None else _run_record(str(row["id"]), conn)


def _events(run_id: str, after_seq: int, conn: sqlite3.Connection) -> list[dict[str, Any]]:
    rows = conn.execute(
        "SELECT data FROM run_events WHERE run_id = ? AND seq > ? ORDER BY seq",
        (run_id, after_seq),
    ).fetchall()
    return [json.loads(row["data"]) for row in rows]


def _events_of(run_ids: list[str], conn: sqlite3.Connection) -> dict[str, list[dict[str, Any]]]:
    return {run_id: _events(run_id, 0, conn) for run_id in run_ids}


def _usage_totals(conversation_id: str, conn: sqlite3.Connection) -> UsageTotals:
    rows = conn.execute(
        "SELECT usage FROM runs WHERE conversation_id = ?", (conversation_id,)
    ).fetchall()
    prompt = completion = 0
    cost: float | None = 0.0
    for row in rows:
        usage = _loads(row["usage"]) or {}
        run_prompt = _int(usage.get("prompt_tokens"))
        run_completion = _int(usage.get("completion_tokens"))
        prompt += run_prompt
        completion += run_completion
        run_cost = usage.get("cost")
        if isinstance(run_cost, (int, float)) and not isinstance(run_cost, bool):
            cost = None if cost is None else cost + float(run_cost)
        elif run_prompt + run_completion > 0:
            cost = None  # tokens spent at an unknown price: the total is unknown, not lower
    return UsageTotals(prompt, completion, cost, len(rows))


def _require_conversation(conn: sqlite3.Connection, conversation_id: str) -> None:
    found = conn.execute("SELECT 1 FROM conversations WHERE id = ?", (conversation_id,))
    if found.fetchone() is None:
        raise KeyError(f"no conversation {conversation_id!r}")


# --- small helpers ----------------------------------------------------------------------------


def _conversation_of(row: sqlite3.Row) -> Conversation:
    archived = row["archived"]
    return Conversation(
        id=str(row["id"]),
        scope=str(row["scope"]),
        path=str(row["path"] if row["path"] is not None else row["last_path"]),
        created=float(row["created"]),
        archived=None if archived is None else float(archived),
    )


def _cell_of(row: sqlite3.Row) -> GeneratedCell:
    return GeneratedCell(
        cell_id=str(row["cell_id"]),
        source_hash=str(row["source_hash"]),
        source=str(row["source"]),
        step=row["step"],
        attempt=int(row["attempt"]),
        status=row["status"],
        execution_count=row["execution_count"],
    )


def _norm(notebook_path: str) -> str:
    """A contents-API path: "/"-separated, relative to the server root, no outer slashes."""
    path = _text(str(notebook_path).replace("\\", "/").strip("/"))
    if not path:
        raise ValueError("a notebook path is required")
    return path


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates (from JSON such as "\ud800") become U+FFFD, as TextEncoder does.
        fixed = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return fixed.encode("utf-8")


def _text(text: str) -> str:
    """Text SQLite can store (it needs valid UTF-8)."""
    return _utf8(text).decode("utf-8")


def _dumps(value: Any) -> str:
    # ensure_ascii escapes lone surrogates, which UTF-8 (and so SQLite) could not hold.
    return json.dumps(value, ensure_ascii=True, default=str, separators=(",", ":"))


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _is_secret_name(name: str) -> bool:
    lowered = name.lower()
    if lowered in _SECRET_NAMES:
        return True
    return any(word in _SECRET_WORDS for word in re.split(r"[^a-z0-9]+", lowered))


def _public_value(value: Any) -> Any:
    if isinstance(value, Mapping):
        return public_options(value)
    if isinstance(value, (list, tuple)):
        return [_public_value(item) for item in value]
    return value


def _why(path: Path, err: BaseException) -> str:
    """The middle of the problem sentence for an error opening ``path``."""
    if isinstance(err, OSError):
        return f"{err.filename or path} could not be used ({err.strerror or err})"
    text = str(err).lower()
    if "not a database" in text:
        return f"{path} is not a SQLite database (it was left untouched)"
    if "locked" in text or "busy" in text:
        return f"{path} is locked by another program"
    if "readonly" in text or "read-only" in text:
        return f"{path} is read-only"
    if "unable to open" in text:
        return f"{path} could not be opened or created"
    return f"{path} could not be used ({err})"
