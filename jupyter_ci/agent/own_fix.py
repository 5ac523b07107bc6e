"""Fixes jupyter-ci writes itself (``own_fixes``), without asking the model.

Only where the kernel's facts leave one fix and it cannot change what the cell means:

- a ``KeyError`` on a column whose name the cell writes without the spaces the frame's name has
  (a CSV header's ``' WINDSPEED'``): each string literal of the cell that is no column of the
  frames it names but is one of them once spaces are set aside is written as the column is
  spelled; and the name the error is about, also when it is one column's once case, spaces,
  underscores and punctuation are set aside (``'DATE_TIME'`` for ``'DATE TIME'``). The kernel
  names the pairs (``spelled:`` lines of
  :data:`~jupyter_ci.agent.fix_context.FIX_CONTEXT_SOURCE`); a pair that is not the same name
  so is dropped, so a line the kernel forges can only respell a literal;
- a ``KeyError`` on an integer the cell looked up in a Series whose index holds labels
  (``monthly[0]`` on months): pandas 3 looks it up as a label, pandas before took it as a
  position, as the code means; each such ``name[i]`` the cell reads is written ``name.iloc[i]``
  (the kernel names the Series, ``positional:`` lines);
- a ``FileNotFoundError`` on a path close to the one data file the request names (the model
  "corrected" the user's ``unemployement_industry.csv``): the path is written as the request
  names it;
- a ``TypeError`` or ``ValueError`` of a frame's reduction (``titanic.corr()``,
  ``df.groupby('k').mean()``) on a column that holds no numbers: pandas 2 made their
  ``numeric_only`` False by default, pandas before left such columns out, as a model trained on
  older code means; each such call on a frame the kernel names (``numeric_only:`` lines) is
  passed ``numeric_only=True`` (:func:`numeric_only`);
- a ``NameError`` on one of the usual names of the data libraries (``pd``, ``np``, ``plt``,
  ``sns``, ``stats``): the import that defines it is put first;
- a cell that ran but printed its answer with a value where the request's format has a name
  (``@Nigeria[2010]``): when the cell sets a variable of each of the format's names, the print
  is written once per name (:func:`answer_names`);
- a cell that ran while pandas warned that an in-place change of a column did nothing
  (``ChainedAssignmentError``: ``df[col].fillna(v, inplace=True)`` never changes the frame
  under pandas 3's Copy-on-Write, as a model trained on older code means it to): each such
  statement is written as the assignment it means, ``df[col] = df[col].fillna(v)``
  (:func:`assigned_back`).

Small models fail these most often and fix them least: on the bench's dev set, a 1.5B model
ended 7 questions on such a ``KeyError`` after three tries that wrote the name the same way,
although the fix prompt listed the column with its spaces.
"""

from __future__ import annotations

import ast
import difflib
import io
import itertools
import json
import keyword
import re
import tokenize
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from .suspicious import answers_started

#: How the kernel's context names a respelling: ``spelled: ["as written", "as the column is"]``.
SPELLED_LINE = "spelled: "

#: How the kernel's context names a Series whose index holds labels, not positions, which the
#: cell looked an integer up in (``positional: "name"``): pandas 3 looks it up as a label, as
#: ``KeyError: 0`` says; pandas before 3 took it as a position, as the model's code meant.
POSITIONAL_LINE = "positional: "

#: How the kernel's context names a data frame the cell names that has a column of text, dates
#: or other values that are no numbers (``numeric_only: "name"``), given with an error of a
#: reduction such as ``df.corr()``: pandas 2 made its ``numeric_only`` False by default, so the
#: call raises where pandas before left those columns out, as a model trained on older code means.
NUMERIC_ONLY_LINE = "numeric_only: "

#: The frame methods (and those of a frame's ``groupby(...)``) whose ``numeric_only`` pandas 2
#: made False by default, and that raise on a column that holds no numbers.
NUMERIC_REDUCTIONS = frozenset(
    {"corr", "cov", "mean", "median", "std", "var", "sem", "skew", "kurt", "prod"}
)

#: What the name a ``KeyError`` is about may differ by from the one column it means, case
#: aside: spaces, underscores, punctuation (``'DATE_TIME'`` for ``'DATE TIME'``,
#: ``'avg.wait_time'`` for ``'avg. wait time '``). The kernel's source is given it too
#: (:func:`~jupyter_ci.agent.fix_context.fix_context_scope`).
SET_APART = r"[\W_]+"

