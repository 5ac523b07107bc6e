"""The one output normaliser, fed canned kernel messages: streams, clear_output, displays, caps."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path
from typing import Any

import nbformat
import pytest

from jupyter_ci.execution.outputs import NotebookOutputs, StreamText, coalesce_streams, message


def msg(msg_type: str, **content: Any) -> dict[str, Any]:
    return message(msg_type, **content)


def stream(text: str, name: str = "stdout") -> dict[str, Any]:
    return msg("stream", name=name, text=text)


def display(text: str, display_id: str | None = None, kind: str = "display_data") -> dict[str, Any]:
    transient = {"display_id": display_id} if display_id else {}
    extra = {"execution_count": 1} if kind == "execute_result" else {}
    return msg(kind, data={"text/plain": text}, metadata={}, transient=transient, **extra)


def update(text: str, display_id: str) -> dict[str, Any]:
    return msg(
        "update_display_data",
        data={"text/plain": text},
        metadata={},
        transient={"display_id": display_id},
    )


def notebook(cells: int = 1, **kwargs: Any) -> NotebookOutputs:
    nb = nbformat.v4.new_notebook()  # type: ignore[no-untyped-call]
    nb.cells = [nbformat.v4.new_code_cell("") for _ in range(cells)]  # type: ignore[no-untyped-call]
    return NotebookOutputs(nb, **kwargs)


def feed(outputs: NotebookOutputs, index: int, *messages: dict[str, Any]) -> None:
    for one in messages:
        outputs.feed(one, index)


def texts(outputs: NotebookOutputs, index: int = 0) -> list[str]:
    return [out.get("text") or out["data"]["text/plain"] for out in outputs.nb.cells[index].outputs]


def shown(*chunks: str, limit: int = 10_000) -> str:
    text = StreamText(limit)
    for chunk in chunks:
        text.write(chunk)
    return text.render()


# --- streams ---------------------------------------------------------------------------------


def test_consecutive_writes_to_a_stream_are_one_output() -> None:
    outputs = notebook()
    feed(
        outputs,
        0,
        stream("10%\r"),
        stream("20%\r"),
        stream("done\n"),
        stream("warning\n", "stderr"),
        stream("a"),
        stream("b\n"),
    )
    assert [(o["name"], o["text"]) for o in outputs.nb.cells[0].outputs] == [
        ("stdout", "done\n"),
        ("stderr", "warning\n"),
        ("stdout", "ab\n"),
    ]


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        ("abc\rxy", "xyc"),  # \r goes back to the line's start; what follows overwrites
        ("line\r\n", "line\n"),
        ("keep\r", "keep"),
        ("one\ntwo\rTWO\n", "one\nTWO\n"),
        ("a\r\nb\n 10%\r 50%\r100%\rdone\n", "a\nb\ndone\n"),
        ("abc\b\bd", "ad"),
        ("\bx", "x"),  # nothing before the cursor to erase
        ("a\n\bb", "a\nb"),  # a backspace does not cross a line
        ("abc\rX\b", "c"),  # as JupyterLab: the character under the cursor goes too
    ],
)
def test_control_characters_as_jupyterlab_shows_them(raw: str, text: str) -> None:
    assert shown(raw) == text
    assert shown(*raw) == text  # however the stream is split into messages


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_streams_match_jupyterlab_on_random_writes(tmp_path: Path) -> None:
    """Against ``processText`` of JupyterLab 4.6's output area, run by node."""
    script = Path(__file__).with_name("jupyterlab_process_text.js")
    rng = random.Random(15)  # noqa: S311 - reproducible cases, not secrets
    cases = [
        ["".join(rng.choice("ab\n\r\b") for _ in range(rng.randint(0, 12))) for _ in range(4)]
        for _ in range(2000)
    ]
    done = subprocess.run(
        ["node", str(script)], input=json.dumps(cases), capture_output=True, text=True, check=True
    )
    expected = json.loads(done.stdout)
    assert [shown(*chunks) for chunks in cases] == expected


def test_a_progress_bar_in_pieces_ends_as_its_last_state() -> None:
    outputs = notebook()
    pieces = ["epoch 1\n", "\r  0%|          | 0/10", "\r 50%|#####     | 5/10"]
    feed(outputs, 0, *(stream(piece) for piece in pieces), stream("\r100%|##########| 10/10\n"))
    assert texts(outputs) == ["epoch 1\n100%|##########| 10/10\n"]


def test_coalescing_built_outputs_gives_what_live_merging_gives() -> None:
    rng = random.Random(7)  # noqa: S311 - reproducible cases, not secrets
    for _ in range(300):
        chunks = [
            ("stdout" if rng.random() < 0.7 else "stderr", rng.choice(["a", "b\n", "\r", "\bc"]))
            for _ in range(rng.randint(1, 12))
        ]
        outputs = notebook()
        feed(outputs, 0, *(stream(text, name) for name, text in chunks))
        built = [
            nbformat.v4.new_output("stream", name=name, text=text)  # type: ignore[no-untyped-call]
            for name, text in chunks
        ]
        assert coalesce_streams(built) == outputs.nb.cells[0].outputs
    # Other outputs are kept as they are, and end a stream; list texts are joined.
    image = {"output_type": "display_data", "data": {"image/png": "iVBO"}, "metadata": {}}
    built_outputs: list[dict[str, Any]] = [
        {"output_type": "stream", "name": "stdout", "text": ["a\n", "b\r"]},
        {"output_type": "stream", "name": "stdout", "text": "c\n"},
        image,
        {"output_type": "stream", "name": "stdout", "text": "d\n"},
    ]
    assert coalesce_streams(built_outputs) == [
        {"output_type": "stream", "name": "stdout", "text": "a\nc\n"},
        image,
        {"output_type": "stream", "name": "stdout", "text": "d\n"},
    ]


