"""The conversation store: each notebook's conversation and every run, kept in SQLite.

One conversation per notebook path (within one server root, the store's ``scope``), following
renames; every run with its prompt, options, anchor cell, state, usage, cost, answer, status line,
its stored events (never tokens) and the cells it generated with a hash of each one's source (the
truth for re-running a ``%%ci`` cell: a generated cell whose current source still hashes the same
was not edited). A run's record is a projection of its events (:mod:`.projection`): the loop is the
only producer of run facts, and the store writes nothing else about a run.

Threading. All SQLite work happens on one worker thread the store owns (a one-thread executor),
never on the server's event loop; the connection is created there and SQLite's own
``check_same_thread`` guard stays on. Jobs run in the order they were submitted.

Journal mode. The default rollback journal (``DELETE``), set explicitly on every open, not WAL:
WAL needs shared memory (the ``-shm`` file) that network filesystems do not provide, and Jupyter
data directories often live on NFS homes. WAL's gain, readers that do not wait for a writer, is of
no use with a single connection used from a single thread; the write volume (one small
transaction per batch of run events, never per token) is far below what a rollback journal
handles. The busy timeout covers a second server (another root, same data directory) writing at
the same time.

Failure. :meth:`ConversationStore.open` never raises for an unusable database: it falls back to
an in-memory database, sets ``persistent`` to False and ``problem`` to one sentence for the user.
A database written by a newer jupyter-ci (a higher ``PRAGMA user_version``) is never modified.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, TypeVar

from ..._version import __version__
from . import queries as q
from .projection import FinishedFactory, abandon, record_events
from .records import (
    ORIGINS,
    REMEDY,
    ROLES,
    Conversation,
    Message,
    RunRecord,
    StoreError,
    Unusable,
    UsageTotals,
    norm_path,
    problem_sentence,
    public_options,
    why_unusable,
)
from .schema import DEFAULT_BUSY_TIMEOUT, MIGRATIONS, Migration, transaction, user_version

T = TypeVar("T")

log = logging.getLogger("jupyter_ci.server.store")


def default_db_path() -> Path:
    """Where conversations are kept when ``c.JupyterCI.db_path`` is empty."""
    from jupyter_core.paths import jupyter_data_dir  # lazy: only the server needs it

    return Path(jupyter_data_dir()) / "jupyter-ci.sqlite"


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

    @property
    def schema_version(self) -> int:
        """The schema version this store writes."""
        return len(self._migrations)

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
        if self.path is None:
            self._conn = self._open_memory()
            return False, None
        try:
            self._conn = self._open_file(self.path)
            return True, None
        except Unusable as err:
            problem = err.problem
        except (OSError, sqlite3.Error, ValueError) as err:
            # ValueError: a path SQLite cannot take (an embedded NUL character).
            problem = problem_sentence(why_unusable(self.path, err))
        self._conn = self._open_memory()
        return False, problem

    def _open_file(self, path: Path) -> sqlite3.Connection:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise Unusable(
                f"the folder for {path} could not be created ({err.strerror or err})"
            ) from err
        if path.is_dir():
            raise Unusable(f"{path} is a folder, not a database file")
        conn = self._connect(str(path))
        try:
            # Read before anything is written: a newer schema must leave the file untouched.
            version = user_version(conn)
            if version > self.schema_version:
                raise self._newer(version)
            conn.execute("PRAGMA journal_mode = DELETE").fetchone()
            self._migrate(conn)
            self._write_probe(conn)
            q.canonical_paths(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _newer(self, version: int) -> Unusable:
        return Unusable(
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
        if user_version(conn) == self.schema_version:
            return
        with transaction(conn):
            # Read again under the write lock: another server may have migrated meanwhile.
            version = user_version(conn)
            if version > self.schema_version:
                raise self._newer(version)
            for number in range(version, self.schema_version):
                for statement in self._migrations[number]:
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {int(self.schema_version)}")

    def _write_probe(self, conn: sqlite3.Connection) -> None:
        # Opening for reading succeeds on read-only files and folders; find out now, not at the
        # first run event, whether writes (and the journal file next to the database) work.
        with transaction(conn):
            conn.executemany(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                [("opened", repr(time.time())), ("writer", __version__)],
            )

    def _close_in_worker(self) -> None:
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
            self.problem = f"Conversations may not be saved: {err}; {REMEDY}."
        self.log.warning("jupyter-ci: %s", message)
        return StoreError(message)

    # --- conversations ------------------------------------------------------------------------

    async def conversation_for(self, notebook_path: str) -> Conversation:
        """The conversation of the notebook at ``notebook_path``, created on first use."""
        path = norm_path(notebook_path)
        return await self._do(partial(q.conversation_for, self.scope, path))

    async def find_conversation(self, notebook_path: str) -> Conversation | None:
        """The conversation of the notebook at ``notebook_path``, if it has one (makes none)."""
        path = norm_path(notebook_path)
        return await self._do(partial(q.find_conversation, self.scope, path))

    async def conversation(self, conversation_id: str) -> Conversation | None:
        """A conversation by id (archived ones too), or None."""
        return await self._do(partial(q.conversation, conversation_id))

    async def rename(self, old_path: str, new_path: str) -> int:
        """Make conversations follow a renamed notebook (or folder); returns how many moved.

        A folder's rename moves the conversations of every notebook under it. A conversation
        already at a destination path belonged to a file that the rename replaced: it is
        archived (kept, with its runs, but no longer found by path) and the moved one takes the
        path. Jupyter's contents API refuses renames onto existing files, so this arises only
        when files were moved behind Jupyter's back.
        """
        old, new = norm_path(old_path), norm_path(new_path)
        if old == new:
            return 0
        return await self._do(partial(q.rename, self.scope, old, new))

    async def forget_path(self, notebook_path: str) -> int:
        """Archive the conversation of a deleted notebook (or of every notebook in a folder).

        A new notebook later created at the same path starts a new conversation; the archived
        one keeps its messages and runs. Returns how many were archived.
        """
        return await self._do(partial(q.forget, self.scope, norm_path(notebook_path)))

    async def clear(self, conversation_id: str) -> None:
        """Delete a conversation's messages and runs (with their cells and events).

        The conversation itself (id, path) stays. Do not clear while one of its runs is active:
        that run's later events would be dropped (and logged).
        """
        await self._do(partial(q.clear, conversation_id))

    # --- messages -----------------------------------------------------------------------------

    async def add_message(
        self, conversation_id: str, role: str, text: str, run_id: str | None = None
    ) -> Message:
        """Append a message (``user``, ``assistant`` or ``notice``) to a conversation.

        ``message`` run events are appended by :meth:`record_events` already; use this for the
        user's prompt.
        """
        if role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
        return await self._do(partial(q.add_message, conversation_id, role, text, run_id, None))

    async def messages(self, conversation_id: str, limit: int | None = 200) -> list[Message]:
        """The last ``limit`` messages (all if None), oldest first."""
        return await self._do(partial(q.messages, conversation_id, limit))

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
            q.start_run,
            conversation_id,
            run_id,
            prompt,
            public_options(options),
            anchor_cell_id,
            origin,
        )
        return await self._do(job)

    async def record_events(self, run_id: str, events: Sequence[Mapping[str, Any]]) -> int:
        """Persist events of a run in one transaction, with their effects on the run record
        (:mod:`.projection`); returns how many were new.

        ``token`` events and events already stored (same ``seq``) are skipped. Raises
        :class:`StoreError` on a database failure and ``KeyError`` for an unknown run.
        """
        kept = [dict(event) for event in events if event.get("type") != "token"]
        if not kept:
            return 0
        return await self._do(partial(record_events, run_id, kept))

    async def abandon_unfinished_runs(self, finished: FinishedFactory) -> list[str]:
        """End this scope's runs left unfinished by a previous server process; their ids.

        ``finished(record)`` makes the ``finished`` event each one ends with (stopped, the server
        stopped): it is recorded like any event, so every view of the run sees it ended. Call
        once at startup, before any run starts: a run cannot outlive its server.
        """
        return await self._do(partial(abandon, self.scope, finished))

    async def run(self, run_id: str) -> RunRecord | None:
        """A run by id, or None."""
        return await self._do(partial(q.run_record, run_id))

    async def runs(self, conversation_id: str) -> list[RunRecord]:
        """A conversation's runs, oldest first."""
        return await self._do(partial(q.runs, conversation_id))

    async def latest_run_for_anchor(
        self, conversation_id: str, anchor_cell_id: str
    ) -> RunRecord | None:
        """The newest run of the ``%%ci`` cell ``anchor_cell_id`` (its own requests, not the
        panel's placed after it) in this conversation.

        Finished or not: check ``state``. Its cells' hashes tell which generated cells are
        unedited (compare :func:`source_hash` of their current source).
        """
        return await self._do(partial(q.latest_for_anchor, conversation_id, anchor_cell_id))

    async def events_of(self, run_ids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
        """The persisted events of several runs, by run id, in one trip to the database."""
        return await self._do(partial(q.events_of, list(run_ids)))

    async def usage_totals(self, conversation_id: str) -> UsageTotals:
        """Tokens and cost over a conversation's runs; cost None if any run's was unknown.

        A run that used no tokens costs nothing even when its model's price is unknown.
        """
        return await self._do(partial(q.usage_totals, conversation_id))