#: The usual names of the data libraries and the import that defines each.
USUAL_IMPORTS = {
    "pd": "import pandas as pd",
    "np": "import numpy as np",
    "plt": "import matplotlib.pyplot as plt",
    "sns": "import seaborn as sns",
    "stats": "from scipy import stats",
}


@dataclass(frozen=True)
class OwnFix:
    """A fix of jupyter-ci's: the cell's new code, what was changed, in words, and the
    respellings it made (as written -> as the frame spells it)."""

    code: str
    said: str
    respelled: dict[str, str] = field(default_factory=dict)


def spellings(lines: list[str]) -> tuple[list[str], dict[str, str]]:
    """The context's lines without its ``spelled:`` lines, and the respellings those name
    (as written -> as the column is), only pairs that differ by spaces around the name."""
    kept, pairs = [], {}
    for line in lines:
        if not line.startswith(SPELLED_LINE):
            kept.append(line)
            continue
        try:
            written, spelled = json.loads(line[len(SPELLED_LINE) :])
        except (TypeError, ValueError):
            continue
        strings = isinstance(written, str) and isinstance(spelled, str)
        if strings and written != spelled and _one_name(written, spelled):
            pairs[written] = spelled
    return kept, pairs


def positionals(lines: list[str]) -> tuple[list[str], set[str]]:
    """The context's lines without its ``positional:`` lines, and the names those give (names
    only: a forged line can only add ``.iloc`` where a name is subscripted by an integer)."""
    return named_lines(lines, POSITIONAL_LINE)


def numeric_frames(lines: list[str]) -> tuple[list[str], set[str]]:
    """The context's lines without its ``numeric_only:`` lines, and the frames those name
    (names only: a forged line can only add ``numeric_only=True`` to a reduction's call)."""
    return named_lines(lines, NUMERIC_ONLY_LINE)


def named_lines(lines: list[str], prefix: str) -> tuple[list[str], set[str]]:
    """The context's lines without those that start with ``prefix`` (followed by a JSON
    string), and the names of Python those give; any other is dropped."""
    kept, names = [], set()
    for line in lines:
        if not line.startswith(prefix):
            kept.append(line)
            continue
        try:
            name = json.loads(line[len(prefix) :])
        except (TypeError, ValueError):
            continue
        if isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name):
            names.add(name)
    return kept, names


def name_key(name: str) -> str:
    """``name`` without what :data:`SET_APART` sets apart, in one case."""
    return re.sub(SET_APART, "", name.casefold())


def _one_name(written: str, spelled: str) -> bool:
    """Whether two spellings are of one name (a forged pair may only respell)."""
    return written.strip() == spelled.strip() or name_key(written) == name_key(spelled) != ""


def respelled(
    code: str, pairs: dict[str, str], how: str = "as the frame spells it"
) -> OwnFix | None:
    """``code`` with each string literal whose value is a key of ``pairs`` written as its value
    (the literal's quotes kept where they can hold it), also inside an f-string's fields; None
    when none is. ``how``: whose spelling, said after the change."""
    edits = [literal for literal in _literals(code) if literal.value in pairs]
    if not edits:
        return None
    lines = code.splitlines(keepends=True)
    for literal in reversed(edits):
        line = lines[literal.line].encode()  # ast's columns count UTF-8 bytes
        written = line[literal.start : literal.end].decode()
        new = _literal(written, pairs[literal.value]).encode()
        lines[literal.line] = (line[: literal.start] + new + line[literal.end :]).decode()
    made = {literal.value: pairs[literal.value] for literal in edits}
    names = ", ".join(f"{name!r} as {spelled!r}" for name, spelled in made.items())
    return OwnFix("".join(lines), f"wrote {names}, {how}", made)


