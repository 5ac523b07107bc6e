"""Kernel variable inspection, shared by every workspace.

The loop tells the model which variables exist (name, type, shape, data frame columns) without
changing anything in the user's kernel. Every workspace does it the same way: it evaluates
:func:`inspection_expression` as a ``user_expressions`` entry of a silent execute request with
empty code, and hands the expression's ``text/plain`` value to :func:`parse_variables`.

Why an expression of a silent, empty request: such a request does not count (no execution
number), is not stored in ``In``/``Out`` or the history, and sets neither ``_`` nor ``Out``. The
expression runs :data:`INSPECT_SOURCE` in a fresh globals dict, so it adds nothing to the user's
namespace either.

What is listed, most recently defined first (namespace insertion order, reversed), at most
``MAX_VARIABLES`` entries and about 20 KB of JSON:

- every public name (no leading ``_``), except imports (modules, and functions and classes not
  defined in the user's namespace, i.e. whose ``__module__`` is not ``__main__``) and IPython's
  own names (``In``, ``Out``, ``exit``, ``quit``, ``get_ipython`` and the shell's other hidden
  names);
- plain values (``int``, ``float``, ``bool``, ``None``, ``complex``, short ``str``) with their
  value; exact ``list``/``tuple``/``dict``/``set``/``frozenset``/``bytes`` with their length
  (and a dict's first keys when they are strings or ints);
- the user's functions with their parameter names (read from the code object, never from
  ``repr`` of defaults), the user's classes as ``class`` and their name;
- arrays and frames of known libraries (numpy, pandas, polars, torch, jax, xarray, cupy, pyarrow,
  scipy) with their ``shape``, ``dtype``, and for data frames the first columns and dtypes;
- anything else by its type name only: ``len()``, ``repr()``, ``str()`` and ``bool()`` are never
  called on objects of unknown type (they may be lazy, remote or expensive), and neither is
  ``isinstance`` (which may consult a proxy's ``__class__``).
"""

from __future__ import annotations

import json
from typing import Any

from .workspace import Variable

