"""Results that look wrong although nothing raised: what the loop looks at again.

A cell can end well and still hold a wrong result: a mean that is NaN, an empty frame after a
filter that matched nothing, an exception an ``except`` clause printed and swallowed, an answer
line whose value is still the format's placeholder. With ``check_results`` on, the loop treats
such a result as a failure to look at (within ``max_attempts``) and tells the model what looks
wrong; the bench counts them either way.

The rules are conservative, because a false alarm costs an attempt. Each is about a value the
cell *reports*, never about data it merely shows (a table full of NaN is data, not a result):

- ``nan``: a result or a printed ``label: value`` line (or a line alone) whose value is NaN
  (``nan``, ``NaN``, ``<NA>``, ``NaT``, ``np.float64(nan)``);
- ``inf``: the same with an infinite value;
- ``empty``: pandas showing an empty frame (``Empty DataFrame``) or series (``Series([], ...``);
- ``swallowed``: text that only a caught exception prints, while the cell ended without an
  error: a traceback (``Traceback (most recent call last)``), a printed exception
  (``KeyError: 'x'``, ``ValueError: ...``), or an error line (``Error: ...``,
  ``An error occurred: ...``, ``Error while reading ...: ...``);
- ``noop``: pandas warning that a change did nothing (``ChainedAssignmentError``: an in-place
  method on a column, ``df[col].fillna(v, inplace=True)``, never changes the frame under
  Copy-on-Write, pandas 3's default), so what follows used the data unchanged;
- ``answer``: an answer line ``@name[value]`` whose value is empty, NaN, infinite, Python's
  ``None`` (not the word ``none``, a category like any other), holds an f-string's field that
  was not filled in (``{mean:.2f}``; a dict's ``{'a': 1}`` is a value), or is the placeholder the
  request's own format line gives for that name (``@mean[value]`` printed as is);
- ``cut``: an answer line whose value leaves items out, an ellipsis among its items
  (``@months[Jan, Feb, ..., Dec]``, as pandas and NumPy print a long series or array, or as
  the request's own placeholder writes it): the answer is the whole value;
- ``format``: when the request gives an answer format (``@name[...]``), an answer written
  another way: an ``@`` name the format does not have (``@Switzerland[Switzerland]``), or one
  of its names without its ``[value]`` (``@mean 33.7``);
- ``unrun`` (the loop's, not this module's: it knows whether a cell ran): a final answer to a
  request that names a data file of the kernel's folder, while none of the model's cells ran
  (the first look at the data, ``inspect_data``, is jupyter-ci's);
- ``unanswered`` (:func:`unanswered`): when the request gives an answer format, a final answer
  that writes none of its names as ``@name[value]``, in a run none of whose cells printed one.

Each concern is a :class:`Concern`: its kind and the text it was seen in (cut to
:data:`EVIDENCE_CHARS`). With ``share_outputs`` off the model is told the kinds only.

A NaN, an infinity, an empty frame or a printed error can be the right result; the other kinds
never are (:data:`WRONG_AS_WRITTEN`), so when only those were seen the model is not offered to
keep the result (:func:`may_be_right`): a small model offered that keeps it (the bench's
1.5B model answered "the result is correct" to every answer written in the wrong format).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..execution.outputs import coalesce_streams, joined

#: Characters of the text a concern was seen in that are kept with it.
EVIDENCE_CHARS = 120

#: How an answer line is written, in general: a request that shows it (the bench's asks for
#: "one @name[value] for each answer") describes the syntax, and asks for no answer ``name``.
ANSWER_SYNTAX = "@name[value]"

#: What each kind of concern means, as the model and the bench's report read it.
KINDS: dict[str, str] = {
    "nan": "a result is NaN (not a number)",
    "inf": "a result is infinite",
    "empty": "a data frame or series is empty",
    "swallowed": "an error was printed although the cell did not fail (an exception caught "
    "and printed?)",
    "noop": "a change did nothing: pandas warns that an in-place method on a column never "
    "changes the frame (assign the result instead: df[col] = df[col].method(...))",
    "answer": "an answer's value cannot be right as written",
    "cut": "an answer's value leaves items out, as a long series or array prints (print "
    "every item, e.g. with .tolist() or .to_dict())",
    "format": f"an answer is not written in the request's format ({ANSWER_SYNTAX}, with its names)",
    "unrun": "no code ran: the answer was not computed from the data file the request names",
    "unanswered": f"no answer was printed or given in the request's format, {ANSWER_SYNTAX}",
}

#: The kinds of concern whose result is wrong as it is written, whatever the data.
WRONG_AS_WRITTEN = frozenset({"noop", "answer", "cut", "format", "unrun", "unanswered"})

_NAN = r"(?:nan|<NA>|NaT|(?:np\.|numpy\.)?float(?:64|32)?\(nan\))"
_INF = r"(?:[-+]?inf(?:inity)?|(?:np\.|numpy\.)?float(?:64|32)?\([-+]?inf\))"
#: A reported value: the whole line, or after a short label and ``:`` or ``=``.
_REPORTED = r"^(?:[^\n:=]{0,80}[:=])?[ \t]*VALUE[ \t]*[.,;]?[ \t]*$"
_NAN_LINE = re.compile(_REPORTED.replace("VALUE", _NAN), re.IGNORECASE | re.MULTILINE)
_INF_LINE = re.compile(_REPORTED.replace("VALUE", _INF), re.IGNORECASE | re.MULTILINE)
_EMPTY = re.compile(r"^Empty DataFrame$|^Series\(\[\], ", re.MULTILINE)
_TRACEBACK = re.compile(r"Traceback \(most recent call last\)")
#: pandas' warning that a chained in-place change did nothing, and the code line it shows.
_NOOP = re.compile(r"ChainedAssignmentError: [^\n]*(?:\n(?!\S*:\d+: )[^\n]*)*", re.MULTILINE)
#: A printed exception: its class name (case-sensitive) and a colon, at the start of a line.
_EXCEPTION_LINE = re.compile(
    r"^[ \t]*(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception)[ \t]*:", re.M
)
#: A printed error line: ``Error: ...``, ``An error occurred: ...``, ``Error while ...: ...``.
_ERROR_LINE = re.compile(
    r"^[ \t]*(?:an?[ \t]+)?(?:error|exception)(?:[ \t]+occurred|[ \t]+(?:while|when|in|during|"
    r"loading|reading|processing|calculating|computing)\b[^:\n]{0,60})?[ \t]*:",
    re.IGNORECASE | re.MULTILINE,
)
_ANSWER = re.compile(r"@([A-Za-z_][A-Za-z0-9_]*)\[([^\]]*)\]")
#: An ``@`` name as an answer line starts (not an address's or a decorator's: after a space, a
#: quote or the start of a line), and what follows it.
_AT_NAME = re.compile(r"(?:^|(?<=[\s\"'`(]))@(\w+)(\[?)", re.MULTILINE)
_BAD_VALUE = re.compile(rf"^(?:(?i:{_NAN}|{_INF})|None|null)$")
#: An f-string's field left as written (``{name``, ``{df['x'].mean():.2f}``): a brace and a name;
#: a dict's or a set's repr has a quote, a digit or a brace after its brace.
_UNFILLED = re.compile(r"\{[A-Za-z_]")
#: An ellipsis standing for items left out: alone between separators (``1, ..., 9``,
#: ``[0.1 ... 0.9]``), not inside a word or a number.
_CUT = re.compile(r"(?:^|(?<=[\s,\[{(]))(?:\.\.\.|…)(?=$|[\s,\]})])")


@dataclass(frozen=True)
class Concern:
    """One thing that looks wrong: its kind (a key of :data:`KINDS`) and where it was seen."""

    kind: str
    evidence: str

    def describe(self, *, evidence: bool = True) -> str:
        """``kind's meaning: `evidence``` (the meaning alone without ``evidence``)."""
        meaning = KINDS[self.kind]
        return f"{meaning}: `{self.evidence}`" if evidence and self.evidence else meaning


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= EVIDENCE_CHARS else text[: EVIDENCE_CHARS - 1] + "…"


