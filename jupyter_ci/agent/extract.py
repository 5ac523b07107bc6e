"""Code out of a model's reply: fenced blocks, JSON, textual tool calls, or bare code.

Models wrap code in many ways, and some get it wrong: no language tag, several blocks, an
invented "Output:" block after the code, a fence the stream cut before it closed, a JSON object
instead of a fence, a tool call written as text. :func:`extract_code` takes the code from all of
these and names each repair it made, so the loop can record them. It never validates the code
strictly: IPython magics (``%pip install x``, ``!ls``) are valid in a cell, and a syntax error is
for the kernel to report (:func:`check_syntax` is advisory).
"""

from __future__ import annotations

import ast
import json
import re
import textwrap
import warnings
from dataclasses import dataclass
from typing import Any

from ..errors import BadCodeBlock

#: Fence tags taken as Python ("" is a fence with no tag).
PYTHON_TAGS = frozenset({"", "python", "python3", "py", "py3", "ipython", "ipython3", "jupyter"})
#: Fence tags of program output, which a model should not write and which is never run.
OUTPUT_TAGS = frozenset(
    {"output", "out", "text", "txt", "plaintext", "plain", "console", "bash-output", "stdout"}
)
JSON_TAGS = frozenset({"json", "jsonc", "json5"})
#: Cell magics whose body is Python, so :func:`check_syntax` can check it.
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun"})

_OPEN = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_THINKING = re.compile(r"<think>.*?</think>", re.DOTALL)
_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.DOTALL)
_MAGIC_LINE = re.compile(r"^([ \t]*)(?:%{1,2}[A-Za-z_]|!(?!=)\S)")
_MAGIC_ASSIGN = re.compile(
    r"^([ \t]*[A-Za-z_][\w.]*(?:[ \t]*,[ \t]*[A-Za-z_][\w.]*)*[ \t]*=[ \t]*)(?:%[A-Za-z_]|!\S).*$"
)
_CELL_MAGIC = re.compile(r"^%%([A-Za-z_]\w*)")


def fenced(code: str) -> str:
    """``code`` as a fenced Python block, as the model is asked to write it."""
    return f"```python\n{code}\n```"


#: Words of a line like "Output:" or "This will print:" that introduces printed output.
_OUTPUT_WORDS = frozenset({"output", "outputs", "result", "results", "print", "prints", "printed"})
_OUTPUT_WORDS |= frozenset({"return", "returns", "display", "displays", "show", "shows", "see"})
_OUTPUT_WORDS |= frozenset({"give", "gives", "produce", "produces", "yield", "yields"})
#: Words that make such a line introduce code instead ("Here is the code to print it:").
_CODE_WORDS = frozenset({"code", "cell", "snippet", "script", "function", "command", "program"})
_PROSE_KEYS = ("explanation", "thought", "reasoning")


@dataclass(frozen=True)
class Extraction:
    """What a reply held: the code to run (None if none), the prose, and the repairs made.

    Repairs, in the order found: ``thinking_removed``, ``tool_call``, ``json_wrapped``,
    ``output_block_dropped``, ``no_language_tag``, ``unclosed_fence``, ``duplicate_block_dropped``,
    ``several_blocks``, ``bare_code``.
    """

    code: str | None
    prose: str
    repairs: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Fence:
    start: int  # index of the opening fence line
    end: int  # index of the closing fence line (the line count when unclosed)
    tag: str
    body: str
    closed: bool


class _Repairs(list[str]):
    def add(self, name: str) -> None:
        if name not in self:
            self.append(name)


