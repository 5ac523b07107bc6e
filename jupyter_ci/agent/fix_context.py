"""What is there, told with a failure: the context a fix needs that the traceback lacks.

A traceback says what failed, not what exists: a ``KeyError`` names the column the code guessed,
not the frame's real columns. Before asking for a fix, the loop reads from the kernel, silently,
what fits the error (:data:`FIX_CONTEXT_SOURCE`):

- ``KeyError``, ``AttributeError``: the columns of the data frames (and the keys of the dicts)
  the cell's code names, and those closest to the missing one; for a ``KeyError`` on a name
  written without the spaces a column has (or, for the missing name, its case, underscores or
  punctuation), the cell's names to respell (``spelled:`` lines, for
  jupyter-ci's own fix, :mod:`jupyter_ci.agent.own_fix`; never sent to the model); for a
  ``KeyError`` on an integer, the Series the code names whose index holds labels (an integer
  is a label there in pandas 3, not a position: ``positional:`` lines for the own fix, and the
  fact for the model);
- ``NameError``: the names defined, and those closest to the missing one;
- ``FileNotFoundError``: the files in the folder the path names (else the working folder), and
  those closest to the missing one;
- a dtype error (``TypeError``/``ValueError`` about types or conversions): the dtypes of the
  frames the code names, and which of them have a column that holds no numbers
  (``numeric_only:`` lines, for the own fix of a reduction such as ``df.corr()``; never sent
  to the model);
- a ``TypeError`` about a keyword argument a callable does not take (a newer library's
  ``mean_squared_error`` has no ``squared``): the parameters' names of each callable the cell
  calls with it by a dotted name, and those closest to it;
- a ``ValueError`` about missing values (scikit-learn's "Input X contains NaN"): the columns of
  those frames that have any.

What to do about a fact (write a spaced column's name as it is, a file's name as it is
spelled, drop or fill missing values) is jupyter-ci's own advice, :data:`ADVICE`: the kernel only
names its kind, and the loop says it outside the kernel output's envelope.

Names only, never values: it is sent with ``share_outputs`` off too (names, types and columns are
what that setting keeps). Every list is bounded; it never raises, and says nothing when nothing
fits. The same source runs in every workspace: through a silent user expression in a separate
kernel, directly in the in-kernel loop's own process.
"""

from __future__ import annotations

import ast
import io
import json
import tokenize
from typing import Any

from .own_fix import LITERALS_SOURCE, SET_APART

