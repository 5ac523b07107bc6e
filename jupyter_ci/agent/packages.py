"""A cell that failed for want of a package: which package to install."""

from __future__ import annotations

import re

from .workspace import Execution

#: Import names whose pip package is named differently.
PIP_NAMES = {
    "sklearn": "scikit-learn",
    "cv2": "opencv-python",
    "PIL": "pillow",
    "yaml": "pyyaml",
    "bs4": "beautifulsoup4",
    "skimage": "scikit-image",
    "dateutil": "python-dateutil",
}

_MISSING = re.compile(r"No module named '([A-Za-z0-9_]+)")


def missing_package(execution: Execution) -> str | None:
    """The pip package a ``ModuleNotFoundError`` asks for (None for any other ending)."""
    error = execution.error
    if error is None or error.get("ename") != "ModuleNotFoundError":
        return None
    match = _MISSING.search(str(error.get("evalue", "")))
    if match is None:
        return None
    name = match.group(1)
    return PIP_NAMES.get(name, name)