def extract_code(reply: str) -> Extraction:
    """Take the code out of a model's reply, repairing the common malformations.

    In order: ``<think>`` sections are set aside; a tool call written as text
    (``<tool_call>{"name": ..., "arguments": {"code": ...}}</tool_call>``) or a reply that is one
    JSON object with a ``code`` field gives its code; otherwise fenced blocks (backticks or
    tildes) tagged Python or untagged are taken and joined in order with a blank line, leaving
    out invented output (a block tagged ``output``/``text``/``console``/..., or one after a line
    like ``Output:`` that does not look like code) and exact repeats; a last fence left open
    runs to the end. A reply with no fence at all is taken as code only when all of it parses
    and it has a statement that is more than a few bare words. The prose is the rest.
    """
    repairs = _Repairs()
    reply = reply.replace("\r\n", "\n")
    text = _THINKING.sub("", reply)
    if text != reply:
        repairs.add("thinking_removed")
    for attempt in (_from_tool_calls, _from_json_reply, _from_fences, _from_bare_code):
        found = attempt(text, repairs)
        if found is not None:
            code, prose = found
            return Extraction(code, _tidy(prose), tuple(repairs))
    return Extraction(None, _tidy(text), tuple(repairs))


def code_from_tool_arguments(arguments: str) -> str:
    """The code of a tool call's JSON arguments (``{"code": "..."}``).

    Raises :class:`~jupyter_ci.errors.BadCodeBlock` when the arguments are not a JSON object
    with a non-empty string ``code``. Code that is itself a fenced block is unwrapped.
    """
    if not arguments.strip():
        raise BadCodeBlock('The tool call had no arguments; expected {"code": "..."}.')
    try:
        value: Any = json.loads(arguments, strict=False)
        if isinstance(value, str):  # arguments encoded twice
            value = json.loads(value, strict=False)
    except json.JSONDecodeError as error:
        raise BadCodeBlock(
            f"The tool call's arguments are not valid JSON ({error.msg} at line {error.lineno}"
            f' column {error.colno}); expected {{"code": "..."}}.',
            arguments,
        ) from None
    if not isinstance(value, dict):
        raise BadCodeBlock(
            f"The tool call's arguments are a JSON {type(value).__name__}, not an object with "
            'a "code" field.',
            arguments,
        )
    if "code" not in value:
        raise BadCodeBlock('The tool call\'s arguments have no "code" field.', arguments)
    code = value["code"]
    if not isinstance(code, str):
        raise BadCodeBlock('The tool call\'s "code" field is not a string.', arguments)
    if _OPEN.match(code.lstrip("\n").split("\n", 1)[0]):
        code = extract_code(code).code or ""
    if not code.strip():
        raise BadCodeBlock('The tool call\'s "code" field is empty.', arguments)
    return code.strip("\n")


def check_syntax(code: str) -> str | None:
    """A short description of the code's syntax error, or None if it parses (or can't be checked).

    IPython's line magics and shell escapes (``%timeit f()``, ``!ls``, ``x = !ls``) are masked
    first. A cell magic whose body is not Python (``%%bash``) is not checked.
    """
    masked = _masked(code)
    if masked is None:
        return None
    try:
        _parse(masked)
    except SyntaxError as error:
        where = f" (line {error.lineno})" if error.lineno else ""
        return f"{type(error).__name__}: {error.msg}{where}"
    except ValueError as error:  # null bytes, before Python 3.12
        return f"SyntaxError: {error}"
    except (RecursionError, MemoryError):  # the parser's own limits: too deep to check here
        return None
    return None


def looks_like_code(source: str) -> bool:
    """Whether ``source`` reads as code rather than prose or printed values.

    True when it has an IPython magic or shell line, or when it parses as Python and has a
    statement other than a bare expression of names and literals (``(150, 5)``, ``Done``).
    """
    masked = _masked(source)
    if masked is None or masked != source:
        return True
    try:
        tree = _parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return not all(_plain_statement(stmt) for stmt in tree.body)


# --- the ways code arrives ---------------------------------------------------------------------


def _from_tool_calls(text: str, repairs: _Repairs) -> tuple[str | None, str] | None:
    pieces = []
    for match in _TOOL_CALL.finditer(text):
        found = _code_from_json(_loads(match[1]))
        if found is not None:
            pieces.append(found[0])
    if not pieces:
        return None
    repairs.add("tool_call")
    return _joined(pieces, repairs), _TOOL_CALL.sub("", text)


def _from_json_reply(text: str, repairs: _Repairs) -> tuple[str | None, str] | None:
    stripped = text.strip()
    if not (stripped.startswith("{") and stripped.endswith("}")):
        return None
    found = _code_from_json(_loads(stripped))
    if found is None:
        return None
    repairs.add(found[1])
    return found[0], found[2]