#: Python source run inside the user's kernel. Standard library only, and written for old Pythons
#: too (no walrus, no ``match``): the kernel's environment may lack jupyter-ci and may be older.
#: It reads ``ns`` (the user's namespace) from its globals and leaves ``result``, an object whose
#: ``repr()`` is the JSON text. It never raises.
INSPECT_SOURCE = r'''
import json
import sys
import types

MAX_VARIABLES = 100
MAX_SUMMARY = 200
MAX_COLUMNS = 20
MAX_JSON = 20000
MAX_STR = 80
ARRAY_PACKAGES = (
    "numpy", "pandas", "polars", "torch", "jax", "jaxlib", "xarray", "cupy", "pyarrow", "scipy",
)
FRAME_PACKAGES = ("pandas", "polars")
DTYPE_MODULES = (
    "numpy", "torch", "pandas.core.dtypes", "pandas.core.arrays", "polars.datatypes",
)
ALWAYS_HIDDEN = ("In", "Out", "exit", "quit", "get_ipython")
SCALARS = (bool, int, float, complex, type(None))
SIZED = (list, tuple, dict, set, frozenset, bytes, bytearray)
LABELS = (str, int, float, bool)


class Report(object):
    """The result: its repr is the JSON text, so the kernel's text/plain is exactly that."""

    __slots__ = ("text",)

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text


def is_module(t):
    return t is types.ModuleType or issubclass(t, types.ModuleType)


def is_imported(t, value):
    """Modules, and functions or classes defined elsewhere than the user's namespace."""
    if is_module(t) or t is types.BuiltinFunctionType:
        return True
    if t is types.FunctionType or t is type or issubclass(t, type):
        return getattr(value, "__module__", None) != "__main__"
    return False


def hidden_names(ns):
    names = set(ALWAYS_HIDDEN)
    getter = ns.get("get_ipython")
    if type(getter) is types.MethodType or type(getter) is types.FunctionType:
        try:
            shell = getter()
            hidden = getattr(shell, "user_ns_hidden", None)
            if type(hidden) is dict:
                names.update(k for k in hidden if type(k) is str)
        except Exception:
            pass
    return names


def type_name(t):
    module = getattr(t, "__module__", None)
    name = getattr(t, "__qualname__", None)
    if type(name) is not str:
        name = getattr(t, "__name__", None)
    if type(name) is not str:
        return "?"
    if type(module) is not str or module in ("builtins", "__main__"):
        return name
    top = module.split(".")[0]
    package = sys.modules.get(top)
    if "." not in name and package is not None and is_module(type(package)):
        if package.__dict__.get(name) is t:
            return top + "." + name
    return module + "." + name


def package_of(t):
    module = getattr(t, "__module__", None)
    return module.split(".")[0] if type(module) is str else ""


def cap(text, limit):
    return text if len(text) <= limit else text[: limit - 3] + "..."


def label(value):
    if type(value) in LABELS:
        return cap(str(value), MAX_STR)
    if type(value) is tuple and all(type(v) in LABELS for v in value):
        return cap(" / ".join(str(v) for v in value), MAX_STR)
    return "<" + type_name(type(value)) + ">"


def describe_scalar(value):
    if type(value) is int and value.bit_length() > 128:
        return "an int of %d bits" % value.bit_length()
    return repr(value)


def describe_str(value):
    if len(value) <= MAX_STR:
        return repr(value)
    return repr(value[:MAX_STR]) + "... (%d chars)" % len(value)


def describe_sized(value):
    text = "len %d" % len(value)
    if type(value) is dict and value:
        keys = []
        for key in value:
            if len(keys) == 10:
                break
            if type(key) is not str and type(key) is not int:
                return text
            keys.append(repr(key) if type(key) is str else str(key))
        text += ", keys " + ", ".join(keys) + (", ..." if len(value) > 10 else "")
    return text


def describe_function(value):
    code = value.__code__
    count = code.co_argcount + code.co_kwonlyargcount
    params = list(code.co_varnames[:count])
    if code.co_flags & 0x04:
        params.insert(code.co_argcount, "*" + code.co_varnames[count])
        count += 1
    if code.co_flags & 0x08:
        params.append("**" + code.co_varnames[count])
    return "def %s(%s)" % (value.__name__, ", ".join(params))


def describe_array(value, entry):
    package, kind = package_of(type(value)), type(value).__name__
    is_frame = package in FRAME_PACKAGES and kind == "DataFrame"
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple) and all(type(d) is int for d in shape):
        entry["shape"] = [int(d) for d in shape]
    parts = []
    if is_frame:
        entry["columns"] = [label(c) for c in list(value.columns[:MAX_COLUMNS])]
        entry["dtypes"] = [cap(str(d), MAX_STR) for d in list(value.dtypes)[:MAX_COLUMNS]]
    else:
        # Not on frames: a pandas column named "dtype" would answer instead of an attribute.
        dtype = getattr(value, "dtype", None)
        module = getattr(type(dtype), "__module__", None)
        if type(module) is str and module.startswith(DTYPE_MODULES):
            parts.append("dtype " + cap(str(dtype), MAX_STR))
    if package == "pandas" and kind == "Series" and type(value.name) in LABELS:
        parts.append("name " + label(value.name))
    if package == "numpy" and type(shape) is tuple and not shape:
        parts.append("value " + cap(str(value), MAX_STR))
    return ", ".join(parts)


def describe(name, value):
    t = type(value)
    entry = {"name": name, "type": type_name(t)}
    try:
        if t in SCALARS:
            summary = describe_scalar(value)
        elif t is str:
            summary = describe_str(value)
        elif t in SIZED:
            summary = describe_sized(value)
        elif t is range:
            summary = repr(value)
        elif t is types.FunctionType:
            summary = describe_function(value)
        elif t is type or issubclass(t, type):
            summary = "class " + type_name(value)
        elif package_of(t) in ARRAY_PACKAGES:
            summary = describe_array(value, entry)
        else:
            summary = ""
    except Exception as error:
        summary = "error while summarising: " + type_name(type(error))
    if summary:
        entry["summary"] = cap(summary, MAX_SUMMARY)
    return entry


def public_names(ns, hidden):
    for name in reversed(list(ns)):
        if type(name) is not str or name.startswith("_") or name in hidden:
            continue
        try:
            value = ns[name]
        except Exception:
            continue
        if is_imported(type(value), value):
            continue
        yield name, value


def inspect(ns):
    variables = []
    omitted = 0
    size = 0
    for name, value in public_names(ns, hidden_names(ns)):
        if len(variables) >= MAX_VARIABLES or size >= MAX_JSON:
            omitted += 1
            continue
        try:
            entry = describe(name, value)
        except Exception as error:
            entry = {"name": name, "type": "?", "summary": "error: " + type(error).__name__}
        text = json.dumps(entry)
        if size + len(text) > MAX_JSON:
            omitted += 1
            size = MAX_JSON
            continue
        size += len(text) + 2
        variables.append(entry)
    return {"version": 1, "variables": variables, "omitted": omitted}


try:
    result = Report(json.dumps(inspect(ns)))
except Exception as error:
    result = Report(json.dumps({"version": 1, "variables": [], "error": type(error).__name__}))
'''