#: How a cell's string literals are read, as source: run here (:func:`_literals`) and, as the
#: start of :data:`~jupyter_ci.agent.fix_context.FIX_CONTEXT_SOURCE`, in the kernel (which
#: cannot import this module), so that a literal the kernel pairs with a column is one this
#: module finds where the cell writes it. Lines of magics and shell commands are set aside as
#: comments of the same length, so positions stay the cell's.
LITERALS_SOURCE = r"""
import ast


def masked(code):
    return "".join(
        line if line.lstrip()[:1] not in ("%", "!") else line.replace(line.lstrip()[:1], "#", 1)
        for line in (code or "").splitlines(keepends=True)
    )


def literal_spans(code):
    # (line from 0, start, end, value) of each string literal written on one line, in order,
    # also inside an f-string's fields (df['A'] in f"{df['A'].mean()}"), not an f-string's
    # own text
    code = masked(code)
    try:
        tree = ast.parse(code)
    except Exception:
        return []
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            continue
        if node.end_lineno != node.lineno or node.end_col_offset is None:
            continue
        try:
            written = ast.literal_eval(ast.get_source_segment(code, node) or "")
        except Exception:
            continue  # an f-string's own text, not a literal
        if written == node.value:
            found.append((node.lineno - 1, node.col_offset, node.end_col_offset, written))
    return sorted(found)
"""
_LITERALS: dict[str, Any] = {}
exec(LITERALS_SOURCE, _LITERALS)  # noqa: S102 - our own source, in a fresh globals dict


class _Written(NamedTuple):
    """A string literal of the code: its line (from 0), its byte columns, its value."""

    line: int
    start: int
    end: int
    value: str


def _masked(code: str) -> str:
    """``code`` with its lines of IPython's magics and shell commands made comments of the same
    length (:data:`LITERALS_SOURCE`'s ``masked``)."""
    return str(_LITERALS["masked"](code))


def _tree(code: str) -> ast.Module | None:
    """The syntax tree of ``code`` (:func:`_masked`); None when it is no Python."""
    try:
        return ast.parse(_masked(code))
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None


def _literals(code: str) -> list[_Written]:
    """The string literals ``code`` writes on one line each, in order, also inside an
    f-string's fields (not an f-string's own text): :data:`LITERALS_SOURCE`'s
    ``literal_spans``, as the kernel reads them."""
    return [_Written(*span) for span in _LITERALS["literal_spans"](code)]


def _literal(written: str, value: str) -> str:
    """``value`` as a literal in the quotes of ``written`` (a plain one: no prefix), else its
    ``repr``."""
    quote = written[0]
    plain = quote in "'\"" and not written.startswith(quote * 3)
    if plain and not any(char in value for char in (quote, "\\", "\n")):
        return f"{quote}{value}{quote}"
    return repr(value)


def by_position(code: str, names: set[str]) -> OwnFix | None:
    """``code`` with each ``name[i]`` it reads (``i`` an integer, ``name`` one of ``names``: a
    Series whose index holds labels) written ``name.iloc[i]``; None when it has none."""
    tree = _tree(code) if names else None
    if tree is None:
        return None
    lines = code.splitlines(keepends=True)
    ends: set[tuple[int, int]] = set()
    made: dict[str, str] = {}
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Load)
            and isinstance(node.value, ast.Name)
            and node.value.id in names
            and node.value.end_col_offset is not None
            and (position := _integer(node.slice)) is not None
        ):
            continue
        name, line, end = node.value.id, node.value.lineno - 1, node.value.end_col_offset
        written = lines[line].encode()  # ast's columns count UTF-8 bytes
        if written[node.value.col_offset : end] != name.encode():
            continue  # a place Python before 3.12 gives inside an f-string, not the name's
        ends.add((line, end))
        made[f"{name}[{position}]"] = f"{name}.iloc[{position}]"
    if not ends:
        return None
    for line, end in sorted(ends, reverse=True):
        written = lines[line].encode()
        lines[line] = (written[:end] + b".iloc" + written[end:]).decode()
    said = ", ".join(f"{old} as {new}" for old, new in made.items())
    return OwnFix("".join(lines), f"wrote {said}, by position (the index holds labels)")


