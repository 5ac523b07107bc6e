"""A cell heard on the kernel's output channel (server/lab/iopub.py) reads the same whenever its
outputs are built: as the messages come, or only when they are read (the builder is made only
once a message may change the outputs, or they are read)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from jupyter_ci.server.lab.iopub import HeardCell

START = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)


def _msg(msg_type: str, content: dict[str, Any]) -> dict[str, Any]:
    return {
        "msg_type": msg_type,
        "header": {"msg_type": msg_type, "date": START},
        "parent_header": {"msg_id": "request", "msg_type": "execute_request"},
        "content": content,
    }


BUSY = _msg("status", {"execution_state": "busy"})
INPUT = _msg("execute_input", {"code": "x = 1", "execution_count": 7})
IDLE = _msg("status", {"execution_state": "idle"})


def test_a_cell_without_outputs_ends_with_its_count_and_start() -> None:
    heard = HeardCell("request")
    for msg in (BUSY, INPUT):
        heard.take(msg)
    assert not heard.ended
    heard.take(IDLE)
    assert heard.ended
    assert heard.version == 3
    assert heard.started_at == START.timestamp()
    # Nothing was built while it ran (the server's loop relays the cell's messages then).
    assert heard._builder is None
    assert heard.execution_count == 7
    assert heard.outputs == []
    assert not heard.errored


def test_outputs_read_while_the_cell_runs_and_after_it_ended_agree() -> None:
    messages = [
        BUSY,
        INPUT,
        _msg("stream", {"name": "stdout", "text": "a\n"}),
        _msg("display_data", {"data": {"text/plain": "shown"}, "metadata": {}}),
        _msg("stream", {"name": "stdout", "text": "b\n"}),
        _msg("error", {"ename": "ValueError", "evalue": "bad", "traceback": ["ValueError: bad"]}),
        IDLE,
        _msg("stream", {"name": "stdout", "text": "after the end\n"}),
    ]
    read_along = HeardCell("request")
    seen = []
    for msg in messages:
        read_along.take(msg)
        seen.append(read_along.outputs)
    read_at_end = HeardCell("request")
    for msg in messages:
        read_at_end.take(msg)
    assert read_at_end.outputs == read_along.outputs == seen[-1]
    assert seen[2] == [{"output_type": "stream", "name": "stdout", "text": "a\n"}]
    assert [out["output_type"] for out in read_at_end.outputs] == [
        "stream",
        "display_data",
        "stream",
        "error",
    ]
    assert read_at_end.ended
    assert read_at_end.errored
    assert read_at_end.execution_count == 7
