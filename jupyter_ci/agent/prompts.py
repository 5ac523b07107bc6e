"""The prompts: product text kept as package data (``agent/prompts/*.txt``), rendered strictly.

Rendering fails when a placeholder has no value or a value has no placeholder, so a prompt and
the code that fills it cannot drift apart silently.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from string import Template

_PLACEHOLDER = re.compile(r"\$\{([a-z_]+)\}")


@cache
def template(name: str) -> str:
    """The raw text of prompt ``name`` (without its trailing newline)."""
    path = resources.files("jupyter_ci.agent").joinpath(f"prompts/{name}.txt")
    return path.read_text(encoding="utf-8").rstrip("\n")


def render(name: str, **values: object) -> str:
    """Prompt ``name`` with its ``${placeholders}`` filled from ``values``, exactly."""
    text = template(name)
    expected = set(_PLACEHOLDER.findall(text))
    given = set(values)
    if expected != given:
        missing = ", ".join(sorted(expected - given)) or "none"
        extra = ", ".join(sorted(given - expected)) or "none"
        raise KeyError(f"prompt {name!r}: missing values: {missing}; unexpected values: {extra}")
    return Template(text).substitute({key: str(value) for key, value in values.items()})