def placeholders(request: str) -> dict[str, str]:
    """The ``@name[placeholder]`` pairs of a request's answer format (name → placeholder), but
    the syntax's own description (:data:`ANSWER_SYNTAX`)."""
    return {
        name: value.strip()
        for name, value in _ANSWER.findall(request)
        if f"@{name}[{value}]" != ANSWER_SYNTAX
    }


def answer_concerns(text: str, request: str = "") -> list[Concern]:
    """Concerns about the ``@name[value]`` answers in ``text`` (see the module's rules)."""
    given = placeholders(request)
    found: list[Concern] = []
    for match in _ANSWER.finditer(text):
        name, value = match.group(1), match.group(2).strip()
        bad = (
            not value
            or _BAD_VALUE.match(value) is not None
            or _UNFILLED.search(value) is not None
            or (name in given and value == given[name] and not _is_number(value))
        )
        if bad:
            found.append(Concern("answer", _cut(match.group(0))))
        elif _CUT.search(value) is not None:
            found.append(Concern("cut", _cut(match.group(0))))
    if given:
        for match in _AT_NAME.finditer(text):
            name, bracket = match.group(1), match.group(2)
            if name not in given or not bracket:
                line = text[match.start() :].split("\n", 1)[0]
                found.append(Concern("format", _cut(line)))
                break
    return found