def _from_fences(text: str, repairs: _Repairs) -> tuple[str | None, str] | None:
    lines = text.split("\n")
    fences = _fences(lines)
    if not fences:
        return None
    pieces: list[str] = []
    removed: set[int] = set()
    for index, fence in enumerate(fences):
        intro = _intro_line(lines, fence.start, fences[index - 1].end if index else -1)
        kind, piece = _classify(fence, intro, repairs)
        if kind == "keep":
            continue
        removed.update(range(fence.start, min(fence.end, len(lines) - 1) + 1))
        if kind == "output":
            repairs.add("output_block_dropped")
            if intro is not None:
                removed.add(intro)
        elif piece:
            if kind == "code" and fence.tag == "":
                repairs.add("no_language_tag")
            if not fence.closed:
                repairs.add("unclosed_fence")
            pieces.append(piece)
    prose = "\n".join(line for number, line in enumerate(lines) if number not in removed)
    return (_joined(pieces, repairs) if pieces else None), prose


def _from_bare_code(text: str, repairs: _Repairs) -> tuple[str | None, str] | None:
    code = textwrap.dedent(text).strip("\n").rstrip()
    if not code or not looks_like_code(code) or check_syntax(code) is not None:
        return None
    repairs.add("bare_code")
    return code, ""


# --- fences ------------------------------------------------------------------------------------


def _fences(lines: list[str]) -> list[_Fence]:
    fences = []
    number = 0
    while number < len(lines):
        match = _OPEN.match(lines[number])
        if match is None or (match["fence"][0] == "`" and "`" in match["info"]):
            number += 1
            continue
        fence = match["fence"]
        end = number + 1
        while end < len(lines) and not _closes(lines[end], fence):
            end += 1
        body = textwrap.dedent("\n".join(lines[number + 1 : end])).strip("\n").rstrip()
        fences.append(_Fence(number, end, _tag(match["info"]), body, end < len(lines)))
        number = end + 1
    return fences


def _closes(line: str, fence: str) -> bool:
    stripped = line.strip()
    return len(stripped) >= len(fence) and stripped == fence[0] * len(stripped)


def _tag(info: str) -> str:
    """The language of a fence's info string: ``python`` for ``{.python}`` or ``python:a.py``."""
    return re.split(r"[\s:,]", info.strip(), maxsplit=1)[0].strip("{}.").lower()


def _classify(fence: _Fence, intro: int | None, repairs: _Repairs) -> tuple[str, str]:
    """What a fence holds, and its code: ``code``, ``json``, ``output``, ``empty`` or ``keep``.

    ``keep`` is another language's block, left in the prose; ``output`` is dropped.
    """
    if fence.tag in JSON_TAGS or (fence.tag == "" and fence.body.startswith("{")):
        found = _code_from_json(_loads(fence.body))
        if found is not None:
            repairs.add(found[1])
            return "json", found[0]
        if fence.tag != "":
            return "keep", ""
    if fence.tag in OUTPUT_TAGS:
        return "output", ""
    if fence.tag not in PYTHON_TAGS:
        return "keep", ""
    if not fence.body:
        return "empty", ""
    if intro is not None and not looks_like_code(fence.body):
        return "output", ""
    return "code", fence.body


def _intro_line(lines: list[str], start: int, previous_end: int) -> int | None:
    """The index of the line that introduces a fence, if it says what follows is output."""
    number = start - 1
    while number > previous_end and not lines[number].strip():
        number -= 1
    if number > previous_end and _is_output_intro(lines[number]):
        return number
    return None


def _is_output_intro(line: str) -> bool:
    """A line like ``Output:``, ``This will print:`` or ``**Result:**``."""
    stripped = re.sub(r"[*_`#>]", "", line).strip()
    if not stripped.endswith(":") or len(stripped) > 80:
        return False
    words = set(re.findall(r"[a-z]+", stripped.lower()))
    return bool(words & _OUTPUT_WORDS) and not words & _CODE_WORDS


