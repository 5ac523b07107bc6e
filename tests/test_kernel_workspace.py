"""The headless workspace on a real ipykernel (its outputs: tests/test_outputs.py)."""

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

shared_loop = pytest.mark.asyncio(loop_scope="module")


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
    assert first.duration >= 0
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
    result = await ws.run_cell(await cell(ws, "import time; time.sleep(1000)"), timeout=1)
    assert result.status is CellStatus.TIMED_OUT
    assert result.error is not None
    assert result.error["ename"] == "KeyboardInterrupt"  # interrupted, not given up on
    assert result.duration is not None
    assert result.duration >= 1
    after = await ws.run_cell(await cell(ws, "print('alive')"), timeout=10)
    assert after.status is CellStatus.OK
    assert after.outputs[0]["text"] == "alive\n"


@shared_loop
async def test_a_busy_loop_times_out(ws: KernelWorkspace) -> None:
    result = await ws.run_cell(await cell(ws, "while True:\n    pass"), timeout=1)
    assert result.status is CellStatus.TIMED_OUT
    assert result.error is not None
    assert result.error["ename"] == "KeyboardInterrupt"


@shared_loop
async def test_time_queued_behind_another_request_is_not_counted(ws: KernelWorkspace) -> None:
    # Sent first on the same socket, so the kernel runs it first: ours waits behind it.
    ws.kernel_client.execute("import time; time.sleep(2)")
    started = time.monotonic()
    result = await ws.run_cell(await cell(ws, "print('my turn')"), timeout=1)
    waited = time.monotonic() - started
    assert result.status is CellStatus.OK  # not timed out, though it waited past its timeout...
    assert result.outputs[0]["text"] == "my turn\n"
    assert waited >= 2
    assert result.duration is not None
    assert waited - result.duration >= 1.5  # ...its clock started when the kernel began it


@shared_loop
async def test_a_cell_aborted_by_the_kernel(ws: KernelWorkspace) -> None:
    # Sent first on the same socket, so it is ahead of ours; its error makes the kernel skip
    # the requests queued behind it. The second it sleeps is how long ours, sent just after on
    # the same socket, has to reach the kernel's queue.
    ws.kernel_client.execute("import time; time.sleep(1); 1 / 0", stop_on_error=True)
    result = await ws.run_cell(await cell(ws, "print('never')"), timeout=10)
    assert result.status is CellStatus.ABORTED
    assert result.outputs == []
    assert (await ws.run_cell(await cell(ws, "print('next')"), timeout=10)).status is CellStatus.OK


@shared_loop
async def test_a_request_the_kernel_ends_without_a_reply_does_not_hold_the_workspace(
    ws: KernelWorkspace,
) -> None:
    # The kernel cannot send this reply (a payload that is not JSON): it goes idle without one,
    # as it does when an interrupt lands in its request handler outside the cell's code.
    unsendable = "get_ipython().payload_manager.write_payload({'source': 'test', 'data': object()})"
    result = await ws.run_cell(await cell(ws, unsendable), timeout=0)
    assert result.status is CellStatus.ABORTED
    after = await ws.run_cell(await cell(ws, "print('next')"), timeout=10)
    assert after.outputs == [{"output_type": "stream", "name": "stdout", "text": "next\n"}]


@shared_loop
async def test_stop_interrupts_and_reports_interrupted(ws: KernelWorkspace, tmp_path: Path) -> None:
    marker = tmp_path / "started"
    source = f"import time\nopen({str(marker)!r}, 'w').close()\ntime.sleep(30)"
    task = asyncio.ensure_future(ws.run_cell(await cell(ws, source), timeout=0))
    for _ in range(200):  # the kernel began the cell
        if marker.exists():
            break
        await asyncio.sleep(0.05)
    await ws.interrupt()
    result = await asyncio.wait_for(task, 10)
    assert result.status is CellStatus.INTERRUPTED
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


@shared_loop
async def test_what_a_failure_is_about_is_read_without_a_trace(ws: KernelWorkspace) -> None:
    setup = "import pandas as pd\nfix_frame = pd.DataFrame({'petal_length': [1.0]})"
    before = await ws.run_cell(await cell(ws, setup), timeout=30)
    names = {v.name for v in await ws.inspect_variables()}
    lines = await ws.fix_context("KeyError", "'petal_len'", "fix_frame['petal_len']")
    assert lines == [
        "fix_frame is a DataFrame with columns: 'petal_length'",
        "closest to 'petal_len' among fix_frame's columns: 'petal_length'",
    ]
    # Nothing added to the namespace, the history or the execution count.
    assert {v.name for v in await ws.inspect_variables()} == names
    after = await ws.run_cell(await cell(ws, "pass"), timeout=10)
    assert before.execution_count is not None
    assert after.execution_count == before.execution_count + 1
    assert await ws.fix_context("ZeroDivisionError", "division by zero", "1/0") == []


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
async def test_display_updates_find_their_cell_after_cells_are_inserted_above_it(
    tmp_path: Path,
) -> None:
    async with await KernelWorkspace.open(tmp_path / "displays.ipynb") as ws:
        shown = await ws.insert_cell(
            None,
            "from IPython.display import display, update_display\n"
            "handle = display({'text/plain': 'v1'}, raw=True, display_id='d')",
        )
        await ws.run_cell(shown, timeout=10)
        above = await ws.insert_cell(None, "print('above')")  # the displaying cell moves down
        await ws.run_cell(above, timeout=10)
        later = await ws.insert_cell(
            shown, "update_display({'text/plain': 'v2'}, raw=True, display_id='d')"
        )
        await ws.run_cell(later, timeout=10)
        cells = {c.id: c for c in await ws.read_cells()}
        assert [o["data"]["text/plain"] for o in cells[shown].outputs] == ["v2"]
        assert [o["text"] for o in cells[above].outputs] == ["above\n"]
        assert cells[later].outputs == []


@pytest.mark.asyncio
async def test_a_kernel_that_dies_mid_cell_ends_it_kernel_died(tmp_path: Path) -> None:
    async with await KernelWorkspace.open(tmp_path / "dies.ipynb") as ws:
        cell_id = await ws.insert_cell(None, "import os\nos._exit(1)")
        result = await ws.run_cell(cell_id, timeout=0)
        assert result.status is CellStatus.KERNEL_DIED
        assert (await ws.run_cell(cell_id, timeout=0)).status is CellStatus.KERNEL_DIED
        with pytest.raises(KernelDied):
            await ws.inspect_variables()