#: Python source run in the user's kernel (standard library only), after the reading of a cell's
#: string literals that :mod:`~jupyter_ci.agent.own_fix` runs too
#: (:data:`~jupyter_ci.agent.own_fix.LITERALS_SOURCE`). Its globals are ``ns`` (the
#: user's namespace), ``ename``, ``evalue``, ``code`` and ``set_apart``
#: (:data:`~jupyter_ci.agent.own_fix.SET_APART`); it leaves ``result``, whose ``repr()``
#: is the JSON list of lines to tell the model. It never raises (:data:`FIX_CONTEXT_SOURCE`).
_CONTEXT_SOURCE = r"""
import difflib
import json
import os
import re

MAX_NAMES = 40
MAX_LINE = 600


class Report(str):
    def __repr__(self):
        return str(self)


def quoted(names):
    text = ", ".join(repr(str(name)) for name in list(names)[:MAX_NAMES])
    more = len(names) - MAX_NAMES
    if more > 0:
        text += f", ... ({more} more)"
    return text[:MAX_LINE]


def closest(word, names):
    strings = [str(name) for name in names]
    found = difflib.get_close_matches(str(word), strings, n=3, cutoff=0.5)
    same = str(word).strip().lower()
    lowered = [name for name in strings if name.strip().lower() == same]
    return list(dict.fromkeys(lowered + found))


def name_key(name):
    return re.sub(set_apart, "", str(name).casefold())


def spelled(missing, code, frames):
    # The code's literals that are no column but one once spaces are set aside, as pairs for
    # jupyter-ci's own fix: only when the missing one is among them. The missing one may be
    # one column's once case and punctuation are set aside too (set_apart: jupyter-ci's).
    columns = {str(c) for _, frame in frames for c in frame.columns}
    bare, keyed = {}, {}
    for column in columns:
        bare.setdefault(column.strip(), set()).add(column)
        keyed.setdefault(name_key(column), set()).add(column)
    pairs = {}
    for *_, value in literal_spans(code):
        if value in columns:
            continue
        found = bare.get(value.strip(), set())
        if not found and value == str(missing) and name_key(value):
            found = keyed.get(name_key(value), set())
        if len(found) == 1:
            pairs[value] = next(iter(found))
    if str(missing) not in pairs:
        return []
    return [f"spelled: {json.dumps([w, s])}" for w, s in pairs.items()]


def named_in(code):
    return sorted(set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", code or "")))


def frames(ns, code):
    found = []
    for name in named_in(code):
        value = ns.get(name)
        if hasattr(value, "columns") and hasattr(value, "dtypes"):
            found.append((name, value))
    return found[:5]


def labelled(ns, code):
    # The Series the code names whose index holds labels, not integers, with the kind of
    # labels: an integer looks a label up there (pandas 3), not a position.
    found = []
    for name in named_in(code):
        value = ns.get(name)
        if hasattr(value, "iloc") and hasattr(value, "index") and not hasattr(value, "columns"):
            kind = getattr(getattr(value, "index", None), "inferred_type", None)
            if isinstance(kind, str) and kind not in ("integer", "mixed-integer", "empty"):
                found.append((name, kind))
    return found[:5]


def mappings(ns, code):
    found = []
    for name in named_in(code):
        value = ns.get(name)
        if isinstance(value, dict) and value:
            found.append((name, value))
    return found[:5]


def no_numbers(frame):
    # Whether a data frame has a column of text, dates or objects (pandas' numeric_only
    # leaves it out): for jupyter-ci's own fix of a reduction that raised on it.
    try:
        return len(frame.select_dtypes(exclude=["number", "bool"]).columns) > 0
    except Exception:
        return False


def missing_key(evalue):
    # KeyError's text: the key's repr ('x'), or pandas' list of labels it did not find
    # (['x'], "['x', 'y'] not in index", "None of [Index(['x'], dtype='object')] are in the
    # [columns]"): the first label then.
    text = (evalue or "").strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1]
    labels = re.findall(r"(?<!dtype=)'([^']+)'", text)
    if labels and text.startswith(("[", "None of [")):
        return labels[0]
    return text or None


def missing_name(ename, evalue):
    if ename == "KeyError":
        return missing_key(evalue)
    patterns = {
        "AttributeError": r"has no attribute '([^']+)'",
        "NameError": r"name '([^']+)' is not defined",
        "FileNotFoundError": r"No such file or directory: '([^']+)'",
    }
    pattern = patterns.get(ename)
    if pattern is None:
        return None
    match = re.search(pattern, evalue or "")
    return match.group(1) if match and match.group(1) else None


def unknown_keyword(evalue):
    # TypeError's text for a keyword a callable does not take (a library's newer version may
    # have removed it: scikit-learn's mean_squared_error(..., squared=False)).
    match = re.search(r"unexpected keyword argument '([^']+)'", evalue or "")
    return match.group(1) if match else None


def parameters(ns, code, keyword):
    # The callables the cell calls with the keyword, by their dotted names, and their
    # parameters' names (never defaults: names only). A name is read with getattr_static, so
    # no property or __getattr__ of the user's runs; a method read off an instance loses self.
    import ast
    import inspect
    import types

    try:
        tree = ast.parse(code or "")
    except (SyntaxError, ValueError):
        return []
    found = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or all(k.arg != keyword for k in node.keywords):
            continue
        parts, target = [], node.func
        while isinstance(target, ast.Attribute):
            parts.insert(0, target.attr)
            target = target.value
        if not isinstance(target, ast.Name) or target.id not in ns:
            continue
        name = ".".join([target.id, *parts])
        try:
            holder, value = None, ns[target.id]
            for part in parts:
                holder, value = value, inspect.getattr_static(value, part)
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            bound = holder is not None and not isinstance(holder, (type, types.ModuleType))
            listed = list(inspect.signature(value).parameters.values())
        except Exception:
            continue
        if bound and inspect.isfunction(value) and listed:
            listed = listed[1:]
        # Signature's own writing of the list (``*``, ``/``, ``*args``), without defaults.
        bare = [p.replace(default=p.empty, annotation=p.empty) for p in listed]
        shown = str(inspect.Signature(bare))[1:-1]
        found[name] = (shown, [p.name for p in listed])
    return list(found.items())[:5]


def context(ns, ename, evalue, code):
    lines = []
    missing = missing_name(ename, evalue)
    if ename in ("KeyError", "AttributeError"):
        for name, frame in frames(ns, code):
            columns = list(frame.columns)
            lines.append(f"{name} is a {type(frame).__name__} with columns: {quoted(columns)}")
            near = closest(missing, columns) if missing else []
            if near:
                lines.append(f"closest to {missing!r} among {name}'s columns: {quoted(near)}")
            # The missing one with spaces around it (a CSV header's ' WINDSPEED').
            odd = [c for c in near if c != c.strip() and c.strip() == str(missing).strip()]
            if odd:
                lines.append(
                    f"{name}'s column is {odd[0]!r}, with spaces in its name: {name}[{odd[0]!r}]"
                )
                lines.append("advice: spaced_column")
        if ename == "KeyError" and missing:
            lines[:0] = spelled(missing, code, frames(ns, code))  # first: never cut off
        if ename == "KeyError" and re.fullmatch(r"-?[0-9]+", (evalue or "").strip()):
            for name, kind in labelled(ns, code):
                lines.insert(0, f"positional: {json.dumps(name)}")
                lines.append(
                    f"{name} is a Series whose index holds labels ({kind}), not positions: "
                    f"{name}[{missing}] looks up the label {missing}; the item at position "
                    f"{missing} is {name}.iloc[{missing}]"
                )
        if ename == "KeyError":
            for name, mapping in mappings(ns, code):
                keys = list(mapping)
                lines.append(f"{name} is a dict with keys: {quoted(keys)}")
                near = closest(missing, keys) if missing else []
                if near:
                    lines.append(f"closest to {missing!r} among {name}'s keys: {quoted(near)}")
    elif ename == "NameError":
        skip = {"In", "Out", "exit", "quit", "get_ipython"}
        names = sorted(n for n in ns if not n.startswith("_") and n not in skip)
        lines.append(f"names defined in the kernel: {quoted(names) or '(none)'}")
        near = closest(missing, names) if missing else []
        if near:
            lines.append(f"closest to {missing!r}: {quoted(near)}")
    elif ename == "FileNotFoundError" and missing:
        folder = os.path.dirname(missing)
        if not folder or not os.path.isdir(folder):
            folder = "."
        try:
            entries = sorted(e for e in os.listdir(folder) if not e.startswith("."))
        except OSError:
            entries = []
        where = "the working folder" if folder == "." else repr(folder)
        lines.append(f"files in {where} ({os.path.abspath(folder)}): {quoted(entries) or '(none)'}")
        near = closest(os.path.basename(missing), entries)
        if near:
            lines.append(f"closest to {os.path.basename(missing)!r}: {quoted(near)}")
            lines.append("advice: file_spelling")
    elif ename == "ValueError" and re.search(
        r"contains? NaN|infs or NaNs|NaN values|missing values", evalue or ""
    ):
        for name, frame in frames(ns, code):
            try:
                gaps = [str(c) for c, n in frame.isna().sum().items() if n]
            except Exception:
                continue
            if gaps:
                lines.append(f"{name}'s columns with missing values: {quoted(gaps)}")
                lines.append("advice: missing_values")
    elif ename == "TypeError" and (keyword := unknown_keyword(evalue)):
        for name, (shown, names) in parameters(ns, code, keyword):
            lines.append(f"{name} takes the parameters ({shown}): none is named {keyword!r}")
            near = closest(keyword, names)
            if near:
                lines.append(f"closest to {keyword!r} among {name}'s parameters: {quoted(near)}")
            lines.append("advice: unknown_keyword")
    elif ename in ("TypeError", "ValueError") and re.search(
        r"dtype|convert|unsupported operand|not supported between|must be real number|"
        r"could not|invalid literal|Can only use .str",
        evalue or "",
    ):
        for name, frame in frames(ns, code):
            types = [f"{column}: {dtype}" for column, dtype in frame.dtypes.items()]
            lines.append(f"{name}'s dtypes: " + ", ".join(types[:MAX_NAMES])[:MAX_LINE])
            if no_numbers(frame):
                lines.insert(0, f"numeric_only: {json.dumps(name)}")
    return [line[:MAX_LINE] for line in list(dict.fromkeys(lines))[:14]]


try:
    result = Report(json.dumps(context(ns, ename, evalue, code)))
except Exception as error:
    result = Report(json.dumps([]))
"""
FIX_CONTEXT_SOURCE = LITERALS_SOURCE + _CONTEXT_SOURCE


