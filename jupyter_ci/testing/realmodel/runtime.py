"""The runtime: llama-cpp-python[server] built once, portably, in the cache's own virtualenv."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TextIO

from .cache import RealModelError, _log, _run, cache_dir, venv_python

LLAMA_CPP_VERSION = "0.3.36"
#: A portable build: no ``-march=native`` (it crashes inside some virtual machines).
CMAKE_ARGS = (
    "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON "
    "-DGGML_BMI2=ON -DLLAVA_BUILD=OFF"
)


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