def numeric_only(code: str, names: set[str]) -> OwnFix | None:
    """``code`` with ``numeric_only=True`` passed to each call of a reduction of
    :data:`NUMERIC_REDUCTIONS` on one of ``names`` (frames with a column that holds no numbers)
    or on its ``groupby(...)`` that does not pass it: ``titanic.corr()`` raised on the
    passengers' names where pandas before 2 left them out. None when it has none."""
    tree = _tree(code) if names else None
    if tree is None:
        return None
    lines = code.splitlines(keepends=True)
    ends: dict[tuple[int, int], str] = {}
    made: list[str] = []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in NUMERIC_REDUCTIONS
            and all(k.arg not in ("numeric_only", None) for k in node.keywords)
            and node.end_lineno is not None
            and node.end_col_offset is not None
        ):
            continue
        frame, grouped = node.func.value, False
        if (
            isinstance(frame, ast.Call)
            and isinstance(frame.func, ast.Attribute)
            and frame.func.attr == "groupby"
        ):
            frame, grouped = frame.func.value, True
        if not (isinstance(frame, ast.Name) and frame.id in names):
            continue
        line, end = node.end_lineno - 1, node.end_col_offset - 1  # at the call's ")"
        written = lines[line].encode()  # ast's columns count UTF-8 bytes
        if written[end : end + 1] != b")":
            continue  # a place Python before 3.12 gives inside an f-string, not the call's
        before = b"".join(part.encode() for part in lines[:line]) + written[:end]
        bare = before.rstrip().endswith((b"(", b","))
        ends[(line, end)] = "numeric_only=True" if bare else ", numeric_only=True"
        made.append(f"{frame.id}{'.groupby(...)' if grouped else ''}.{node.func.attr}()")
    if not ends:
        return None
    for (line, end), text in sorted(ends.items(), reverse=True):
        written = lines[line].encode()
        lines[line] = (written[:end] + text.encode() + written[end:]).decode()
    fixed = "".join(lines)
    if _tree(fixed) is None:
        return None
    shown = ", ".join(dict.fromkeys(made))
    return OwnFix(
        fixed,
        f"passed numeric_only=True to {shown}: since pandas 2 the columns that hold no "
        "numbers make it raise, where pandas before left them out",
    )


def _integer(node: ast.expr) -> int | None:
    """The integer a subscript's index writes (``0``, ``-1``), else None."""
    sign = 1
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        sign, node = -1, node.operand
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return sign * node.value
    return None


#: How close a missing file's path must be to the one data file the request names, as
#: :class:`difflib.SequenceMatcher` measures (``'unemployment_industry.csv'`` for
#: ``'unemployement_industry.csv'`` is 0.98).
NAMED_FILE_CLOSE = 0.8


def named_file(code: str, evalue: str, named: list[str]) -> OwnFix | None:
    """``code`` with the path a ``FileNotFoundError`` (``evalue``) names written as the one data
    file the request names (``named``: existing, relative to the kernel's folder) whose path is
    close to it: the model's slip in a name the user gave. None when no one is, or two are."""
    match = re.search(r"No such file or directory: '(.+)'\s*$", evalue)
    if match is None:
        return None
    missing = match.group(1)
    close = [
        path
        for path in named
        if path != missing
        and difflib.SequenceMatcher(None, missing, path).ratio() >= NAMED_FILE_CLOSE
    ]
    if len(close) != 1:
        return None
    fixed = respelled(code, {missing: close[0]}, "as the request names it")
    return replace(fixed, respelled={}) if fixed is not None else None  # held to no spelling


def with_import(code: str, evalue: str) -> OwnFix | None:
    """``code`` with the import of the usual name a ``NameError`` (``evalue``) says is not
    defined put first; None when it is no such name."""
    match = re.fullmatch(r"name '(\w+)' is not defined", evalue.strip())
    line = USUAL_IMPORTS.get(match.group(1)) if match else None
    if line is None or line in (text.strip() for text in code.splitlines()):
        return None  # not one of them, or its import did not define it
    return OwnFix(f"{line}\n{code}", f"added {line}")


def answer_names(code: str, names: Sequence[str]) -> OwnFix | None:
    """``code`` with its answer line written another way than the request's format
    (``print(f"@{country}[{year}]")`` gave ``@Nigeria[2010]``; ``@answer[...]``; ``@mean {m}``)
    printed once per name of the format instead, each from the variable the cell gives that
    name (``@max_deaths_country[{max_deaths_country}]``, a field's format kept:
    ``{mean_fare:.2f}``); one name the cell gives no variable gets the one other field those
    lines print (``@{top_country}['Albania']``: ``@country[{top_country}]``). None unless the
    cell prints such a line at its top level, as a statement of its own lines, and each name
    has its value so (a variable set at the cell's top level, or that one field)."""
    if not names or any(not name.isidentifier() or keyword.iskeyword(name) for name in names):
        return None
    names = list(dict.fromkeys(names))
    tree = _tree(code)
    if tree is None:
        return None
    assigned = _assigned(tree)
    unset = [name for name in names if name not in assigned]
    lines = code.splitlines(keepends=True)
    prints = [stmt for stmt in tree.body if _written_wrong(stmt, lines, names)]
    if len(unset) > 1 or not prints:
        return None
    values = {name: ast.FormattedValue(ast.Name(name, ast.Load()), -1, None) for name in names}
    others: dict[str, ast.FormattedValue] = {}  # fields of no name's variable, by their code
    for stmt in prints:
        for node in ast.walk(stmt):
            if not isinstance(node, ast.FormattedValue):
                continue
            if isinstance(node.value, ast.Name) and node.value.id in names:
                if node.format_spec is not None or node.conversion != -1:
                    values[node.value.id] = node  # as the cell formats it
            else:
                others.setdefault(ast.unparse(node.value), node)
    if unset:
        if len(others) != 1:
            return None
        values[unset[0]] = next(iter(others.values()))
    written = "\n".join(ast.unparse(_print_answer(name, values[name])) for name in names)
    for stmt in reversed(prints):
        end = stmt.end_lineno or stmt.lineno
        ending = lines[end - 1][len(lines[end - 1].rstrip("\r\n")) :]  # the cell's last: none
        lines[stmt.lineno - 1 : end] = [written + ending] if stmt is prints[0] else []
    shown = " ".join(f"@{name}[...]" for name in names)
    return OwnFix("".join(lines), f"printed the answer with the request's names, {shown}")