#: How the context names a piece of advice (``advice: KIND``): the kernel only names its kind.
ADVICE_LINE = "advice: "
#: jupyter-ci's own advice that goes with a kind of fact. It is said outside the envelope of the
#: kernel's output, since the system prompt tells the model never to follow instructions inside
#: it; so it holds no text of the kernel's (a column's name, a file's), which stays in the facts,
#: and a line the kernel forges can only bring one of these texts.
ADVICE = {
    "spaced_column": (
        "A column named above has spaces around its name: write it exactly as it is listed, "
        "spaces included, or strip the names once after reading the file "
        "(df.columns = df.columns.str.strip(), with the frame's own name)."
    ),
    "file_spelling": (
        "If the file meant is the closest one listed above, write its name exactly as it is "
        "spelled there, even if it looks misspelt."
    ),
    "missing_values": (
        "Drop or fill the rows with missing values in the columns the cell uses before computing."
    ),
    "unknown_keyword": (
        "The function named above takes no parameter of the name the cell passed (a newer "
        "version of its library may have removed or renamed it): call it with the parameters "
        "it lists, and compute what the removed one did in the cell if the request needs it."
    ),
    "answer_as_code": (
        "An answer line such as @name[value] is text the cell prints, not Python code: build "
        'it in a string, e.g. print(f"@name[{value}]").'
    ),
}


