"""The expectations file (``jupyter_ci.expected``): what the server writes, what the magic reads."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from jupyter_ci import expected
from jupyter_ci.expected import Expectation

CODE = "%%ci set y to 2"


def expectation(
    cell_id: str = "c1", code: str = CODE, expires: float = 2e9, id: str = "e1"
) -> Expectation:
    return Expectation(id=id, cell_id=cell_id, digest=expected.code_digest(code), expires=expires)


def test_the_file_sits_next_to_the_connection_file_under_its_own_name(tmp_path: Path) -> None:
    path = expected.path_for(str(tmp_path / "kernel-abc.json"))
    assert path == str(tmp_path / "jupyter-ci-expected-kernel-abc.json")
    # Tools look for connection files as kernel-*.json: this is not one.
    assert not Path(path).name.startswith("kernel-")


def test_written_read_back_and_removed_when_empty(tmp_path: Path) -> None:
    path = str(tmp_path / "x.json")
    expected.write(path, "S", [expectation()])
    assert expected.read(path) == ("S", [expectation()])
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]  # no temporary file left
    expected.write(path, "S", [])
    assert not Path(path).exists()
    expected.write(path, "S", [])  # nothing to remove: fine


def test_an_unreadable_file_is_no_expectation(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    assert expected.read(str(path)) is None
    path.write_text("{not json")
    assert expected.read(str(path)) is None
    path.write_text(json.dumps({"expected": []}))
    assert expected.read(str(path)) is None
    path.write_text(json.dumps({"session": "S", "expected": [{"id": "x"}, "junk"]}))
    assert expected.read(str(path)) == ("S", [])


def test_the_cell_is_found_by_session_and_code_and_taken_once(tmp_path: Path) -> None:
    path = str(tmp_path / "x.json")
    expected.write(
        path,
        "S",
        [expectation("c1"), expectation("c2", id="e2"), expectation("old", "other", expires=5.0)],
    )
    slept: list[float] = []
    taken: set[str] = set()

    def find(session: str, code: str) -> str | None:
        return expected.expected_cell(
            path, session, code, taken, wait=0.0, clock=lambda: 10.0, sleep=slept.append
        )

    # Another session (a browser tab, a console): never, and without waiting.
    assert find("T", CODE) is None
    assert slept == []
    # Two cells with the same code (two identical %%ci in a Run All): each once, in order.
    assert find("S", CODE) == "c1"
    assert find("S", CODE) == "c2"
    assert find("S", CODE) is None
    assert taken == {"e1", "e2"}
    # Expired: not found.
    assert find("S", "other") is None


def test_the_magic_waits_briefly_for_an_expectation_on_its_way(tmp_path: Path) -> None:
    path = str(tmp_path / "x.json")
    expected.write(path, "S", [expectation("first", "something else")])
    writer = threading.Timer(0.2, lambda: expected.write(path, "S", [expectation("c1")]))
    writer.start()
    try:
        assert expected.expected_cell(path, "S", CODE, set(), wait=30.0) == "c1"
    finally:
        writer.cancel()
    # With no file at all nothing is expected from this kernel: no waiting.
    slept: list[float] = []
    missing = str(tmp_path / "none.json")
    assert expected.expected_cell(missing, "S", CODE, set(), wait=30.0, sleep=slept.append) is None
    assert slept == []
