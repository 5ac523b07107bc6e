"""``%%ci`` cells a jupyter-ci tab expects from a server-side executor: the file both sides read.

JupyterLab normally sends a cell to the kernel itself, with the cell's metadata, and the
labextension's stamp in it tells the magic to hand the request to that tab. An extension that
runs cells from the server instead (jupyter-server-nbmodel) uses the kernel manager's own client
and sends no metadata, so the stamp never arrives. For those, the tab tells the jupyter-ci server
which ``%%ci`` cell it has just scheduled (``expect_handoff``); the server writes, next to the
kernel's connection file, the session id of the kernel manager's clients and the expected cells
(by a digest of their code). The magic hands off a request without a stamp only when it comes
from that session with a code found there.

Standard library only: the kernel side reads this file from ``%%ci``, and ``%load_ext`` stays
light.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import asdict, dataclass
from typing import Any

#: The file next to a kernel's connection file ``kernel-<id>.json`` is ``PREFIX + kernel-<id>.json``
#: (not ``kernel-*.json``, which tools take for connection files).
PREFIX = "jupyter-ci-expected-"
#: An expectation not taken within this long is dropped (seconds).
LIFETIME = 120.0
#: How long the magic waits for an expectation the tab sent just before the cell (seconds).
WAIT = 2.0
#: How often the magic reads the file again meanwhile (seconds).
POLL = 0.05


@dataclass(frozen=True)
class Expectation:
    """A ``%%ci`` cell scheduled in a tab, waiting for its request to reach the kernel."""

    #: Chosen by the server; the kernel takes each one once.
    id: str
    cell_id: str
    #: :func:`code_digest` of the cell's source, as the kernel will receive it.
    digest: str
    #: When it is dropped (seconds since the epoch).
    expires: float


def code_digest(code: str) -> str:
    """The digest the expectations name a cell's code by."""
    return hashlib.sha256(code.encode("utf-8")).hexdigest()


def path_for(connection_file: str) -> str:
    """The expectations file of the kernel with this connection file."""
    folder, name = os.path.split(connection_file)
    return os.path.join(folder, PREFIX + name)


def write(path: str, session: str, expectations: Collection[Expectation]) -> None:
    """Replace the file (atomically); remove it when nothing is expected."""
    if not expectations:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
        return
    data = {"session": session, "expected": [asdict(e) for e in expectations]}
    folder = os.path.dirname(path) or "."
    fd, temporary = tempfile.mkstemp(prefix=".jupyter-ci-", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temporary)
        raise


def read(path: str) -> tuple[str, list[Expectation]] | None:
    """The session and the expectations in the file (None if there is none, or unreadable)."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    if not isinstance(data, Mapping) or not isinstance(data.get("session"), str):
        return None
    found: list[Expectation] = []
    for entry in data.get("expected") or []:
        try:
            found.append(
                Expectation(
                    id=str(entry["id"]),
                    cell_id=str(entry["cell_id"]),
                    digest=str(entry["digest"]),
                    expires=float(entry["expires"]),
                )
            )
        except (KeyError, TypeError, ValueError):
            continue
    return data["session"], found


def expected_cell(
    path: str,
    session: str,
    code: str,
    taken: set[str],
    *,
    wait: float = WAIT,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], Any] = time.sleep,
) -> str | None:
    """The cell id a tab expects this request (from ``session``, running ``code``) to be.

    None when no tab expects it. Waits up to ``wait`` seconds only while the file names this
    session (a server-side executor sent the request and a tab expects some cell of this
    kernel), in case the tab's expectation is on its way. The expectation found is added to
    ``taken``, and one already there is not returned again.
    """
    digest = code_digest(code)
    deadline = time.monotonic() + wait
    while True:
        content = read(path)
        if content is None or content[0] != session:
            return None
        now = clock()
        for expectation in content[1]:
            if (
                expectation.digest == digest
                and expectation.id not in taken
                and expectation.expires > now
            ):
                taken.add(expectation.id)
                return expectation.cell_id
        if time.monotonic() >= deadline:
            return None
        sleep(POLL)