def answer_as_code(code: str) -> bool:
    """Whether ``code`` writes an answer line (``@name[value]``) as Python, outside any string:
    ``@`` where no operand comes before it (a line's start, ``(``, ``,``, ``=``), then a name and
    ``[`` (a small model's SyntaxError; ``a @ b[1]``, a matrix product, is not one)."""
    starts = {"(", ",", "=", "[", ":", ";"}
    try:
        tokens = [
            token
            for token in tokenize.generate_tokens(io.StringIO(code).readline)
            if token.type not in (tokenize.NL, tokenize.COMMENT)
        ]
    except (tokenize.TokenError, SyntaxError):
        return False
    for index, token in enumerate(tokens[:-2]):
        if token.string != "@" or token.type != tokenize.OP:
            continue
        before = tokens[index - 1] if index else None
        opens = (
            before is None
            or before.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
            or before.string in starts
        )
        name, bracket = tokens[index + 1], tokens[index + 2]
        if opens and name.type == tokenize.NAME and bracket.string == "[":
            return True
    return False


def split_advice(lines: list[str]) -> tuple[list[str], list[str]]:
    """The context's facts (the kernel's, to wrap as its output) and the texts of the advice it
    names (jupyter-ci's own, each once; a kind not in :data:`ADVICE` is dropped)."""
    facts = [line for line in lines if not line.startswith(ADVICE_LINE)]
    kinds = dict.fromkeys(
        line[len(ADVICE_LINE) :] for line in lines if line.startswith(ADVICE_LINE)
    )
    return facts, [ADVICE[kind] for kind in kinds if kind in ADVICE]


