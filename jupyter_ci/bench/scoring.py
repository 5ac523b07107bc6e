"""Finding ``@name[value]`` answers in what the agent produced, and scoring them.

Extraction (:func:`extract_answers`): every ``@name[value]`` in the texts given, in order — the
generated cells' outputs (stream text, then ``text/plain`` of results and displays), then the
agent's final prose answer. ``name`` is letters, digits and underscores; ``value`` is everything
up to the first ``]``. When a name occurs more than once, the last occurrence wins (so a final
answer overrides an intermediate print, and the prose answer overrides the outputs).

Scoring (:func:`score`), per labelled pair:

- the answer must hold the pair's name (exactly, case-sensitive); extra names are ignored;
- values are compared after stripping surrounding whitespace;
- if the label is a plain decimal number (``-?digits[.digits]``, with an optional exponent), the
  answer matches when it is a number of the same value: ``34.650`` and ``34.65`` match,
  ``35`` and ``35.0`` match, ``-0.00`` and ``0.00`` match; but ``34.649`` does not match ``34.65``
  (the answer must already be rounded as the format asks; nothing is rounded for it);
- otherwise the stripped strings must be equal, exactly (case and inner spacing included).

A task is correct when every labelled pair matches (the DABench rule).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

ANSWER = re.compile(r"@([A-Za-z_][A-Za-z0-9_]*)\[([^\]]*)\]")
NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def extract_answers(texts: Iterable[str]) -> dict[str, str]:
    """The ``@name[value]`` pairs found in ``texts``, in order; the last occurrence wins."""
    found: dict[str, str] = {}
    for text in texts:
        for match in ANSWER.finditer(text):
            name, value = match.group(1), match.group(2)
            found.pop(name, None)  # keep the order of last occurrence
            found[name] = value.strip()
    return found


def _number(text: str) -> Decimal | None:
    text = text.strip()
    if not NUMBER.fullmatch(text):
        return None
    try:
        return Decimal(text)
    except InvalidOperation:
        return None


def values_match(found: str, label: str) -> bool:
    """Whether an answer value matches a label value (see the module's rules)."""
    found, label = found.strip(), label.strip()
    if found == label:
        return True
    expected = _number(label)
    if expected is None:
        return False
    given = _number(found)
    return given is not None and given == expected


@dataclass(frozen=True)
class Score:
    """How one task's answers compare with its labels."""

    correct: bool
    #: Labelled names matched, wrong, and missing from the answers.
    matched: tuple[str, ...]
    wrong: tuple[str, ...]
    missing: tuple[str, ...]

    @property
    def answered(self) -> bool:
        """Whether any labelled name was answered at all (right or wrong)."""
        return bool(self.matched or self.wrong)


def score(answers: dict[str, str], labels: Sequence[tuple[str, str]]) -> Score:
    """Compare ``answers`` (name → value) with the labelled pairs; correct when all match."""
    matched: list[str] = []
    wrong: list[str] = []
    missing: list[str] = []
    for name, value in labels:
        if name not in answers:
            missing.append(name)
        elif values_match(answers[name], value):
            matched.append(name)
        else:
            wrong.append(name)
    correct = bool(labels) and not wrong and not missing
    return Score(correct, tuple(matched), tuple(wrong), tuple(missing))
