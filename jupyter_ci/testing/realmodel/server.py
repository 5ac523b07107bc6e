"""Serving: a llama.cpp server for one model, in a ``with`` block or detached (``serve``)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from ...settings import Settings
from .cache import RealModelError, cache_dir, venv_python
from .runtime import is_built
from .weights import DEFAULT_MODEL, is_fetched, model_path, weights_named

#: Room for the reply after the longest prompt jupyter-ci sends (``context_tokens``).
REPLY_TOKENS = 2048
#: The server's context: jupyter-ci's default prompt budget and a reply. A smaller one fails a
#: long fix prompt (llama.cpp answers with an error, or an empty reply, past its context).
DEFAULT_N_CTX = Settings().context_tokens + REPLY_TOKENS
DEFAULT_N_THREADS = 2
#: Seconds a server may take to answer ``/v1/models`` after it was started.
READY_TIMEOUT = 120.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def server_argv(
    python: Path, model: Path, alias: str, port: int, n_ctx: int, n_threads: int
) -> list[str]:
    """The command line of a llama.cpp server for ``model`` on 127.0.0.1:``port``.

    ``--interrupt_requests False``: by default llama-cpp-python's server ends the reply it is
    streaming, as if complete, when another request arrives; then a second client (``jupyter ci
    bench --jobs 2``, a test next to a running bench) cuts the first one's code short. Without
    it, requests wait their turn.
    """
    return [
        str(python),
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--model_alias",
        alias,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
        "--n_threads",
        str(n_threads),
        "--interrupt_requests",
        "False",
    ]


def is_ready(base_url: str, timeout: float = 2.0) -> bool:
    """Whether an OpenAI-compatible server answers ``GET {base_url}/models``."""
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=timeout) as response:  # noqa: S310
            return int(response.status) == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


class LlamaServer:
    """A llama.cpp server process for one model on 127.0.0.1 (``with LlamaServer(...) as s:``).

    ``start()`` returns once ``/v1/models`` answers; it raises :class:`RealModelError` when the
    runtime is not built, the weights are not fetched, or the process exits early (with the tail
    of its log). ``stop()`` ends the process (SIGTERM, then SIGKILL). ``detach=True`` starts it in
    a session of its own, to outlive this process (``serve`` on the command line).
    """

    def __init__(
        self,
        name: str = DEFAULT_MODEL,
        *,
        port: int = 0,
        n_ctx: int = DEFAULT_N_CTX,
        n_threads: int = DEFAULT_N_THREADS,
        cache: Path | None = None,
        detach: bool = False,
    ) -> None:
        self.weights = weights_named(name)
        self.cache = cache or cache_dir()
        self.port = port or free_port()
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.detach = detach
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = self.cache / "logs" / f"serve-{self.weights.name}-{self.port}.log"

    @property
    def name(self) -> str:
        """The served model alias (the weights' name)."""
        return self.weights.name

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``: the ``api_base`` to give a client."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def model(self) -> str:
        """The litellm model string for this server (``openai/<name>``)."""
        return f"openai/{self.name}"

    def start(self, timeout: float = READY_TIMEOUT) -> str:
        """Start the server and wait until it answers; return its base URL."""
        python = venv_python(self.cache)
        if not python.exists() or not is_built(self.cache):
            raise RealModelError(
                f"llama-cpp-python is not built in {python.parent.parent}. Run "
                "`python -m jupyter_ci.testing.realmodel build` first (3-5 minutes)."
            )
        model = model_path(self.name, self.cache)
        if not is_fetched(self.name, self.cache):
            raise RealModelError(
                f"The weights of {self.name} are not in {model.parent}. Run "
                f"`python -m jupyter_ci.testing.realmodel fetch {self.name}` first."
            )
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        argv = server_argv(python, model, self.name, self.port, self.n_ctx, self.n_threads)
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=self.detach,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RealModelError(
                    f"The llama.cpp server for {self.name} exited with code "
                    f"{self.process.returncode} before it was ready; log {self.log_path}:\n"
                    + _tail(self.log_path)
                )
            if is_ready(self.base_url):
                return self.base_url
            time.sleep(0.25)
        self.stop()
        raise RealModelError(
            f"The llama.cpp server for {self.name} did not answer within {timeout:.0f} s; "
            f"log {self.log_path}:\n" + _tail(self.log_path)
        )

    def stop(self, timeout: float = 10.0) -> None:
        """End the server process (SIGTERM, then SIGKILL after ``timeout`` seconds)."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout)

    @property
    def running(self) -> bool:
        """Whether the process is alive."""
        return self.process is not None and self.process.poll() is None

    def __enter__(self) -> LlamaServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "".join(text.splitlines(True)[-lines:])


# --- detached servers (the command line) ------------------------------------------------------


def _state_path(name: str, cache: Path) -> Path:
    return cache / "servers" / f"{name}.json"


def _is_our_server(pid: int) -> bool:
    """Whether ``pid`` is alive and is a llama.cpp server (a reused pid is left alone)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True  # no /proc: trust the state file
    return b"llama_cpp.server" in cmdline


def serve(
    name: str,
    *,
    port: int = 0,
    n_ctx: int = DEFAULT_N_CTX,
    n_threads: int = DEFAULT_N_THREADS,
    cache: Path | None = None,
) -> dict[str, Any]:
    """Start a detached server for ``name`` (one per model) and record it; return its record."""
    cache = cache or cache_dir()
    current = server_status(name, cache)
    if current is not None:
        raise RealModelError(
            f"A server for {name} is already running at {current['base_url']} "
            f"(pid {current['pid']}); stop it first."
        )
    server = LlamaServer(
        name, port=port, n_ctx=n_ctx, n_threads=n_threads, cache=cache, detach=True
    )
    base_url = server.start()
    assert server.process is not None
    record = {
        "name": name,
        "pid": server.process.pid,
        "port": server.port,
        "base_url": base_url,
        "model": server.model,
        "n_ctx": n_ctx,
        "n_threads": n_threads,
        "log": str(server.log_path),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    state = _state_path(name, cache)
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return record


def server_status(name: str, cache: Path | None = None) -> dict[str, Any] | None:
    """The record of the running server for ``name``, or None (stale records are removed)."""
    cache = cache or cache_dir()
    state = _state_path(name, cache)
    try:
        record: dict[str, Any] = json.loads(state.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not _is_our_server(int(record.get("pid", 0))):
        state.unlink(missing_ok=True)
        return None
    return record


def stop(name: str, cache: Path | None = None, timeout: float = 10.0) -> bool:
    """Stop the detached server for ``name``; False when none was running."""
    cache = cache or cache_dir()
    record = server_status(name, cache)
    if record is None:
        return False
    pid = int(record["pid"])
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _is_our_server(pid):
        time.sleep(0.2)
    if _is_our_server(pid):
        os.kill(pid, signal.SIGKILL)
    _state_path(name, cache).unlink(missing_ok=True)
    return True
