"""Where the real model tier keeps everything, its error, and the logged commands that fill it."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

#: Where everything is cached unless ``$JUPYTER_CI_REALMODEL_CACHE`` says otherwise.
CACHE_ENV = "JUPYTER_CI_REALMODEL_CACHE"
DEFAULT_CACHE = Path("~/.cache/jupyter-ci/realmodel")


class RealModelError(RuntimeError):
    """Something the real model tier needs is missing or broken; the message says what to do."""


def cache_dir() -> Path:
    """The cache directory: ``$JUPYTER_CI_REALMODEL_CACHE`` or ``~/.cache/jupyter-ci/realmodel``."""
    configured = os.environ.get(CACHE_ENV)
    return Path(configured).expanduser() if configured else DEFAULT_CACHE.expanduser()


def venv_python(cache: Path | None = None) -> Path:
    """The interpreter of the cache's own virtualenv (where llama-cpp-python is installed)."""
    root = (cache or cache_dir()) / "venv"
    return root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _log(stream: TextIO | None, text: str) -> None:
    if stream is not None:
        stream.write(text + "\n")
        stream.flush()


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