def inspection_expression() -> str:
    """One Python expression that evaluates to the kernel's variables as JSON text.

    Evaluate it as a ``user_expressions`` entry of a silent execute request with empty code: its
    ``text/plain`` value is the JSON that :func:`parse_variables` reads. It runs
    :data:`INSPECT_SOURCE` in a fresh globals dict given the user's namespace (the evaluation's
    ``locals()``, which is the shell's ``user_ns``), so it adds, changes and deletes nothing there;
    the lambda and its argument are not stored anywhere.
    """
    return (
        "(lambda g: (__import__('builtins').exec(" + repr(INSPECT_SOURCE) + ", g), g['result'])[1])"
        "({'ns': __import__('builtins').locals()})"
    )


def parse_variables(text: str) -> list[Variable]:
    """Read the JSON text the inspection expression produced into :class:`Variable` objects.

    Raises :class:`ValueError` with a message saying what was wrong when the text is not that
    JSON (for instance the kernel's traceback text, or output of a non-Python kernel).
    """
    try:
        data = json.loads(text)
    except (TypeError, ValueError) as error:
        raise ValueError(f"variable inspection did not return JSON: {_excerpt(text)}") from error
    if not isinstance(data, dict) or not isinstance(data.get("variables"), list):
        raise ValueError(
            f"variable inspection returned JSON without a 'variables' list: {_excerpt(text)}"
        )
    return [_variable(item, index) for index, item in enumerate(data["variables"])]


def _variable(item: Any, index: int) -> Variable:
    if not isinstance(item, dict):
        raise ValueError(f"variable #{index} is not an object")
    name, type_ = item.get("name"), item.get("type")
    if not isinstance(name, str) or not isinstance(type_, str):
        raise ValueError(f"variable #{index} lacks a string 'name' and 'type'")
    summary = item.get("summary", "")
    if not isinstance(summary, str):
        raise ValueError(f"variable {name!r}: 'summary' is not a string")
    shape = _list_of(item.get("shape"), int, name, "shape")
    return Variable(
        name=name,
        type=type_,
        summary=summary,
        shape=tuple(shape) if shape is not None else None,
        columns=_list_of(item.get("columns"), str, name, "columns"),
        dtypes=_list_of(item.get("dtypes"), str, name, "dtypes"),
    )


def _list_of(value: Any, kind: type, name: str, key: str) -> list[Any] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(
        isinstance(v, kind) and not isinstance(v, bool) for v in value
    ):
        raise ValueError(f"variable {name!r}: {key!r} is not a list of {kind.__name__}")
    return value


def _excerpt(text: object) -> str:
    shown = repr(text)
    return shown if len(shown) <= 120 else shown[:117] + "..."
