"""The headless workspace: the message dispatcher with canned messages, then a real ipykernel."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import stat
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
import pytest_asyncio
from jupyter_client.session import Session

from jupyter_ci.agent.workspace import Variable, Workspace
from jupyter_ci.errors import CellNotFound, InternalError, KernelDied
from jupyter_ci.execution.status import CellStatus
from jupyter_ci.workspaces.kernel import KernelWorkspace
from jupyter_ci.workspaces.kernel_exec import (
    DisplayRegistry,
    ExecutionCollector,
    apply_control_characters,
)

shared_loop = pytest.mark.asyncio(loop_scope="module")


# --- the dispatcher, with canned messages ----------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def msg(msg_type: str, parent: str = "m1", **content: Any) -> dict[str, Any]:
    return {
        "msg_type": msg_type,
        "header": {"msg_type": msg_type, "msg_id": f"{msg_type}-{parent}"},
        "parent_header": {"msg_id": parent},
        "content": content,
    }


def stream(text: str, name: str = "stdout", parent: str = "m1") -> dict[str, Any]:
    return msg("stream", parent, name=name, text=text)


def display(
    text: str, display_id: str | None = None, kind: str = "display_data", parent: str = "m1"
) -> dict[str, Any]:
    transient = {"display_id": display_id} if display_id else {}
    extra = {"execution_count": 1} if kind == "execute_result" else {}
    return msg(kind, parent, data={"text/plain": text}, metadata={}, transient=transient, **extra)


def feed(collector: ExecutionCollector, *messages: dict[str, Any]) -> None:
    for message in messages:
        collector.feed_iopub(message)


def texts(collector: ExecutionCollector) -> list[str]:
    return [out.get("text") or out["data"]["text/plain"] for out in collector.outputs()]


def test_streams_merge_when_consecutive_and_resolve_carriage_returns() -> None:
    collector = ExecutionCollector("m1")
    feed(
        collector,
        stream("10%\r"),
        stream("20%\r"),
        stream("done\n"),
        stream("warning\n", "stderr"),
        stream("a"),
        stream("b\n"),
    )
    outputs = collector.outputs()
    assert [(o["name"], o["text"]) for o in outputs] == [
        ("stdout", "done\n"),
        ("stderr", "warning\n"),
        ("stdout", "ab\n"),
    ]


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("abc\rxy", "xy"),
        ("line\r\n", "line\n"),
        ("keep\r", "keep\r"),
        ("one\ntwo\rTWO\n", "one\nTWO\n"),
        ("abc\b\bd", "ad"),
        ("\bx", "\bx"),
    ],
)
def test_control_characters(raw: str, shown: str) -> None:
    assert apply_control_characters(raw) == shown


def test_only_our_request_counts() -> None:
    collector = ExecutionCollector("m1")
    assert not collector.feed_iopub(stream("theirs", parent="other"))
    assert not collector.feed_shell(msg("execute_reply", "other", status="ok"))
    assert not collector.feed_iopub(msg("status", "other", execution_state="idle"))
    assert collector.feed_iopub(stream("ours"))
    assert texts(collector) == ["ours"]
    assert not collector.done


def test_done_needs_both_the_reply_and_idle() -> None:
    collector = ExecutionCollector("m1")
    collector.feed_shell(msg("execute_reply", status="ok", execution_count=3))
    assert collector.replied
    assert not collector.done
    feed(collector, msg("status", execution_state="idle"))
    assert collector.done
    assert collector.execution_count == 3
    assert collector.status() is CellStatus.OK


def test_clear_output_now_and_on_wait() -> None:
    collector = ExecutionCollector("m1")
    feed(collector, stream("gone\n"), display("gone too"), msg("clear_output", wait=False))
    assert collector.outputs() == []
    feed(collector, stream("old\n"), msg("clear_output", wait=True))
    assert texts(collector) == ["old\n"]  # kept until the next output comes
    feed(collector, display("new"))
    assert texts(collector) == ["new"]


def test_display_updates_by_id_across_cells() -> None:
    registry = DisplayRegistry()
    first = ExecutionCollector("m1", displays=registry)
    feed(first, display("v1", "d1"), display("plain"))
    second = ExecutionCollector("m2", displays=registry)
    feed(second, msg("update_display_data", "m2", data={"text/plain": "v2"}, metadata={},
                     transient={"display_id": "d1"}))  # fmt: skip
    assert texts(first) == ["v2", "plain"]
    assert second.outputs() == []
    # Displaying again with the same id adds an output and updates the earlier ones.
    feed(second, display("v3", "d1", kind="execute_result", parent="m2"))
    assert texts(first) == ["v3", "plain"]
    assert texts(second) == ["v3"]
    # A cleared output is no longer updated.
    feed(second, msg("clear_output", "m2", wait=False))
    feed(second, msg("update_display_data", "m2", data={"text/plain": "v4"}, metadata={},
                     transient={"display_id": "d1"}))  # fmt: skip
    assert texts(first) == ["v4", "plain"]
    assert second.outputs() == []


def test_the_clock_starts_when_the_kernel_begins_the_cell() -> None:
    clock = Clock()
    collector = ExecutionCollector("m1", clock=clock)
    assert collector.deadline(5) is None
    clock.now += 60  # queued behind another request for a minute: not counted
    assert not collector.expired(5)
    assert collector.duration is None
    feed(collector, msg("status", execution_state="busy"))
    feed(collector, msg("execute_input", code="x", execution_count=7))
    assert collector.started_at == 160.0
    assert collector.deadline(5) == 165.0
    assert collector.deadline(0) is None  # 0 = no timeout
    clock.now = 164.9
    assert not collector.expired(5)
    clock.now = 165.0
    assert collector.expired(5)
    assert not collector.expired(0)
    collector.feed_shell(msg("execute_reply", status="ok", execution_count=7))
    assert not collector.expired(5)  # it finished: never interrupt someone else's cell
    clock.now = 166.0
    feed(collector, msg("status", execution_state="idle"))
    assert collector.duration == 6.0
    clock.now = 200.0
    assert collector.duration == 6.0


def test_status_from_replies_and_outputs() -> None:
    def ended(reply: dict[str, Any], *outputs: dict[str, Any]) -> ExecutionCollector:
        collector = ExecutionCollector("m1")
        feed(collector, *outputs)
        collector.feed_shell(msg("execute_reply", **reply))
        feed(collector, msg("status", execution_state="idle"))
        return collector

    error = msg("error", ename="ValueError", evalue="bad", traceback=["tb"])
    interrupt = msg("error", ename="KeyboardInterrupt", evalue="", traceback=[])
    assert ended({"status": "aborted"}).status() is CellStatus.ABORTED
    failed = ended({"status": "error", "ename": "ValueError"}, error)
    assert failed.status() is CellStatus.ERROR
    assert failed.outputs()[0]["ename"] == "ValueError"
    stopped = ended({"status": "error", "ename": "KeyboardInterrupt"}, interrupt)
    assert stopped.status() is CellStatus.ERROR
    assert stopped.status(interrupted=True) is CellStatus.ABORTED
    assert stopped.status(timed_out=True) is CellStatus.TIMED_OUT
    assert ended({"status": "ok"}, error).status(interrupted=True) is CellStatus.ERROR


def test_an_error_reply_without_error_output_still_gives_one() -> None:
    collector = ExecutionCollector("m1")
    collector.feed_shell(
        msg("execute_reply", status="error", ename="E", evalue="v", traceback=["t"])
    )
    assert collector.outputs() == [
        {"output_type": "error", "ename": "E", "evalue": "v", "traceback": ["t"]}
    ]
    assert collector.status() is CellStatus.ERROR


def test_runaway_output_is_capped() -> None:
    collector = ExecutionCollector("m1", max_stream_chars=100, max_outputs=3)
    for i in range(1000):
        collector.feed_iopub(stream(f"{i:04d}\n"))
    (out,) = collector.outputs()
    head, tail = out["text"].split("[... jupyter-ci cut ")
    assert head.startswith("0000\n0001\n")
    assert tail.endswith("0998\n0999\n")
    assert len(out["text"]) < 200
    cut = int(tail.split(" ")[0])
    assert cut + 100 == 5000
    feed(collector, *(display(str(i)) for i in range(5)))
    outputs = collector.outputs()
    assert len(outputs) == 4
    assert outputs[-1]["text"] == "[jupyter-ci dropped 3 more outputs of this cell]\n"


# --- a real kernel, shared by the tests below --------------------------------------------------


def another_client(ws: KernelWorkspace) -> Any:
    """Another client of the workspace's kernel, with its own session (and socket identity)."""
    key = ws.kernel_manager.session.key
    other = ws.kernel_manager.client(session=Session(key=key))
    other.start_channels()
    return other


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def ws(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[KernelWorkspace]:
    path = tmp_path_factory.mktemp("shared") / "new.ipynb"
    workspace = await KernelWorkspace.open(path)
    yield workspace
    await workspace.close()


async def cell(ws: KernelWorkspace, source: str) -> str:
    """A new cell at the end of the notebook."""
    cells = await ws.read_cells()
    return await ws.insert_cell(cells[-1].id if cells else None, source)


@shared_loop
async def test_a_new_notebook_is_described_and_implements_the_protocol(
    ws: KernelWorkspace,
) -> None:
    assert isinstance(ws, Workspace)
    assert not ws.path.exists()  # nothing is written before save()
    assert ws.notebook.metadata["kernelspec"]["name"] == "python3"
    assert ws.notebook.metadata["language_info"]["name"] == "python"
    assert ws.notebook.nbformat_minor >= 5


@shared_loop
async def test_print_gives_stdout_and_an_execution_count(ws: KernelWorkspace) -> None:
    first = await ws.run_cell(await cell(ws, "print('hi')"), timeout=10)
    assert first.status is CellStatus.OK
    assert first.outputs == [{"output_type": "stream", "name": "stdout", "text": "hi\n"}]
    assert isinstance(first.execution_count, int)
    assert first.duration is not None
    assert 0 <= first.duration < 5
    second_id = await cell(ws, "6 * 7")
    second = await ws.run_cell(second_id, timeout=10)
    assert second.execution_count == first.execution_count + 1
    assert second.outputs[0]["data"] == {"text/plain": "42"}
    stored = {c.id: c for c in await ws.read_cells()}[second_id]
    assert stored.outputs == second.outputs
    assert stored.execution_count == second.execution_count


@shared_loop
async def test_an_error_cell(ws: KernelWorkspace) -> None:
    result = await ws.run_cell(await cell(ws, "print('before')\n1 / 0"), timeout=10)
    assert result.status is CellStatus.ERROR
    assert result.error is not None
    assert result.error["ename"] == "ZeroDivisionError"
    assert result.error["evalue"] == "division by zero"
    assert any("ZeroDivisionError" in line for line in result.error["traceback"])
    assert result.outputs[0]["text"] == "before\n"


@shared_loop
async def test_display_and_update_display(ws: KernelWorkspace) -> None:
    first_id = await cell(
        ws,
        "from IPython.display import display, update_display\n"
        "display({'text/plain': 'first'}, raw=True, display_id='d1')\n"
        "display({'text/plain': 'other'}, raw=True)\n"
        "update_display({'text/plain': 'second'}, raw=True, display_id='d1')",
    )
    first = await ws.run_cell(first_id, timeout=10)
    assert [o["data"]["text/plain"] for o in first.outputs] == ["second", "other"]
    later = await ws.run_cell(
        await cell(ws, "update_display({'text/plain': 'third'}, raw=True, display_id='d1')"),
        timeout=10,
    )
    assert later.outputs == []
    stored = {c.id: c for c in await ws.read_cells()}[first_id]
    assert [o["data"]["text/plain"] for o in stored.outputs] == ["third", "other"]


@shared_loop
async def test_clear_output(ws: KernelWorkspace) -> None:
    result = await ws.run_cell(
        await cell(
            ws,
            "from IPython.display import clear_output\n"
            "print('gone'); clear_output(); print('kept')\n"
            "print('old'); clear_output(wait=True); print('new')",
        ),
        timeout=10,
    )
    assert result.outputs == [{"output_type": "stream", "name": "stdout", "text": "new\n"}]


@shared_loop
async def test_a_sleeping_cell_times_out_and_the_kernel_goes_on(ws: KernelWorkspace) -> None:
    started = time.monotonic()
    result = await ws.run_cell(await cell(ws, "import time; time.sleep(1000)"), timeout=1)
    assert result.status is CellStatus.TIMED_OUT
    assert time.monotonic() - started < 5
    assert result.duration is not None
    assert 1 <= result.duration < 5
    after = await ws.run_cell(await cell(ws, "print('alive')"), timeout=10)
    assert after.status is CellStatus.OK
    assert after.outputs[0]["text"] == "alive\n"


@shared_loop
async def test_a_busy_loop_times_out(ws: KernelWorkspace) -> None:
    started = time.monotonic()
    result = await ws.run_cell(await cell(ws, "while True:\n    pass"), timeout=1)
    assert result.status is CellStatus.TIMED_OUT
    assert time.monotonic() - started < 5


@shared_loop
async def test_time_queued_behind_another_client_is_not_counted(ws: KernelWorkspace) -> None:
    other = another_client(ws)
    try:
        other.execute("import time; time.sleep(2)")
        await asyncio.sleep(0.2)
        started = time.monotonic()
        result = await ws.run_cell(await cell(ws, "print('my turn')"), timeout=1)
        waited = time.monotonic() - started
    finally:
        other.stop_channels()
    assert result.status is CellStatus.OK
    assert result.outputs[0]["text"] == "my turn\n"
    assert waited > 1.2  # it waited for the other cell, past its own timeout...
    assert result.duration is not None
    assert result.duration < 1  # ...but its clock started when the kernel began it


@shared_loop
async def test_a_cell_aborted_by_the_kernel(ws: KernelWorkspace) -> None:
    other = another_client(ws)
    try:
        other.execute("import time; time.sleep(0.5); 1 / 0", stop_on_error=True)
        await asyncio.sleep(0.2)
        result = await ws.run_cell(await cell(ws, "print('never')"), timeout=10)
    finally:
        other.stop_channels()
    assert result.status is CellStatus.ABORTED
    assert result.outputs == []


@shared_loop
async def test_stop_interrupts_and_reports_aborted(ws: KernelWorkspace, tmp_path: Path) -> None:
    marker = tmp_path / "started"
    source = f"import time\nopen({str(marker)!r}, 'w').close()\ntime.sleep(30)"
    task = asyncio.ensure_future(ws.run_cell(await cell(ws, source), timeout=0))
    for _ in range(200):  # the kernel began the cell
        if marker.exists():
            break
        await asyncio.sleep(0.05)
    await ws.interrupt()
    result = await asyncio.wait_for(task, 10)
    assert result.status is CellStatus.ABORTED
    assert result.error is not None
    assert result.error["ename"] == "KeyboardInterrupt"


@shared_loop
async def test_inserting_and_editing_cells_by_id(ws: KernelWorkspace) -> None:
    top = await ws.insert_cell(None, "top")
    assert (await ws.read_cells())[0].id == top
    metadata: dict[str, Any] = {"jupyter_ci": {"run": "r1"}}
    second = await ws.insert_cell(top, "x = ", metadata)
    metadata["jupyter_ci"]["run"] = "changed"  # the cell keeps its own copy
    cells = await ws.read_cells()
    assert [c.id for c in cells[:2]] == [top, second]
    assert cells[1].metadata == {"jupyter_ci": {"run": "r1"}}
    assert cells[1].cell_type == "code"
    await ws.append_source(second, "1")
    await ws.append_source(second, "2")
    assert (await ws.read_cells())[1].source == "x = 12"
    await ws.replace_source(second, "x = 3")
    assert (await ws.read_cells())[1].source == "x = 3"
    last = await cell(ws, "")
    assert (await ws.read_cells())[-1].id == last
    ids = [c.id for c in await ws.read_cells()]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", i) for i in ids)

    for call in (
        ws.insert_cell("nope", "x"),
        ws.append_source("nope", "x"),
        ws.replace_source("nope", "x"),
        ws.run_cell("nope", 1),
    ):
        with pytest.raises(CellNotFound) as caught:
            await call
        assert isinstance(caught.value, KeyError)
        assert isinstance(caught.value, InternalError)
        assert caught.value.to_dict()["cell_id"] == "nope"
    ws.notebook.cells[:2] = []


@shared_loop
async def test_markdown_cells_do_not_run(ws: KernelWorkspace) -> None:
    ws.notebook.cells.append(nbformat.v4.new_markdown_cell("# title"))  # type: ignore[no-untyped-call]
    with pytest.raises(InternalError, match="markdown"):
        await ws.run_cell(ws.notebook.cells[-1].id, 1)
    ws.notebook.cells.pop()


@shared_loop
async def test_variables_through_the_workspace(
    ws: KernelWorkspace, caplog: pytest.LogCaptureFixture
) -> None:
    before = await ws.run_cell(await cell(ws, "ws_value = [1, 2]"), timeout=10)
    variables = await ws.inspect_variables()
    assert Variable("ws_value", "list", "len 2") == variables[0]
    after = await ws.run_cell(await cell(ws, "pass"), timeout=10)
    assert before.execution_count is not None
    assert after.execution_count == before.execution_count + 1

    # A kernel that cannot evaluate the expression gives no variables and a warning.
    await ws.run_cell(await cell(ws, "__import__ = None"), timeout=10)
    with caplog.at_level(logging.WARNING, logger="jupyter_ci.workspaces.kernel"):
        assert await ws.inspect_variables() == []
    assert "could not list its variables" in caplog.text
    await ws.run_cell(await cell(ws, "del __import__"), timeout=10)
    assert await ws.inspect_variables()


# --- saving --------------------------------------------------------------------------------


@shared_loop
async def test_save_writes_a_valid_notebook(ws: KernelWorkspace, tmp_path: Path) -> None:
    await ws.run_cell(await cell(ws, "print('saved')"), timeout=10)
    target = tmp_path / "out.ipynb"
    await ws.save(target)
    saved = nbformat.read(target, as_version=4)  # type: ignore[no-untyped-call]
    nbformat.validate(saved)
    assert [c.id for c in saved.cells] == [c.id for c in await ws.read_cells()]
    assert saved.cells[-1].outputs[0]["text"] == "saved\n"
    assert os.listdir(tmp_path) == ["out.ipynb"]

    target.chmod(0o640)
    link = tmp_path / "link.ipynb"
    link.symlink_to(target)
    await ws.save(link)
    assert link.is_symlink()
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


@shared_loop
async def test_a_failed_save_leaves_the_file_intact(
    ws: KernelWorkspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "keep.ipynb"
    await ws.save(target)
    original = target.read_bytes()

    bad = await cell(ws, "x = 1")
    await ws.append_source(bad, "")
    ws.notebook.cells[-1].metadata["unserialisable"] = object()
    with pytest.raises((TypeError, ValueError, nbformat.ValidationError)):
        await ws.save(target)
    assert target.read_bytes() == original
    ws.notebook.cells.pop()

    def refuse(src: str, dst: str) -> None:
        raise OSError("disk full")

    await ws.insert_cell(None, "# changed")
    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="disk full"):
        await ws.save(target)
    assert target.read_bytes() == original
    assert os.listdir(tmp_path) == ["keep.ipynb"]  # no temporary file left behind
    ws.notebook.cells.pop(0)


# --- kernels of their own -------------------------------------------------------------------


def old_notebook(path: Path, sources: list[tuple[str, str]]) -> None:
    """Write an nbformat 4.4 notebook (no cell ids), with one old output on the first cell."""
    cells: list[dict[str, Any]] = []
    for cell_type, source in sources:
        node: dict[str, Any] = {"cell_type": cell_type, "metadata": {}, "source": source}
        if cell_type == "code":
            node.update(execution_count=None, outputs=[])
        cells.append(node)
    cells[0]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "from the file\n"}]
    cells[0]["execution_count"] = 9
    notebook = {
        "nbformat": 4,
        "nbformat_minor": 4,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}},
        "cells": cells,
    }
    path.write_text(json.dumps(notebook), encoding="utf-8")


