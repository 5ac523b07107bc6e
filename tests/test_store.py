"""The conversation store on real SQLite files: persistence, identity, runs, failure modes."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from jupyter_ci.server.paths import BadPath, notebook_path
from jupyter_ci.server.store import (
    MIGRATIONS,
    SCHEMA_VERSION,
    Conversation,
    ConversationStore,
    StoreError,
    default_db_path,
    public_options,
    source_hash,
)


@pytest_asyncio.fixture
async def store(tmp_path: Path) -> AsyncIterator[ConversationStore]:
    async with ConversationStore(tmp_path / "ci.sqlite", scope="/root") as opened:
        assert opened.persistent, opened.problem
        yield opened


def ev(run_id: str, seq: int, kind: str, **fields: Any) -> dict[str, Any]:
    """A run event as the loop emits it."""
    return {"run_id": run_id, "seq": seq, "time": 1000.0 + seq, "type": kind, **fields}


def usage(prompt: int, completion: int, cost: float | None) -> dict[str, Any]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "cost": cost}


def finished(run_id: str, seq: int, use: dict[str, Any]) -> dict[str, Any]:
    summary = {"cells": 1, "attempts": 1, "usage": use, "seconds": 1.5}
    return ev(run_id, seq, "finished", state="done", reason="answered", error=None, summary=summary)


async def record(store: ConversationStore, run_id: str, event: dict[str, Any]) -> None:
    """Record one event, as the run manager records a batch."""
    await store.record_events(run_id, [event])


async def events(store: ConversationStore, run_id: str, after_seq: int = 0) -> list[dict[str, Any]]:
    """A run's stored events after ``after_seq``, as the panel's history and a replay read them."""
    stored = (await store.events_of([run_id])).get(run_id, [])
    return [event for event in stored if event["seq"] > after_seq]


def user_version(path: Path) -> int:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])


async def start(
    store: ConversationStore, notebook: str, run_id: str, anchor: str | None = None
) -> Conversation:
    """A conversation for ``notebook`` with a run ``run_id`` started in it."""
    conversation = await store.conversation_for(notebook)
    await store.start_run(conversation.id, run_id, "plot iris", {"mode": "auto"}, anchor, "magic")
    return conversation


# --- persistence ------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_everything_survives_close_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "data" / "ci.sqlite"  # the folder is created too
    async with ConversationStore(path, scope="/root") as first:
        conversation = await first.conversation_for("analysis/iris.ipynb")
        await first.add_message(conversation.id, "user", "plot iris", run_id="r1")
        await first.start_run(
            conversation.id, "r1", "plot iris", {"max_attempts": 3}, "anchor-1", "panel"
        )
        for event in (
            ev("r1", 1, "state", state="generating", reason=""),
            ev("r1", 2, "cell_inserted", cell_id="c1", after_id="anchor-1", source="x = 1", step=1),
            ev(
                "r1",
                3,
                "execution_finished",
                cell_id="c1",
                status="ok",
                execution_count=4,
                digest="(no output)",
                duration=0.1,
            ),
            ev("r1", 4, "message", role="assistant", text="Done: x is 1."),
            ev("r1", 5, "usage", usage=usage(100, 20, 0.001)),
            finished("r1", 6, usage(100, 20, 0.001)),
        ):
            await record(first, "r1", event)

    async with ConversationStore(path, scope="/root") as second:
        assert second.persistent
        again = await second.conversation_for("analysis/iris.ipynb")
        assert again.id == conversation.id
        messages = await second.messages(conversation.id)
        assert [(m.role, m.text, m.run_id) for m in messages] == [
            ("user", "plot iris", "r1"),
            ("assistant", "Done: x is 1.", "r1"),
        ]
        run = await second.run("r1")
        assert run is not None
        assert (run.prompt, run.anchor_cell_id, run.origin) == ("plot iris", "anchor-1", "panel")
        assert run.options == {"max_attempts": 3}
        assert (run.state, run.reason, run.finished) == ("done", "answered", 1006.0)
        assert run.summary is not None
        assert run.summary["seconds"] == 1.5
        assert run.cost == 0.001
        assert run.cell_hashes == [("c1", source_hash("x = 1"))]
        assert (run.cells[0].status, run.cells[0].execution_count) == ("ok", 4)
        stored = await events(second, "r1")
        assert [e["seq"] for e in stored] == [1, 2, 3, 4, 5, 6]
        assert stored[2]["digest"] == "(no output)"
        assert [e["seq"] for e in await events(second, "r1", after_seq=4)] == [5, 6]
    assert user_version(path) == SCHEMA_VERSION


@pytest.mark.asyncio
async def test_rollback_journal_not_wal(store: ConversationStore, tmp_path: Path) -> None:
    conversation = await store.conversation_for("a.ipynb")
    await store.add_message(conversation.id, "user", "hi")
    with contextlib.closing(sqlite3.connect(tmp_path / "ci.sqlite")) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert not (tmp_path / "ci.sqlite-wal").exists()


# --- conversation identity --------------------------------------------------------------------


@pytest.mark.asyncio
async def test_one_conversation_per_path_and_a_copy_starts_anew(store: ConversationStore) -> None:
    original = await store.conversation_for("iris.ipynb")
    await store.add_message(original.id, "user", "plot iris")
    assert (await store.conversation_for("/iris.ipynb")).id == original.id  # same API path
    copy = await store.conversation_for("iris-Copy1.ipynb")
    assert copy.id != original.id
    assert await store.messages(copy.id) == []


@pytest.mark.asyncio
async def test_rename_follows_the_notebook(store: ConversationStore) -> None:
    conversation = await store.conversation_for("old.ipynb")
    await store.add_message(conversation.id, "user", "hello")

    assert await store.rename("old.ipynb", "new.ipynb") == 1

    moved = await store.conversation_for("new.ipynb")
    assert moved.id == conversation.id
    assert moved.path == "new.ipynb"
    assert [m.text for m in await store.messages(moved.id)] == ["hello"]
    assert (await store.conversation_for("old.ipynb")).id != conversation.id


@pytest.mark.asyncio
async def test_folder_rename_moves_the_notebooks_inside_only(store: ConversationStore) -> None:
    inside = await store.conversation_for("proj/a.ipynb")
    deeper = await store.conversation_for("proj/sub/b.ipynb")
    sibling = await store.conversation_for("proj-old/c.ipynb")  # shares the prefix "proj"

    assert await store.rename("proj", "work") == 2

    assert (await store.conversation_for("work/a.ipynb")).id == inside.id
    assert (await store.conversation_for("work/sub/b.ipynb")).id == deeper.id
    assert (await store.conversation_for("proj-old/c.ipynb")).id == sibling.id


@pytest.mark.asyncio
async def test_rename_onto_a_path_with_a_conversation_archives_the_stale_one(
    store: ConversationStore,
) -> None:
    moving = await store.conversation_for("draft.ipynb")
    stale = await store.conversation_for("final.ipynb")
    await store.add_message(stale.id, "user", "old talk")

    await store.rename("draft.ipynb", "final.ipynb")

    assert (await store.conversation_for("final.ipynb")).id == moving.id
    archived = await store.conversation(stale.id)
    assert archived is not None
    assert archived.archived is not None
    assert archived.path == "final.ipynb"  # where it last was
    assert [m.text for m in await store.messages(stale.id)] == ["old talk"]  # kept


@pytest.mark.asyncio
async def test_forget_path_means_a_new_notebook_there_starts_anew(
    store: ConversationStore,
) -> None:
    deleted = await store.conversation_for("gone.ipynb")
    assert await store.forget_path("gone.ipynb") == 1
    assert (await store.conversation_for("gone.ipynb")).id != deleted.id
    assert await store.forget_path("never-seen.ipynb") == 0


@pytest.mark.asyncio
async def test_scopes_keep_servers_with_different_roots_apart(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    async with ConversationStore(path, scope="/home/u/a") as first:
        in_a = await first.conversation_for("Untitled.ipynb")
    async with ConversationStore(path, scope="/home/u/b") as second:
        in_b = await second.conversation_for("Untitled.ipynb")
    assert in_a.id != in_b.id


# --- runs -------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_token_events_are_not_stored_and_the_others_are(store: ConversationStore) -> None:
    await start(store, "a.ipynb", "r1")
    emitted = [
        ev("r1", 1, "state", state="generating", reason=""),
        ev("r1", 2, "token", text="```py", cell_id=None),
        ev("r1", 3, "token", text="thon\nx = 1", cell_id="c1"),
        ev("r1", 4, "cell_inserted", cell_id="c1", after_id=None, source="", step=1),
        ev("r1", 5, "token", text="\n```", cell_id="c1"),
        ev("r1", 6, "attempt", cell_id="c1", attempt=1, max_attempts=3),
    ]
    for event in emitted:
        await record(store, "r1", event)

    stored = await events(store, "r1")
    assert [(e["seq"], e["type"]) for e in stored] == [
        (1, "state"),
        (4, "cell_inserted"),
        (6, "attempt"),
    ]
    assert stored[0] == emitted[0]
    run = await store.run("r1")
    assert run is not None
    assert (run.state, run.last_seq) == ("generating", 6)


@pytest.mark.asyncio
async def test_a_batch_of_events_is_one_write_with_the_same_effects(
    store: ConversationStore,
) -> None:
    await start(store, "a.ipynb", "r1")
    batch = [
        ev("r1", 1, "state", state="generating", reason=""),
        ev("r1", 2, "token", text="x", cell_id=None),
        ev("r1", 3, "cell_inserted", cell_id="c1", after_id=None, source="x = 1", step=1),
        ev("r1", 4, "message", role="assistant", text="Made x."),
        finished("r1", 5, usage(10, 5, None)),
    ]
    assert await store.record_events("r1", batch) == 4
    # Again (a replayed batch): nothing new, nothing applied twice.
    assert await store.record_events("r1", batch[2:]) == 0
    run = await store.run("r1")
    assert run is not None
    assert (run.state, run.last_seq) == ("done", 5)
    assert run.cell_hashes == [("c1", source_hash("x = 1"))]
    conversation = await store.conversation_for("a.ipynb")
    texts = [m.text for m in await store.messages(conversation.id)]
    assert texts.count("Made x.") == 1
    with pytest.raises(KeyError):
        await store.record_events("no-such-run", batch[:1])


@pytest.mark.asyncio
async def test_generated_cells_keep_their_latest_source_hash(store: ConversationStore) -> None:
    await start(store, "a.ipynb", "r1", anchor="ci-cell")
    # A streamed cell: inserted empty, its code announced whole once the reply is complete.
    await record(
        store,
        "r1",
        ev("r1", 1, "cell_inserted", cell_id="c1", after_id="ci-cell", source="", step=1),
    )
    await record(
        store,
        "r1",
        ev(
            "r1",
            2,
            "cell_updated",
            cell_id="c1",
            source="df = load()\n",
            diff="",
            attempt=1,
            cause="streamed",
        ),
    )
    # A cell inserted whole, then fixed.
    await record(
        store,
        "r1",
        ev("r1", 3, "cell_inserted", cell_id="c2", after_id="c1", source="plt.plot(df.x)", step=2),
    )
    await record(
        store,
        "r1",
        ev(
            "r1",
            4,
            "cell_updated",
            cell_id="c2",
            source="plt.plot(df['x'])",
            diff="",
            attempt=2,
            cause="fix",
        ),
    )
    # A fix of a cell the run did not insert (Fix with jupyter-ci) joins the record too.
    await record(
        store,
        "r1",
        ev(
            "r1", 5, "cell_updated", cell_id="mine", source="y = 2", diff="", attempt=1, cause="fix"
        ),
    )
    await record(
        store,
        "r1",
        ev(
            "r1",
            6,
            "execution_finished",
            cell_id="c2",
            status="ok",
            execution_count=3,
            digest="[stdout] 5",
            duration=0.1,
        ),
    )

    run = await store.run("r1")
    assert run is not None
    assert run.cell_hashes == [
        ("c1", source_hash("df = load()\n")),
        ("c2", source_hash("plt.plot(df['x'])")),
        ("mine", source_hash("y = 2")),
    ]
    assert [(c.step, c.attempt, c.source, c.digest) for c in run.cells] == [
        (1, 1, "df = load()\n", ""),
        (2, 2, "plt.plot(df['x'])", "[stdout] 5"),
        (None, 1, "y = 2", ""),
    ]


def test_source_hash_is_sha256_of_the_exact_utf8_source() -> None:
    assert source_hash("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    text = "print('héllo ✓')\r\n  "
    assert source_hash(text) == hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert source_hash("x = 1") != source_hash("x = 1\n")
    # A lone surrogate hashes as U+FFFD, as the browser's TextEncoder encodes it.
    assert source_hash("a\ud800b") == hashlib.sha256("a\ufffdb".encode()).hexdigest()


@pytest.mark.asyncio
async def test_latest_run_for_an_anchor(store: ConversationStore) -> None:
    conversation = await start(store, "a.ipynb", "first", anchor="ci-1")
    await start(store, "a.ipynb", "other-cell", anchor="ci-2")
    await start(store, "a.ipynb", "second", anchor="ci-1")
    await start(store, "a.ipynb", "panel", anchor=None)
    elsewhere = await start(store, "b.ipynb", "b-run", anchor="ci-1")

    latest = await store.latest_run_for_anchor(conversation.id, "ci-1")
    assert latest is not None
    assert latest.run_id == "second"
    other = await store.latest_run_for_anchor(elsewhere.id, "ci-1")
    assert other is not None
    assert other.run_id == "b-run"
    assert await store.latest_run_for_anchor(conversation.id, "ci-9") is None
    # A panel request whose cells went after the same %%ci cell is not that cell's request.
    await store.start_run(conversation.id, "panel-after", "hist", {}, "ci-1", "panel")
    latest = await store.latest_run_for_anchor(conversation.id, "ci-1")
    assert latest is not None
    assert latest.run_id == "second"
    assert [r.run_id for r in await store.runs(conversation.id)] == [
        "first",
        "other-cell",
        "second",
        "panel",
        "panel-after",
    ]


@pytest.mark.asyncio
async def test_usage_totals_unknown_cost_is_not_zero(store: ConversationStore) -> None:
    conversation = await start(store, "a.ipynb", "r1")
    await record(store, "r1", finished("r1", 1, usage(100, 10, 0.25)))
    await store.start_run(conversation.id, "r2", "more", {}, None, "panel")
    await record(store, "r2", ev("r2", 1, "usage", usage=usage(50, 5, 0.5)))
    # A run that never reached the model: no tokens, price unknown, costs nothing.
    await store.start_run(conversation.id, "r3", "more", {}, None, "panel")
    summary = {"cells": 0, "attempts": 0, "usage": usage(0, 0, None), "seconds": 0.0}
    await record(
        store,
        "r3",
        ev("r3", 1, "finished", state="failed", reason="config_error", error=None, summary=summary),
    )

    totals = await store.usage_totals(conversation.id)
    assert (totals.prompt_tokens, totals.completion_tokens, totals.runs) == (150, 15, 3)
    assert totals.cost == pytest.approx(0.75)

    await store.start_run(conversation.id, "r4", "more", {}, None, "cli")
    await record(store, "r4", ev("r4", 1, "usage", usage=usage(7, 3, None)))
    totals = await store.usage_totals(conversation.id)
    assert (totals.prompt_tokens, totals.completion_tokens) == (157, 18)
    assert totals.cost is None


@pytest.mark.asyncio
async def test_the_finished_event_records_the_outcome(store: ConversationStore) -> None:
    await start(store, "a.ipynb", "r1")
    error = {"code": "kernel_died", "message": "The kernel died.", "hint": "Re-run."}
    summary = {"cells": 2, "attempts": 3, "usage": usage(9, 1, 0.0), "seconds": 4.0}
    line = "jupyter-ci: failed (the kernel died) — 2 cells, 3 attempts, 10 tokens, $0.0000, 4.0 s"
    await record(
        store,
        "r1",
        ev(
            "r1",
            1,
            "finished",
            state="failed",
            reason="kernel_died",
            error=error,
            summary=summary,
            answer="",
            text=line,
        ),
    )
    run = await store.run("r1")
    assert run is not None
    assert (run.state, run.reason, run.error, run.summary, run.status_line) == (
        "failed",
        "kernel_died",
        error,
        summary,
        line,
    )
    assert run.is_finished
    assert run.finished == 1001.0
    assert run.usage == usage(9, 1, 0.0)


@pytest.mark.asyncio
async def test_abandoned_runs_of_a_dead_server_are_ended(tmp_path: Path) -> None:
    path = tmp_path / "ci.sqlite"
    async with ConversationStore(path, scope="/root") as before:
        await start(before, "a.ipynb", "running")
        await record(before, "running", ev("running", 1, "state", state="executing", reason=""))
        await start(before, "a.ipynb", "done")
        await record(before, "done", finished("done", 1, usage(1, 1, None)))
    seen: list[tuple[str, float | None]] = []

    def ended(run: Any, last_time: float | None) -> dict[str, Any]:
        seen.append((run.run_id, last_time))
        summary = {"cells": 0, "attempts": 0, "usage": usage(0, 0, None), "seconds": 0.0}
        return {
            "type": "finished",
            "state": "stopped",
            "reason": "server_shutdown",
            "error": None,
            "summary": summary,
            "answer": "",
            "text": "jupyter-ci: stopped (the server stopped)",
        }

    async with ConversationStore(path, scope="/root") as after:
        assert await after.abandon_unfinished_runs(ended) == ["running"]
        assert seen == [("running", 1001.0)]
        run = await after.run("running")
        assert run is not None
        assert (run.state, run.reason, run.last_seq) == ("stopped", "server_shutdown", 2)
        assert run.status_line == "jupyter-ci: stopped (the server stopped)"
        # The end is an event like any other: the panel's history and a replay see it.
        assert [e["type"] for e in await events(after, "running")] == ["state", "finished"]
        done = await after.run("done")
        assert done is not None
        assert done.state == "done"
        assert await after.abandon_unfinished_runs(ended) == []


@pytest.mark.asyncio
async def test_clear_deletes_messages_and_runs_of_that_conversation_only(
    store: ConversationStore,
) -> None:
    conversation = await start(store, "a.ipynb", "r1")
    await store.add_message(conversation.id, "user", "plot iris")
    await record(
        store, "r1", ev("r1", 1, "cell_inserted", cell_id="c", after_id=None, source="1", step=1)
    )
    other = await start(store, "b.ipynb", "r2")
    await store.add_message(other.id, "user", "keep me")

    await store.clear(conversation.id)

    assert await store.messages(conversation.id) == []
    assert await store.runs(conversation.id) == []
    assert await store.run("r1") is None
    assert await events(store, "r1") == []
    assert (await store.conversation_for("a.ipynb")).id == conversation.id
    assert [m.text for m in await store.messages(other.id)] == ["keep me"]
    assert await store.run("r2") is not None


@pytest.mark.asyncio
async def test_secrets_in_options_are_never_stored(store: ConversationStore) -> None:
    conversation = await store.conversation_for("a.ipynb")
    options = {
        "model": "openai/gpt-4o-mini",
        "max_tokens_per_run": 5000,
        "context_tokens": 8000,
        "api_key": "sk-secret",
        "api_base": "http://evil.example/v1",
        "apiKey": "sk-2",
        "nested": {"access_token": "t", "ok": 1},
        "extra_headers": {"Authorization": "Bearer x"},
    }
    record = await store.start_run(conversation.id, "r1", "p", options, None, "panel")
    expected = {
        "model": "openai/gpt-4o-mini",
        "max_tokens_per_run": 5000,
        "context_tokens": 8000,
        "nested": {"ok": 1},
    }
    assert record.options == expected
    assert public_options(options) == expected


@pytest.mark.asyncio
async def test_bad_calls_are_refused(store: ConversationStore) -> None:
    conversation = await store.conversation_for("a.ipynb")
    with pytest.raises(ValueError, match="role"):
        await store.add_message(conversation.id, "system", "x")
    with pytest.raises(ValueError, match="origin"):
        await store.start_run(conversation.id, "r", "p", {}, None, "browser")
    with pytest.raises(KeyError):
        await store.add_message("no-such-conversation", "user", "x")
    await store.start_run(conversation.id, "r", "p", {}, None, "panel")
    with pytest.raises(ValueError, match="already"):
        await store.start_run(conversation.id, "r", "p", {}, None, "panel")


@pytest.mark.asyncio
async def test_a_repeated_seq_is_not_applied_twice(store: ConversationStore) -> None:
    conversation = await start(store, "a.ipynb", "r1")
    said = ev("r1", 1, "message", role="assistant", text="once")
    assert await store.record_events("r1", [said]) == 1
    assert await store.record_events("r1", [said]) == 0
    assert [m.text for m in await store.messages(conversation.id)] == ["once"]
    assert len(await events(store, "r1")) == 1


@pytest.mark.asyncio
async def test_a_database_failure_after_opening_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "ci.sqlite"
    async with ConversationStore(path, busy_timeout=0.1) as store:
        conversation = await start(store, "a.ipynb", "r1")
        assert store.problem is None
        with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as other:
            other.execute("BEGIN EXCLUSIVE")
            with pytest.raises(StoreError, match="locked"):
                await store.add_message(conversation.id, "user", "lost")
            # The run manager logs this and goes on: a run never fails for its record.
            with pytest.raises(StoreError, match="locked"):
                await record(store, "r1", ev("r1", 1, "state", state="generating", reason=""))
            other.execute("ROLLBACK")
        assert store.problem is not None
        assert store.problem.startswith("Conversations may not be saved")
        # Once the lock is gone the store works again.
        await store.add_message(conversation.id, "user", "kept")
        assert [m.text for m in await store.messages(conversation.id)] == ["kept"]
        assert await events(store, "r1") == []


@pytest.mark.asyncio
async def test_messages_limit_keeps_the_newest_in_order(store: ConversationStore) -> None:
    conversation = await store.conversation_for("a.ipynb")
    for number in range(5):
        await store.add_message(conversation.id, "user", f"m{number}")
    assert [m.text for m in await store.messages(conversation.id, limit=2)] == ["m3", "m4"]
    assert len(await store.messages(conversation.id, limit=None)) == 5


# --- migrations -------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_an_empty_file_is_migrated_to_the_current_schema(tmp_path: Path) -> None:
    path = tmp_path / "ci.sqlite"
    path.touch()  # a 0-byte file is an empty SQLite database at user_version 0
    async with ConversationStore(path) as store:
        assert store.persistent
        assert store.problem is None
        await store.conversation_for("a.ipynb")
    assert user_version(path) == SCHEMA_VERSION


V2 = ("ALTER TABLE conversations ADD COLUMN title TEXT NOT NULL DEFAULT 'untitled'",)


@pytest.mark.asyncio
async def test_an_older_schema_is_upgraded_in_place_keeping_the_data(tmp_path: Path) -> None:
    path = tmp_path / "ci.sqlite"
    async with ConversationStore(path, migrations=MIGRATIONS[:1]) as v1:
        conversation = await v1.conversation_for("a.ipynb")
        await v1.add_message(conversation.id, "user", "kept")
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute(
            "INSERT INTO runs (id, conversation_id, prompt, options, origin, state, created) "
            "VALUES ('r1', ?, 'p', '{}', 'panel', 'done', 1.0)",
            (conversation.id,),
        )
    assert user_version(path) == 1

    async with ConversationStore(path, migrations=(*MIGRATIONS, V2)) as v2:
        assert v2.persistent, v2.problem
        assert [m.text for m in await v2.messages(conversation.id)] == ["kept"]
        run = await v2.run("r1")  # the columns later migrations added, with their defaults
        assert run is not None
        assert (run.answer, run.status_line) == ("", "")
    assert user_version(path) == SCHEMA_VERSION + 1
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT title FROM conversations").fetchone()[0] == "untitled"


@pytest.mark.asyncio
async def test_a_failing_migration_is_rolled_back_entirely(tmp_path: Path) -> None:
    path = tmp_path / "ci.sqlite"
    async with ConversationStore(path) as v1:
        await v1.conversation_for("a.ipynb")
        await v1.forget_path("a.ipynb")
        await v1.conversation_for("a.ipynb")  # two conversations whose last path is a.ipynb
    # A v2 whose second statement fails on this file's data (and succeeds on an empty one).
    v2 = (
        "CREATE TABLE extra (x)",
        "CREATE UNIQUE INDEX one_per_last_path ON conversations (last_path)",
    )
    async with ConversationStore(path, migrations=(*MIGRATIONS, v2)) as store:
        assert not store.persistent
        assert store.problem is not None
        assert "will not persist" in store.problem
    # Nothing of it stayed, not even its first statement: one transaction for all of it.
    assert user_version(path) == SCHEMA_VERSION
    with contextlib.closing(sqlite3.connect(path)) as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        assert "extra" not in tables
        assert conn.execute("SELECT count(*) FROM conversations").fetchone()[0] == 2


@pytest.mark.asyncio
async def test_a_newer_schema_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "ci.sqlite"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE future (x)")
        conn.execute("INSERT INTO future VALUES (42)")
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
        conn.commit()
    before = path.read_bytes()

    async with ConversationStore(path) as store:
        assert store.persistent is False
        assert store.problem is not None
        assert "newer jupyter-ci" in store.problem
        assert "c.JupyterCI.db_path" in store.problem
        conversation = await store.conversation_for("a.ipynb")  # works, in memory
        await store.add_message(conversation.id, "user", "hello")
        assert len(await store.messages(conversation.id)) == 1

    assert path.read_bytes() == before


# --- unusable databases -----------------------------------------------------------------------


def _directory(tmp_path: Path) -> Path:
    path = tmp_path / "ci.sqlite"
    path.mkdir()
    return path


def _garbage(tmp_path: Path) -> Path:
    path = tmp_path / "ci.sqlite"
    path.write_bytes(b"this is not a database, just some bytes \x00\x01\x02" * 100)
    return path


def _under_a_file(tmp_path: Path) -> Path:
    (tmp_path / "plain-file").write_text("x")
    return tmp_path / "plain-file" / "ci.sqlite"


def _read_only_place(tmp_path: Path) -> Path:
    # Tests run as root, whom file modes do not stop; /proc refuses new files to everyone.
    if not Path("/proc/self").is_dir():
        pytest.skip("needs Linux's /proc")
    return Path("/proc/jupyter-ci-test.sqlite")


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("make", "says"),
    [
        (_directory, "is a folder"),
        (_garbage, "is not a SQLite database"),
        (_under_a_file, "could not be created"),
        (_read_only_place, "could not be opened or created"),
    ],
)
async def test_an_unusable_path_falls_back_to_memory(tmp_path: Path, make: Any, says: str) -> None:
    path = make(tmp_path)
    before = path.read_bytes() if path.is_file() else None
    async with ConversationStore(path) as store:
        assert store.persistent is False
        assert store.problem is not None
        assert store.problem.startswith("Conversations will not persist: ")
        assert says in store.problem
        assert str(path) in store.problem
        assert "c.JupyterCI.db_path" in store.problem
        # Still a working store, for this session.
        conversation = await store.conversation_for("a.ipynb")
        await store.start_run(conversation.id, "r1", "p", {}, None, "panel")
        await record(store, "r1", ev("r1", 1, "message", role="assistant", text="hi"))
        assert [m.text for m in await store.messages(conversation.id)] == ["hi"]
    if before is not None:
        assert path.read_bytes() == before


@pytest.mark.asyncio
async def test_a_locked_database_falls_back_after_the_busy_timeout(tmp_path: Path) -> None:
    path = tmp_path / "ci.sqlite"
    async with ConversationStore(path):
        pass
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as other:
        other.execute("BEGIN EXCLUSIVE")
        async with ConversationStore(path, busy_timeout=0.2) as store:
            assert store.persistent is False
            assert store.problem is not None
            assert "locked by another program" in store.problem
            assert (await store.conversation_for("a.ipynb")).path == "a.ipynb"
        other.execute("ROLLBACK")


@pytest.mark.asyncio
async def test_memory_on_purpose_is_not_a_problem() -> None:
    async with ConversationStore(":memory:") as store:
        assert store.path is None
        assert (store.persistent, store.problem) == (False, None)
        assert (await store.conversation_for("a.ipynb")).path == "a.ipynb"


def test_default_path_is_in_the_jupyter_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    assert default_db_path() == tmp_path / "data" / "jupyter-ci.sqlite"
    assert ConversationStore(None).path == tmp_path / "data" / "jupyter-ci.sqlite"
    assert ConversationStore("").path == tmp_path / "data" / "jupyter-ci.sqlite"


@pytest.mark.asyncio
async def test_calls_need_an_open_store(tmp_path: Path) -> None:
    store = ConversationStore(tmp_path / "ci.sqlite")
    with pytest.raises(RuntimeError, match="open"):
        await store.conversation_for("a.ipynb")
    await store.open()
    await start(store, "a.ipynb", "r1")
    await store.close()
    with pytest.raises(RuntimeError, match="open"):
        await store.messages("x")
    # A late event from a run that outlived the store is refused (the manager logs it).
    with pytest.raises(RuntimeError, match="open"):
        await record(store, "r1", ev("r1", 1, "state", state="done", reason=""))
    await store.close()  # twice is fine


# --- threading and the event loop -------------------------------------------------------------


@pytest.mark.asyncio
async def test_concurrent_calls_use_one_thread_and_keep_their_order(
    store: ConversationStore,
) -> None:
    conversation = await start(store, "a.ipynb", "r1")
    stored_events = [
        ev("r1", seq, "execution_started", cell_id="c1", attempt=1) for seq in range(1, 201)
    ]

    async def chat(number: int) -> None:
        await store.add_message(conversation.id, "notice", f"n{number}")

    # Many writers at once, one event each, interleaved with others.
    await asyncio.gather(
        *(record(store, "r1", event) for event in stored_events),
        *(chat(number) for number in range(50)),
        store.runs(conversation.id),
    )

    stored = await events(store, "r1")
    assert [e["seq"] for e in stored] == list(range(1, 201))
    assert len(await store.messages(conversation.id, limit=None)) == 50


@pytest.mark.asyncio
async def test_a_slow_write_does_not_block_the_event_loop(tmp_path: Path) -> None:
    path = tmp_path / "ci.sqlite"
    async with ConversationStore(path, busy_timeout=30) as store:
        conversation = await store.conversation_for("a.ipynb")
        ticks = 0
        ticked_enough = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.002)
                ticks += 1
                if ticks == 25:
                    ticked_enough.set()

        with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as other:
            other.execute("BEGIN EXCLUSIVE")  # the store's write now waits for this lock
            write = asyncio.ensure_future(store.add_message(conversation.id, "user", "late"))
            ticking = asyncio.ensure_future(ticker())
            # Had the write blocked the loop, the ticker could not tick while it waits.
            await asyncio.wait_for(ticked_enough.wait(), 10)
            assert not write.done()
            other.execute("COMMIT")
        message = await asyncio.wait_for(write, 10)
        ticking.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ticking
        assert message.text == "late"
        assert [m.text for m in await store.messages(conversation.id)] == ["late"]


@pytest.mark.asyncio
async def test_every_spelling_of_a_path_is_one_conversation_and_other_files_are_not(
    store: ConversationStore,
) -> None:
    x = await store.conversation_for("sub/x.ipynb")
    for alias in ("sub/../sub/x.ipynb", "./sub/x.ipynb", "sub//x.ipynb", "/sub/x.ipynb/"):
        assert (await store.conversation_for(alias)).id == x.id, alias
        assert (await store.conversation_for(alias)).path == "sub/x.ipynb"
    # A backslash is part of a file's name here (POSIX): another file, another conversation.
    slash = await store.conversation_for("back/slash.ipynb")
    backslash = await store.conversation_for("back\\slash.ipynb")
    assert slash.id != backslash.id
    assert backslash.path == "back\\slash.ipynb"
    for bad in ("../x.ipynb", "sub/../../x.ipynb", "", "/", "."):
        with pytest.raises(BadPath):
            await store.conversation_for(bad)


def test_a_backslash_separates_folders_where_the_system_says_so() -> None:
    assert notebook_path("back\\slash.ipynb", separator="\\") == "back/slash.ipynb"
    assert notebook_path("a\\..\\b.ipynb", separator="\\") == "b.ipynb"
    assert notebook_path("back\\slash.ipynb", separator="/") == "back\\slash.ipynb"
    with pytest.raises(BadPath, match="goes above the server's root"):
        notebook_path("..\\x.ipynb", separator="\\")


@pytest.mark.asyncio
async def test_conversations_stored_under_another_spelling_are_read_under_the_canonical_one(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ci.sqlite"
    async with ConversationStore(path) as first:
        canonical = await first.conversation_for("x.ipynb")
        await first.add_message(canonical.id, "user", "kept at x")
    # Rows an earlier jupyter-ci wrote without the canonical form.
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        for row_id, stored in (("old-alias", "sub/../y.ipynb"), ("clash", "./x.ipynb")):
            conn.execute(
                "INSERT INTO conversations (id, scope, path, last_path, created) "
                "VALUES (?, ?, ?, ?, 1.0)",
                (row_id, canonical.scope, stored, stored),
            )
    async with ConversationStore(path) as again:
        assert (await again.conversation_for("y.ipynb")).id == "old-alias"
        assert (await again.conversation_for("sub/../y.ipynb")).id == "old-alias"
        # Two spellings of x: the one tabs found (canonical) stays, the other is archived.
        assert (await again.conversation_for("./x.ipynb")).id == canonical.id
        clash = await again.conversation("clash")
        assert clash is not None
        assert clash.archived is not None