def _joined(pieces: list[str], repairs: _Repairs) -> str:
    unique = [piece for index, piece in enumerate(pieces) if piece not in pieces[:index]]
    if len(unique) < len(pieces):
        repairs.add("duplicate_block_dropped")
    if len(unique) > 1:
        repairs.add("several_blocks")
    return "\n\n".join(unique)


# --- JSON --------------------------------------------------------------------------------------


def _loads(text: str) -> object:
    try:
        return json.loads(text, strict=False)
    except ValueError:
        return None


def _code_from_json(value: object) -> tuple[str, str, str] | None:
    """``(code, repair, prose)`` from ``{"code": ...}`` or a tool call's JSON, else None."""
    if not isinstance(value, dict):
        return None
    code = value.get("code")
    if isinstance(code, str):
        language = value.get("language", "python")
        if not isinstance(language, str) or language.lower() not in PYTHON_TAGS or not code:
            return None
        prose = "\n\n".join(v for k in _PROSE_KEYS if isinstance(v := value.get(k), str))
        return code.strip("\n"), "json_wrapped", prose
    if isinstance(value.get("function"), dict):  # {"type": "function", "function": {...}}
        return _code_from_json(value["function"])
    arguments = value.get("arguments", value.get("parameters"))
    if isinstance(arguments, str):
        arguments = _loads(arguments)
    if isinstance(arguments, dict) and isinstance(arguments.get("code"), str):
        code = arguments["code"].strip("\n")
        return (code, "tool_call", "") if code else None
    return None


# --- Python ------------------------------------------------------------------------------------


def _parse(source: str) -> ast.Module:
    with warnings.catch_warnings():  # invalid escapes and the like are the kernel's to report
        warnings.simplefilter("ignore")
        return ast.parse(source)


def _masked(code: str) -> str | None:
    """``code`` with magics and shell lines made ``pass``/``None``; None for a non-Python body."""
    lines = code.split("\n")
    first = next((n for n, line in enumerate(lines) if line.strip()), None)
    if first is not None and (cell := _CELL_MAGIC.match(lines[first].strip())):
        if cell[1] not in PYTHON_CELL_MAGICS:
            return None
        lines[first] = "pass"
    for number, line in enumerate(lines):
        if assign := _MAGIC_ASSIGN.match(line):
            lines[number] = assign[1] + "None"
        elif magic := _MAGIC_LINE.match(line):
            lines[number] = magic[1] + "pass"
    return "\n".join(lines)


def _plain_statement(stmt: ast.stmt) -> bool:
    """Whether a statement could be a few words of prose: ``Done``, ``Note: none``, ``pass``."""
    if isinstance(stmt, ast.Expr):
        return _plain_words(stmt.value)
    if isinstance(stmt, ast.AnnAssign):  # "Summary: done"
        return stmt.value is None and _plain_words(stmt.target) and _plain_words(stmt.annotation)
    return isinstance(stmt, (ast.Pass, ast.Break, ast.Continue, ast.Global, ast.Nonlocal))


def _plain_words(node: ast.expr) -> bool:
    """Whether an expression is only names and literals: printed values or a few words."""
    if isinstance(node, (ast.Name, ast.Constant)):
        return True
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return all(_plain_words(item) for item in node.elts)
    if isinstance(node, ast.Dict):
        return all(_plain_words(item) for item in [*node.values, *node.keys] if item is not None)
    if isinstance(node, ast.UnaryOp):
        return _plain_words(node.operand)
    if isinstance(node, ast.BinOp):
        return _plain_words(node.left) and _plain_words(node.right)
    if isinstance(node, ast.BoolOp):
        return all(_plain_words(value) for value in node.values)
    if isinstance(node, ast.Compare):
        return all(_plain_words(value) for value in [node.left, *node.comparators])
    return False


def _tidy(text: str) -> str:
    """Trailing spaces dropped, runs of blank lines made one, blank ends removed."""
    lines: list[str] = []
    for line in text.split("\n"):
        line = line.rstrip()
        if line or (lines and lines[-1]):
            lines.append(line)
    return "\n".join(lines).strip("\n")