#: Methods whose ``inplace=True`` on a column pandas 3 ignores, whose result assigned back to
#: the column is the change meant (not those that drop or reorder rows: assigned back, pandas
#: aligns the result by its index and the frame keeps its rows).
IN_PLACE_METHODS = frozenset(
    {"fillna", "replace", "ffill", "bfill", "interpolate", "clip", "where", "mask"}
)


def assigned_back(code: str) -> OwnFix | None:
    """``code`` with each statement ``frame[key].method(..., inplace=True)`` (a method of
    :data:`IN_PLACE_METHODS`; ``frame`` a name, or a name's attributes such as ``df.loc``) that
    stands alone on its lines written ``frame[key] = frame[key].method(...)``, its other
    arguments and its comment as written; None when it has none."""
    tree = _tree(code)
    if tree is None:
        return None
    lines = code.splitlines(keepends=True)
    found = sorted(
        (stmt.lineno, stmt.end_lineno or stmt.lineno, *meant)
        for stmt in ast.walk(tree)
        if isinstance(stmt, ast.Expr) and (meant := _assignment(stmt, code, lines)) is not None
    )
    if not found:
        return None
    for start, end, written, _ in reversed(found):
        ending = lines[end - 1][len(lines[end - 1].rstrip("\r\n")) :]
        lines[start - 1 : end] = [written + ending]
    shown = ", ".join(dict.fromkeys(short for *_, short in found))
    return OwnFix("".join(lines), f"assigned the change back, as pandas 3 needs: {shown}")


def _assignment(stmt: ast.Expr, code: str, lines: list[str]) -> tuple[str, str] | None:
    """``stmt`` written as the assignment it means (:func:`assigned_back`), with its
    indentation and comment, and in short (``df['a'] = df['a'].fillna(...)``); None when it is
    no such statement or shares its lines with another."""
    call = stmt.value
    if not (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr in IN_PLACE_METHODS
        and isinstance(target := call.func.value, ast.Subscript)
        and _names_only(target.value)
        and sum(_in_place(keyword) for keyword in call.keywords) == 1
        and all(keyword.arg is not None for keyword in call.keywords)
        and stmt.end_lineno is not None
        and stmt.end_col_offset is not None
    ):
        return None
    first, last = lines[stmt.lineno - 1], lines[stmt.end_lineno - 1]
    before = first.encode()[: stmt.col_offset].decode()
    after = last.encode()[stmt.end_col_offset :].decode().strip()
    if before.strip() or (after and not after.startswith("#")):
        return None  # another statement on its lines (after a ';')
    parts = [ast.get_source_segment(code, node) for node in call.args]
    parts += [
        f"{keyword.arg}={ast.get_source_segment(code, keyword.value)}"
        for keyword in call.keywords
        if not _in_place(keyword)
    ]
    column = ast.get_source_segment(code, target)
    whole = ast.get_source_segment(code, stmt) or ""
    if column is None or any(part is None for part in parts) or _commented(whole):
        return None  # a comment inside the statement would be lost
    method = f"{column}.{call.func.attr}"
    written = f"{before}{column} = {method}({', '.join(map(str, parts))})"
    return written + (f"  {after}" if after else ""), f"{column} = {method}(...)"