@pytest.mark.asyncio
async def test_restore_rebuilds_state_and_skips_ci_cells(tmp_path: Path) -> None:
    path = tmp_path / "old.ipynb"
    old_notebook(
        path,
        [
            ("code", "a = 41"),
            ("code", "%%ci make b from a"),
            ("markdown", "# notes"),
            ("code", "b = a + 1\nprint(b)"),
            ("code", ""),
        ],
    )
    async with await KernelWorkspace.open(path) as ws:
        cells = await ws.read_cells()
        ids = [c.id for c in cells]
        assert all(ids)
        assert len(set(ids)) == 5

        executions = await ws.restore()

        assert [e.cell_id for e in executions] == [ids[0], ids[3]]
        assert [e.status for e in executions] == [CellStatus.OK, CellStatus.OK]
        assert executions[1].outputs[0]["text"] == "42\n"
        # The file's outputs and counts are left as they were.
        assert (await ws.read_cells()) == cells
        assert Variable("b", "int", "42") in await ws.inspect_variables()

        await ws.replace_source(ids[0], "del a\n1 / 0")
        stopped = await ws.restore()
        assert [(e.cell_id, e.status) for e in stopped] == [(ids[0], CellStatus.ERROR)]
        both = await ws.restore(stop_on_error=False)
        assert [e.status for e in both] == [CellStatus.ERROR, CellStatus.ERROR]
        everything = await ws.restore(skip=None, stop_on_error=False)
        assert len(everything) == 3  # the %%ci cell fails here: the magic is not loaded

        await ws.save()
        saved = nbformat.read(path, as_version=4)  # type: ignore[no-untyped-call]
        assert saved.nbformat_minor == 5
        assert [c.id for c in saved.cells] == ids


@pytest.mark.asyncio
async def test_a_dying_kernel_raises_kernel_died_promptly(tmp_path: Path) -> None:
    async with await KernelWorkspace.open(tmp_path / "dies.ipynb") as ws:
        cell_id = await ws.insert_cell(None, "import os\nos._exit(1)")
        started = time.monotonic()
        with pytest.raises(KernelDied):
            await ws.run_cell(cell_id, timeout=0)
        assert time.monotonic() - started < 5
        with pytest.raises(KernelDied):
            await ws.run_cell(cell_id, timeout=0)
        with pytest.raises(KernelDied):
            await ws.inspect_variables()
