"""The words Python and TypeScript must agree on, read from the protocol's JSON Schema.

``jupyter_ci/schema/protocol.schema.json`` is their one source (ARCHITECTURE.md, "One fact, one
source"): the terminal run states, the end reasons of each with the words shown for them, the
labels of how a cell ended, and the rule that recognises a ``%%ci`` cell. The labextension gets
the same from ``labextension/src/protocol.ts``, generated from that file.

Standard library only, and nothing is read at import: ``%load_ext jupyter_ci`` imports this module
(the magic recognises ``%%ci`` cells with :func:`is_ci_cell`), and the schema is read once, on
first use.
"""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any


@cache
def definitions() -> dict[str, Any]:
    """The schema's ``$defs`` (read once)."""
    from importlib import resources  # here: %load_ext imports this module, not this

    text = resources.files("jupyter_ci").joinpath("schema/protocol.schema.json").read_text("utf-8")
    defs: dict[str, Any] = json.loads(text)["$defs"]
    return defs


def _choices(name: str) -> dict[str, str]:
    """A ``oneOf`` of ``const`` definitions: each constant with its title, in order."""
    return {str(item["const"]): str(item["title"]) for item in definitions()[name]["oneOf"]}


@cache
def terminal_states() -> tuple[str, ...]:
    """The states a run ends in (``done``, ``failed``, ``stopped``)."""
    return tuple(definitions()["TerminalRunState"]["enum"])


@cache
def end_reasons() -> dict[str, tuple[str, ...]]:
    """The reasons a run may end with, by the terminal state it ends in."""
    return {state: tuple(_choices(f"{state.capitalize()}Reason")) for state in terminal_states()}


@cache
def reason_words() -> dict[str, str]:
    """The words shown for each end reason (``max_attempts`` → "the cell still failed ...")."""
    words: dict[str, str] = {}
    for state in terminal_states():
        words.update(_choices(f"{state.capitalize()}Reason"))
    return words


@cache
def cell_status_labels() -> dict[str, str]:
    """The label shown for each way a cell's execution can end (``timed_out`` → "Timed out")."""
    return _choices("CellStatus")


def constant(name: str) -> Any:
    """The value of one of the schema's constants (``HandoffMime``, ``ResumeMetadataKey``, ...)."""
    return definitions()[name]["const"]


@cache
def _ci_cell_pattern() -> re.Pattern[str]:
    return re.compile(definitions()["CICellPattern"]["pattern"])


def is_ci_cell(source: str) -> bool:
    """Whether a cell's source is a ``%%ci`` cell (the magic opens it; ``%%cipher`` is not)."""
    return _ci_cell_pattern().match(source) is not None