def answers_started(text: str) -> list[tuple[str, bool]]:
    """The ``@`` names ``text`` starts answer lines with (as :func:`answer_concerns` reads
    them), each with whether a ``[`` follows it."""
    return [(match.group(1), bool(match.group(2))) for match in _AT_NAME.finditer(text)]


def unanswered(texts: Iterable[str], request: str) -> Concern | None:
    """The concern when the request gives an answer format and none of ``texts`` (a final
    answer, the outputs of the run's cells) writes one of its names as ``@name[value]``."""
    given = placeholders(request)
    if not given:
        return None
    for text in texts:
        if any(match.group(1) in given for match in _ANSWER.finditer(text)):
            return None
    name, placeholder = next(iter(given.items()))
    return Concern("unanswered", f"@{name}[{placeholder}]")


def printed(outputs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The texts of a cell's outputs (streams, results), as the rules read them."""
    return [text for _, text in _texts(outputs)]


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _texts(outputs: Sequence[Mapping[str, Any]]) -> Iterable[tuple[str, str]]:
    """(kind, text) of each output that has text: ``stream`` or ``result``."""
    for out in coalesce_streams(outputs):
        kind = out.get("output_type")
        if kind == "stream":
            yield "stream", joined(out.get("text"))
        elif kind in ("execute_result", "display_data"):
            data = out.get("data")
            if isinstance(data, Mapping) and "text/plain" in data:
                yield "result", joined(data["text/plain"])


def output_concerns(outputs: Sequence[Mapping[str, Any]], request: str = "") -> list[Concern]:
    """What looks wrong in the outputs of a cell that ended without an error (one concern per
    kind and piece of evidence, in output order)."""
    found: list[Concern] = []

    def add(kind: str, evidence: str) -> None:
        concern = Concern(kind, _cut(evidence))
        if concern not in found:
            found.append(concern)

    for kind, text in _texts(outputs):
        for pattern, name in ((_NAN_LINE, "nan"), (_INF_LINE, "inf")):
            match = pattern.search(text)
            if match is not None and not _ANSWER.search(match.group(0)):
                add(name, match.group(0))
        match = _EMPTY.search(text)
        if match is not None:
            add("empty", text[match.start() :].split("\n", 1)[0])
        if kind == "stream":
            match = _NOOP.search(text)
            if match is not None:
                shown = [line.strip() for line in match.group(0).split("\n") if line.strip()]
                add("noop", shown[-1])  # the code line, after the warning's text
            for pattern in (_TRACEBACK, _EXCEPTION_LINE, _ERROR_LINE):
                match = pattern.search(text)
                if match is not None:
                    add("swallowed", text[match.start() :].split("\n", 1)[0])
                    break
        found.extend(c for c in answer_concerns(text, request) if c not in found)
    return found


def may_be_right(concerns: Iterable[Concern]) -> bool:
    """Whether the result these concerns were seen in may be right as it is (one of them is of
    a kind that can be: see :data:`WRONG_AS_WRITTEN`)."""
    return any(concern.kind not in WRONG_AS_WRITTEN for concern in concerns)


def describe_concerns(concerns: Sequence[Concern], *, evidence: bool = True) -> str:
    """The concerns as lines for the model (``- ...``), each kind with its evidence."""
    return "\n".join(f"- {concern.describe(evidence=evidence)}" for concern in concerns)


#: The kinds of concern about how answers are written, whose fix is the request's own format.
WRITTEN_WRONG = frozenset({"format", "unanswered"})
#: Characters of a format's placeholder in :func:`format_reminder` (a long description is cut).
REMINDER_PLACEHOLDER_CHARS = 60


def format_reminder(concerns: Iterable[Concern], request: str) -> str:
    """For concerns about how answers are written (:data:`WRITTEN_WRONG`), the request's answer
    names as its format gives them, and how a cell prints one; '' for other concerns, or a
    request without a format. "Not in the request's format" alone left a small model guessing:
    it printed ``@{value}[...]`` or ``@name value`` again."""
    given = placeholders(request)
    if not given or not any(concern.kind in WRITTEN_WRONG for concern in concerns):
        return ""
    names = " ".join(
        f"@{name}[{placeholder[:REMINDER_PLACEHOLDER_CHARS] or '...'}]"
        for name, placeholder in given.items()
    )
    first, one = next(iter(given)), len(given) == 1
    return (
        f"The request asks for {'this answer' if one else 'these answers'}, with "
        f"{'this name' if one else 'these names'} exactly: {names}. Print "
        f"{'it' if one else 'each one'} from the value the cell computed, "
        f'e.g. print(f"@{first}[{{{first}}}]").'
    )
