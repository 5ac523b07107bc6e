"""What the conversation store keeps, as Python values, and the small rules for storing them.

The records (:class:`Conversation`, :class:`Message`, :class:`RunRecord` with its
:class:`GeneratedCell` list, :class:`UsageTotals`), how a generated cell's source is hashed, which
option names never reach the database, and the conversions SQLite needs (valid UTF-8, JSON).
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...agent.cells import source_hash as source_hash
from ...agent.cells import utf8
from ...errors import JupyterCIError
from ...vocabulary import terminal_states
from ..paths import notebook_path

ROLES = ("user", "assistant", "notice")
ORIGINS = ("panel", "magic", "cli", "mcp")

#: What to do about any problem: said at the end of every ``problem`` sentence.
REMEDY = "set c.JupyterCI.db_path to a writable file on a local disk"

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


def public_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` without anything named like a key, token, secret or endpoint (recursively)."""
    return {
        str(name): _public_value(value)
        for name, value in options.items()
        if not _is_secret_name(str(name))
    }


# --- records ---------------------------------------------------------------------------------


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
    #: How its last execution ended (a CellStatus value); None if it never ran.
    status: str | None
    execution_count: int | None
    #: What the model was shown of its last execution's outputs ('' if it never ran).
    digest: str = ""


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
    #: The model's final answer in prose ('' if none, or not finished).
    answer: str = ""
    #: The run's status line as the loop composed it ('' until it finished).
    status_line: str = ""

    @property
    def is_finished(self) -> bool:
        """Whether the run reached done, failed or stopped."""
        return self.state in terminal_states()

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
        super().__init__(message, hint=f"To keep conversations, {REMEDY}.")


class Unusable(Exception):
    """Internal: the database file cannot be used; ``problem`` says so to the user."""

    def __init__(self, why: str, *, problem: str | None = None) -> None:
        super().__init__(why)
        self.problem = problem or problem_sentence(why)


def problem_sentence(why: str) -> str:
    return f"Conversations will not persist: {why}; {REMEDY}."


# --- conversions -----------------------------------------------------------------------------


def conversation_of(row: sqlite3.Row) -> Conversation:
    archived = row["archived"]
    return Conversation(
        id=str(row["id"]),
        scope=str(row["scope"]),
        path=str(row["path"] if row["path"] is not None else row["last_path"]),
        created=float(row["created"]),
        archived=None if archived is None else float(archived),
    )


def cell_of(row: sqlite3.Row) -> GeneratedCell:
    return GeneratedCell(
        cell_id=str(row["cell_id"]),
        source_hash=str(row["source_hash"]),
        source=str(row["source"]),
        step=row["step"],
        attempt=int(row["attempt"]),
        status=row["status"],
        execution_count=row["execution_count"],
        digest=str(row["digest"] or ""),
    )


def norm_path(path: str) -> str:
    """A notebook path as the store keeps it: the canonical form (:mod:`..paths`), storable."""
    return storable(notebook_path(path))


def storable(text: str) -> str:
    """Text SQLite can store (it needs valid UTF-8)."""
    return utf8(text).decode("utf-8")


def dumps(value: Any) -> str:
    # ensure_ascii escapes lone surrogates, which UTF-8 (and so SQLite) could not hold.
    return json.dumps(value, ensure_ascii=True, default=str, separators=(",", ":"))


def loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def as_int(value: Any) -> int:
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


def why_unusable(path: Path, err: BaseException) -> str:
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