def fix_context_scope(ename: str, evalue: str, code: str) -> dict[str, Any]:
    """The globals :data:`FIX_CONTEXT_SOURCE` runs with, but ``ns`` (the user's namespace)."""
    return {"ename": ename, "evalue": evalue, "code": code, "set_apart": SET_APART}


def fix_context_expression(ename: str, evalue: str, code: str) -> str:
    """One Python expression, evaluated in the user's namespace, whose value is the context's
    JSON text; it adds nothing to that namespace (:data:`FIX_CONTEXT_SOURCE` runs in a fresh
    globals dict that holds the namespace as ``ns``)."""
    scope = repr(fix_context_scope(ename, evalue, code))
    return (
        "(lambda g: (__import__('builtins').exec("
        + repr(FIX_CONTEXT_SOURCE)
        + ", g), g['result'])[1])(dict("
        + scope
        + ", ns=globals()))"
    )


def fix_context_here(namespace: dict[str, Any], ename: str, evalue: str, code: str) -> list[str]:
    """The context, computed in this process over ``namespace`` (the in-kernel loop)."""
    scope: dict[str, Any] = {**fix_context_scope(ename, evalue, code), "ns": namespace}
    try:
        exec(FIX_CONTEXT_SOURCE, scope)  # noqa: S102 - our own source, in a fresh globals dict
    except Exception:
        return []
    return parse_fix_context(repr(scope.get("result", "[]")))


def parse_fix_context(text: str) -> list[str]:
    """The context's lines from its JSON text ([] when it is not a list of strings)."""
    try:
        data = json.loads(text)
    except (TypeError, ValueError):
        return []
    if not isinstance(data, list):
        return []
    return [line for line in data if isinstance(line, str) and line]


def same_code(one: str, other: str) -> bool:
    """Whether two versions of a cell are the same code (a fix that is the failed code again
    would fail the same way): equal once trailing spaces and blank lines are set aside, or, for
    Python without magics, the same syntax tree (only comments, parentheses or layout differ:
    a small model's "fix" that rewrote a comment, or put a condition in parentheses)."""

    def lines(code: str) -> list[str]:
        return [line.rstrip() for line in code.strip().splitlines() if line.strip()]

    if lines(one) == lines(other):
        return True
    tree = _syntax_tree(one)
    return tree is not None and tree == _syntax_tree(other)


def keeps_failed_line(fixed: str, source: str, line: int | None) -> bool:
    """Whether a fix ``fixed`` keeps ``source``, the code that failed at its ``line``, unchanged
    up to the end of the statement that raised (the top-level statement holding that line):
    run, it would fail there the same way (a small model's fix that added the right code
    after the line that failed, and kept that line). False when the line is unknown or either
    is not Python."""
    if line is None:
        return False
    try:
        body = ast.parse(source).body
        ast.parse(fixed)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    end = next(
        (node.end_lineno for node in body if node.lineno <= line <= (node.end_lineno or 0)),
        None,
    )
    if end is None:
        return False
    kept, failed = fixed.splitlines()[:end], source.splitlines()[:end]
    return [x.rstrip() for x in kept] == [x.rstrip() for x in failed]


def _syntax_tree(code: str) -> str | None:
    """``code``'s syntax tree, as text without positions; None when it is not Python (a cell
    with magics or shell lines is compared line by line only)."""
    try:
        return ast.dump(ast.parse(code))
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
