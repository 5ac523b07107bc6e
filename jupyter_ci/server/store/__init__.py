"""The conversation store (SQLite): conversations, messages, and the record of every run.

- :mod:`.conversations`: :class:`ConversationStore`, the API the server uses (one worker thread);
- :mod:`.projection`: how a run's events make its record (the only write path for a run);
- :mod:`.queries`: the other reads and writes;
- :mod:`.records`: the records, the source hash, what is never stored;
- :mod:`.schema`: the append-only migrations.
"""

from .conversations import ConversationStore, default_db_path
from .projection import FinishedFactory
from .records import (
    Conversation,
    GeneratedCell,
    Message,
    RunRecord,
    StoreError,
    UsageTotals,
    public_options,
    source_hash,
)
from .schema import DEFAULT_BUSY_TIMEOUT, MIGRATIONS, SCHEMA_VERSION

__all__ = [
    "DEFAULT_BUSY_TIMEOUT",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "Conversation",
    "ConversationStore",
    "FinishedFactory",
    "GeneratedCell",
    "Message",
    "RunRecord",
    "StoreError",
    "UsageTotals",
    "default_db_path",
    "public_options",
    "source_hash",
]