# --- clear_output and displays ---------------------------------------------------------------


def test_clear_output_now_and_on_wait() -> None:
    outputs = notebook()
    feed(outputs, 0, stream("gone\n"), display("gone too"), msg("clear_output", wait=False))
    assert texts(outputs) == []
    feed(outputs, 0, stream("old\n"), msg("clear_output", wait=True))
    assert texts(outputs) == ["old\n"]  # kept until the next output comes
    feed(outputs, 0, stream("new\n"))
    assert texts(outputs) == ["new\n"]
    feed(outputs, 0, msg("clear_output", wait=True), display("shown"))
    assert texts(outputs) == ["shown"]


def test_display_updates_by_id_across_cells() -> None:
    outputs = notebook(cells=2)
    feed(outputs, 0, display("v1", "d1"), display("plain"))
    feed(outputs, 1, update("v2", "d1"))
    assert texts(outputs, 0) == ["v2", "plain"]
    assert texts(outputs, 1) == []
    # Displaying again with the same id adds an output and updates the earlier ones.
    feed(outputs, 1, display("v3", "d1", kind="execute_result"))
    assert texts(outputs, 0) == ["v3", "plain"]
    assert texts(outputs, 1) == ["v3"]
    # A cleared output is no longer updated.
    feed(outputs, 1, msg("clear_output", wait=False), update("v4", "d1"))
    assert texts(outputs, 0) == ["v4", "plain"]
    assert texts(outputs, 1) == []
    # Nor is one of a cell that runs again.
    outputs.begin(0)
    outputs.nb.cells[0].outputs = []
    feed(outputs, 1, update("v5", "d1"))
    assert texts(outputs, 0) == []


def test_display_ids_follow_cells_inserted_and_deleted() -> None:
    outputs = notebook(cells=2)
    feed(outputs, 1, display("v1", "d1"))
    cells = outputs.nb.cells
    cells.insert(0, nbformat.v4.new_code_cell("new"))  # type: ignore[no-untyped-call]
    outputs.cell_inserted(0)
    cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text="x")]  # type: ignore[no-untyped-call]
    feed(outputs, 0, update("v2", "d1"))
    assert texts(outputs, 2) == ["v2"]
    assert texts(outputs, 0) == ["x"]
    del cells[0]
    outputs.cell_deleted(0)
    feed(outputs, 0, update("v3", "d1"))
    assert texts(outputs, 1) == ["v3"]
    del cells[1]
    outputs.cell_deleted(1)
    feed(outputs, 0, update("v4", "d1"))  # the display is gone with its cell
    assert texts(outputs, 0) == []


def test_idle_ends_the_cell_and_counts_are_taken() -> None:
    outputs = notebook()
    assert not outputs.feed(msg("execute_input", code="x", execution_count=7), 0)
    assert outputs.nb.cells[0].execution_count == 7
    assert outputs.feed(msg("status", execution_state="idle"), 0)


# --- finishing and caps ------------------------------------------------------------------------


def test_an_error_reply_without_an_error_output_still_gives_one() -> None:
    outputs = notebook()
    cell = outputs.nb.cells[0]
    reply = {"status": "error", "ename": "E", "evalue": "v", "traceback": ["t"]}
    assert outputs.finish(cell.outputs, reply) == [
        {"output_type": "error", "ename": "E", "evalue": "v", "traceback": ["t"]}
    ]
    # With an error output already there, none is added.
    again = notebook()
    feed(again, 0, msg("error", ename="ValueError", evalue="bad", traceback=[]))
    assert [o["ename"] for o in again.finish(again.nb.cells[0].outputs, reply)] == ["ValueError"]


def test_runaway_output_is_capped() -> None:
    outputs = notebook(max_stream_chars=100, max_outputs=3)
    for i in range(1000):
        outputs.feed(stream(f"{i:04d}\n"), 0)
    (out,) = outputs.nb.cells[0].outputs
    head, tail = out["text"].split("[... jupyter-ci cut ")
    assert head == "".join(f"{i:04d}\n" for i in range(10)) + "\n"
    assert tail.endswith("".join(f"{i:04d}\n" for i in range(990, 1000)))
    cut = int(tail.split(" ")[0])
    assert cut + 100 == 5000  # every character is either kept or counted
    feed(outputs, 0, *(display(str(i)) for i in range(5)), stream("late\n", "stderr"))
    finished = outputs.finish(outputs.nb.cells[0].outputs)
    assert len(finished) == 4
    assert finished[-1]["text"] == "[jupyter-ci dropped 4 more outputs of this cell]\n"


def test_a_long_line_is_capped_too_and_control_characters_still_apply() -> None:
    assert len(shown("x" * 10_000, limit=100)) < 200
    assert shown("x" * 10_000, "\rab", limit=100).endswith("ab" + "x" * 48)
    cleared = notebook(max_stream_chars=100, max_outputs=2)
    feed(cleared, 0, *(display(str(i)) for i in range(5)), msg("clear_output", wait=False))
    feed(cleared, 0, stream("after\n"))
    assert cleared.finish(cleared.nb.cells[0].outputs) == [
        {"output_type": "stream", "name": "stdout", "text": "after\n"}
    ]  # the count of dropped outputs went with what was cleared
