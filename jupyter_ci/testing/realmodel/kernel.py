"""A kernel for the bench: a virtualenv with the data-science stack and a kernelspec for it."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TextIO

from .cache import _log, _run, cache_dir

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


def _encryption(venv: Path) -> dict[str, object]:
    """What the environment's own ipykernel kernelspec declares of channel encryption (ipykernel
    7: CurveZMQ): declared here too, the bench's kernels run encrypted and quiet (see
    :func:`jupyter_ci.workspaces.kernel.channel_encryption`); an older ipykernel declares none."""
    own = venv / "share" / "jupyter" / "kernels" / "python3" / "kernel.json"
    try:
        metadata = json.loads(own.read_text(encoding="utf-8")).get("metadata") or {}
    except (OSError, ValueError, AttributeError):
        return {}
    declared = metadata.get("supported_encryption") if isinstance(metadata, dict) else None
    return {"supported_encryption": declared} if declared else {}


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
        "metadata": {"debugger": False, **_encryption(venv)},
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec, indent=2) + "\n", encoding="utf-8")
    return kernel_path(cache)