def _commented(code: str) -> bool:
    """Whether ``code`` holds a comment (not a ``#`` in a string)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError):
        return True
    return any(token.type == tokenize.COMMENT for token in tokens)


def _in_place(keyword: ast.keyword) -> bool:
    """Whether a call's keyword is ``inplace=True``."""
    return (
        keyword.arg == "inplace"
        and isinstance(keyword.value, ast.Constant)
        and keyword.value.value is True
    )


def _names_only(node: ast.expr) -> bool:
    """Whether ``node`` is a name or a name's attributes (``df``, ``df.loc``, ``self.df``): an
    assignment to its item changes the frame, where one to an item of an item would not."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def _assigned(tree: ast.Module) -> set[str]:
    """The names the top level of a cell assigns (``a = ...``, ``a, b = ...``, ``a += ...``)."""
    found: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):
            targets = stmt.targets
        elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) and stmt.value is not None:
            targets = [stmt.target]
        else:
            continue
        for target in targets:
            for node in ast.walk(target):
                if isinstance(node, ast.Name):
                    found.add(node.id)
    return found


def _written_wrong(stmt: ast.stmt, lines: list[str], names: Sequence[str]) -> bool:
    """Whether ``stmt`` is ``print(f"...")`` alone on its lines and writes an answer line not as
    the format's names are written: a value where the name goes (``@{country}[...]``), another
    name (``@answer[...]``), or one of them without its ``[value]`` (``@mean {m}``)."""
    if not (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and isinstance(stmt.value.func, ast.Name)
        and stmt.value.func.id == "print"
        and stmt.value.args
        and isinstance(text := stmt.value.args[0], ast.JoinedStr)
        and stmt.col_offset == 0
        and stmt.end_lineno is not None
        and stmt.end_col_offset is not None
    ):
        return False
    after = lines[stmt.end_lineno - 1].encode()[stmt.end_col_offset :].decode().strip()
    if after and not after.startswith("#"):
        return False  # another statement after a ';'
    for part, following in itertools.pairwise([*text.values, None]):
        if not (isinstance(part, ast.Constant) and isinstance(part.value, str)):
            continue
        if part.value.endswith("@") and isinstance(following, ast.FormattedValue):
            return True
        if any(name not in names or not bracket for name, bracket in answers_started(part.value)):
            return True
    return False


def _print_answer(name: str, value: ast.FormattedValue) -> ast.Expr:
    """``print(f"@name[{value}]")``, the value's field as ``value`` writes it (its format)."""
    text = ast.JoinedStr([ast.Constant(f"@{name}["), value, ast.Constant("]")])
    return ast.Expr(ast.Call(ast.Name("print", ast.Load()), [text], []))


#: Code that renames the columns of its frames, or reads them stripped: a spelling that held
#: before it runs may not hold after (``df.columns = df.columns.str.strip()``, ``.rename(...)``,
#: ``read_csv(..., skipinitialspace=True)``).
_RENAMES_COLUMNS = re.compile(
    r"\.columns\s*=(?!=)|\.(?:rename|set_axis)\s*\(|\.str\.[lr]?strip\b|\.str\.replace\b"
    r"|skipinitialspace"
)


def renames_columns(code: str) -> bool:
    """Whether ``code`` may rename its frames' columns (a spelling found before may not hold)."""
    return _RENAMES_COLUMNS.search(code) is not None


def own_fix(
    code: str,
    ename: str,
    evalue: str,
    pairs: dict[str, str],
    positional: set[str] | None = None,
    named: list[str] | None = None,
    numeric: set[str] | None = None,
) -> OwnFix | None:
    """jupyter-ci's fix of ``code`` that failed with ``ename: evalue`` (``pairs``: the
    respellings the kernel named; ``positional``: the Series it named whose index holds
    labels; ``named``: the data files the request names; ``numeric``: the frames it named that
    have a column of no numbers); None when it has none."""
    if ename == "KeyError" and pairs:
        return respelled(code, pairs)
    if ename == "KeyError" and positional:
        return by_position(code, positional)
    if ename == "FileNotFoundError" and named:
        return named_file(code, evalue, named)
    if ename == "NameError":
        return with_import(code, evalue)
    if ename in ("TypeError", "ValueError") and numeric:
        return numeric_only(code, numeric)
    return None


def fixes_itself(ename: object) -> bool:
    """Whether :func:`own_fix` may have a fix for an error of this name."""
    return ename in ("KeyError", "NameError", "FileNotFoundError", "TypeError", "ValueError")
