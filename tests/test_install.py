"""A missing package: the loop proposes ``%pip install``, installs it when allowed (or approved:
"Install and continue"), and retries the failed cell within the same run.

The package is a real wheel built here, installed by the kernel's real ``%pip`` from a local
folder into a folder of the test (never into the test environment)."""

from __future__ import annotations

import os
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from jupyter_ci.agent.loop import ReviewDecision
from jupyter_ci.agent.states import RunState
from jupyter_ci.testing import Reply, ScriptedModelServer
from jupyter_ci.workspaces.kernel import KernelWorkspace

from .loop_support import Recorder, run_loop, write_notebook

PACKAGE = "ci_demo_pkg"
USES_IT = f"import {PACKAGE}\nprint({PACKAGE}.ANSWER)"


def build_wheel(folder: Path) -> Path:
    """A minimal pure-Python wheel of :data:`PACKAGE` (``ANSWER = 42``)."""
    info = f"{PACKAGE}-1.0.dist-info"
    files = {
        f"{PACKAGE}/__init__.py": "ANSWER = 42\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {PACKAGE}\nVersion: 1.0\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{name},,\n" for name in files) + f"{info}/RECORD,,\n"
    wheel = folder / f"{PACKAGE}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return wheel


@pytest_asyncio.fixture
async def workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[KernelWorkspace]:
    """A kernel whose ``%pip`` installs from a local folder into a folder of this test."""
    wheels, site = tmp_path / "wheels", tmp_path / "site"
    wheels.mkdir()
    site.mkdir()  # on sys.path from the start, so a package installed there later is found
    build_wheel(wheels)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setenv("PIP_TARGET", str(site))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    opened = await KernelWorkspace.open(write_notebook(tmp_path / "needs.ipynb"))
    try:
        yield opened
    finally:
        await opened.close()


async def test_an_allowed_install_runs_and_the_failed_cell_is_retried(
    workspace: KernelWorkspace,
) -> None:
    recorder = Recorder()
    with ScriptedModelServer([Reply.code(USES_IT), Reply.text("It is 42.")]) as server:
        outcome = await run_loop(
            workspace, server, "use the package", recorder=recorder, allow_pip_install=True
        )
        assert len(server.chat_requests) == 2  # no fix asked for: the same code ran again
    assert (outcome.state, outcome.reason) == (RunState.DONE, "answered")
    pip_cell, used = await workspace.read_cells()
    assert pip_cell.source == f"%pip install {PACKAGE}"
    assert pip_cell.execution_count is not None
    assert "".join(o.get("text", "") for o in used.outputs) == "42\n"
    statuses = [e["status"] for e in recorder.of("execution_finished")]
    assert statuses == ["error", "ok", "ok"]  # the cell, the install, the cell again


async def test_install_and_continue_is_asked_for_and_rejecting_it_ends_the_run(
    workspace: KernelWorkspace,
) -> None:
    asked: list[tuple[str, str]] = []

    async def installs(cell_id: str, source: str, diff: str) -> ReviewDecision:
        asked.append((cell_id, source))
        return ReviewDecision("run")

    recorder = Recorder()
    with ScriptedModelServer([Reply.code(USES_IT), Reply.text("It is 42.")]) as server:
        outcome = await run_loop(
            workspace, server, "use it", recorder=recorder, approve=installs, mode="auto"
        )
    assert (outcome.state, outcome.reason) == (RunState.DONE, "answered")
    assert [source for _, source in asked] == [f"%pip install {PACKAGE}"]
    waiting = [e for e in recorder.of("state") if e["state"] == "awaiting_approval"]
    assert [(e["reason"], e["text"]) for e in waiting] == [
        ("missing_package", "jupyter-ci: a package is missing — install it and continue?")
    ]

    async def refuses(cell_id: str, source: str, diff: str) -> ReviewDecision:
        return ReviewDecision("reject")

    with ScriptedModelServer([Reply.code("import another_missing_pkg")]) as server:
        outcome = await run_loop(workspace, server, "use another", approve=refuses, mode="auto")
    assert (outcome.state, outcome.reason) == (RunState.FAILED, "missing_package")
    assert outcome.error is not None
    assert "run the %%ci cell again" in outcome.error.hint
