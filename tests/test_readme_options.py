"""The README's table of options says what ``jupyter_ci/options.py`` (the one table every way of
setting an option reads) holds: a row for each option and no other, its short flag, and its
default. The meanings are the README's own words, shorter than the options' help."""

from __future__ import annotations

import re
from pathlib import Path

from jupyter_ci.options import OPTIONS, Option

README = Path(__file__).resolve().parent.parent / "README.md"
#: A row of the options table: | `name` (`-x`)? | default | meaning |
ROW = re.compile(r"^\| `(\w+)`(?: \(`(-\w)`\))? \| ([^|]+) \| [^|]+ \|$", re.MULTILINE)
#: What the README writes for a default that is not a value of its own.
UNSET = {"(none)", "provider's", "data dir"}


def table() -> dict[str, tuple[str | None, str]]:
    text = README.read_text(encoding="utf-8")
    start = text.index("| option | default | meaning |")
    end = text.index("\n\n", start)
    found = ROW.findall(text[start:end])
    return {name: (short or None, default.strip()) for name, short, default in found}


def written(option: Option) -> set[str]:
    """How the README may write ``option``'s default."""
    value = option.default
    if isinstance(value, bool):
        return {str(value).lower()}
    if isinstance(value, (int, float)):
        if value < 0:  # a negative temperature: the provider's own
            return {"provider's"}
        return {f"{value:g}", str(value)}
    if value == "":
        return UNSET
    return {f"`{value}`"}


def test_every_option_has_its_row_with_its_default() -> None:
    rows = table()
    assert list(rows) == [option.name for option in OPTIONS]
    for option in OPTIONS:
        short, default = rows[option.name]
        assert short == option.short, option.name
        assert default in written(option), (option.name, default)
