"""What the model is shown of a cell's outputs.

A cell's nbformat outputs become one short text plus, for vision models, a few images. The text
is deterministic and capped; every cut says where it happened and how much it removed, so the
model knows what it did not see. Everything in it came from the user's kernel: the loop wraps it
with :func:`wrap_untrusted` before it goes into a prompt.

The pieces of the text, in output order:

- streams: ``[stdout] ...`` / ``[stderr] ...`` (consecutive writes to the same stream merged, and
  ``\\r``/``\\b`` resolved, by :func:`~jupyter_ci.execution.outputs.coalesce_streams`: a progress
  bar shows its last state, as the notebook shows it);
- results: ``Out[7]: ...`` (``Out: ...`` without an execution count);
- display data: the text as is, with no label;
- errors: ``[error]`` then ``ename: evalue`` and the traceback without colours, compacted
  (:func:`~jupyter_ci.agent.tracebacks.compact_traceback`), head and tail kept;
- images, SVG, widgets and other rich data: one bracketed line each (see :func:`digest_outputs`).

A one-line body follows its label on the same line; a longer one starts on the next line.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any, Literal

from ..execution.outputs import coalesce_streams, joined
from .tracebacks import compact_traceback as compact_traceback

#: Lines of a traceback kept (head and tail) before the character budget applies.
TRACEBACK_MAX_LINES = 60
#: Lines of a data frame's text kept (head and tail).
TABLE_MAX_LINES = 30
#: Characters kept of HTML reduced to text, and of compact JSON.
HTML_MAX_CHARS = 1000
JSON_MAX_CHARS = 1000
#: Image types a vision model is sent; other images only get a placeholder.
VISION_MIMES = ("image/png", "image/jpeg")
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
NO_OUTPUT = "(no output)"

_ANSI = re.compile(
    r"""
    \x1b\[[0-?]*[ -/]*[@-~]              # CSI: colours, cursor moves
    | \x1b\][^\x07\x1b]*(?:\x07|\x1b\\)  # OSC: titles, hyperlinks
    | \x1b[@-Z\\-_]                      # other two-character escapes
    """,
    re.VERBOSE,
)
_PANDAS_HTML = re.compile(r"<table\b[^>]*\bclass=\"[^\"]*\bdataframe\b", re.IGNORECASE)
_PANDAS_SHAPE = re.compile(r"\[(\d+) rows x (\d+) columns\]\s*\Z")
_CUT_LINE = re.compile(
    r"\[\.\.\. (?:(?P<lines>\d+) lines? \((?P<chars>\d+) characters?\)"
    r"|(?P<only_chars>\d+) characters?) cut \.\.\.\]"
)
#: Characters of a long line worth keeping around an in-line cut.
_MIN_KEPT = 20
_NONCE = re.compile(r"[A-Za-z0-9_-]+")
_CLOSING_TAG = re.compile(r"</(untrusted-data)", re.IGNORECASE)


@dataclass(frozen=True)
class ImagePart:
    """An image for a vision model: its MIME type and base64 data, as nbformat stores them."""

    mime: str
    data: str


@dataclass(frozen=True)
class Digest:
    """A cell's outputs as the model sees them: text, images, and whether anything was cut."""

    text: str
    images: list[ImagePart]
    truncated: bool


@dataclass
class _Block:
    """One piece of the digest: an optional label and a body that may be cut."""

    label: str | None
    body: str
    truncated: bool = False

    def render(self) -> str:
        if self.label is None:
            return self.body
        return self.label + ("\n" if "\n" in self.body else " ") + self.body


# --- text helpers ------------------------------------------------------------------------------


def strip_ansi(text: str) -> str:
    """Remove terminal escape sequences (colours, cursor moves, titles) from ``text``."""
    return _ANSI.sub("", text)


def cut_line(lines: int | None, characters: int) -> str:
    """The line that replaces a cut: ``[... 12 lines (345 characters) cut ...]``.

    Without a line count (a cut inside a line): ``[... 345 characters cut ...]``.
    """
    chars = f"{characters} character{'' if characters == 1 else 's'}"
    if lines is None:
        return f"[... {chars} cut ...]"
    return f"[... {lines} line{'' if lines == 1 else 's'} ({chars}) cut ...]"


def head_tail(
    text: str, max_chars: int, *, unit: Literal["lines", "chars"] = "lines"
) -> tuple[str, bool]:
    """Keep the head and tail of ``text`` within ``max_chars``; return it and whether it was cut.

    The middle is replaced by a :func:`cut_line` on a line of its own, whose counts include what
    earlier cut lines in the removed part stood for. With ``unit="lines"`` whole lines are kept,
    except that a line longer than half the budget has its own middle replaced in place
    (``abc[... 9951 characters cut ...]xyz``), and one line alone is cut by characters; with
    ``unit="chars"`` the cut may fall anywhere. The head gets at most half of the budget and the
    tail the rest. The result is at most ``max_chars`` long unless ``max_chars`` is shorter than
    the cut line itself; a cut that would not make the text shorter is not made.
    """
    if unit not in ("lines", "chars"):
        raise ValueError(f"unit must be 'lines' or 'chars', not {unit!r}")
    if len(text) <= max_chars:
        return text, False
    cut = _cut_lines(text, max_chars) if unit == "lines" else None
    if cut is None:
        cut = _cut_chars(text, max_chars)
    if len(cut) >= len(text):
        return text, False
    return cut, True


def _cut_lines(text: str, max_chars: int) -> str | None:
    lines = text.split("\n")
    budget = max_chars - len(cut_line(len(lines), len(text)))
    if len(lines) > 1:
        lines = [_shorten(line, budget // 2) for line in lines]
    head_end, used = 0, 0
    while head_end < len(lines) and used + len(lines[head_end]) + 1 <= budget // 2:
        used += len(lines[head_end]) + 1
        head_end += 1
    tail_start = len(lines)
    while tail_start > head_end and used + len(lines[tail_start - 1]) + 1 <= budget:
        used += len(lines[tail_start - 1]) + 1
        tail_start -= 1
    if head_end == 0 and tail_start == len(lines):
        return None
    if head_end == tail_start:  # shortening the long lines was enough
        return "\n".join(lines)
    marker = cut_line(*_cut_size(lines[head_end:tail_start]))
    return "\n".join([*lines[:head_end], marker, *lines[tail_start:]])


def _shorten(line: str, limit: int) -> str:
    """A line over ``limit`` with its middle replaced in place by ``[... N characters cut ...]``.

    Lines too long to show usefully even then are left for the line cut to remove whole.
    """
    keep = limit - len(cut_line(None, len(line)))
    if len(line) <= limit or keep < _MIN_KEPT:
        return line
    head, tail = line[: keep // 2], line[len(line) - (keep - keep // 2) :]
    return head + cut_line(None, len(line) - len(head) - len(tail)) + tail


def _cut_chars(text: str, max_chars: int) -> str:
    budget = max(0, max_chars - len(cut_line(None, len(text))) - 2)
    head = text[: budget // 2]
    tail = text[len(text) - (budget - len(head)) :] if budget > len(head) else ""
    marker = cut_line(None, _cut_size([text[len(head) : len(text) - len(tail)]])[1])
    return "\n".join(part for part in (head, marker, tail) if part)


def cap_lines(text: str, max_lines: int) -> tuple[str, bool]:
    """Keep the first and last lines of ``text`` (``max_lines`` in all) with a cut line between."""
    lines = text.split("\n")
    if len(lines) <= max_lines:
        return text, False
    head = max_lines // 2
    tail_start = len(lines) - (max_lines - head)
    marker = cut_line(*_cut_size(lines[head:tail_start]))
    return "\n".join([*lines[:head], marker, *lines[tail_start:]]), True


def _cut_size(removed: list[str]) -> tuple[int, int]:
    """Lines and characters of a cut, counting what earlier cut lines inside it stood for."""
    text = "\n".join(removed)
    lines, chars = len(removed), len(text)
    for earlier in _CUT_LINE.finditer(text):
        if earlier["lines"]:
            lines += int(earlier["lines"]) - 1
        chars += int(earlier["chars"] or earlier["only_chars"]) - len(earlier[0])
    return lines, chars


def _size(nbytes: int) -> str:
    if nbytes < 1000:
        return f"{nbytes} B"
    if nbytes < 1_000_000:
        return f"{round(nbytes / 1000)} KB"
    return f"{nbytes / 1_000_000:.1f} MB".replace(".0 MB", " MB")


def _base64_size(data: str) -> int:
    compact = "".join(data.split())
    padding = len(compact) - len(compact.rstrip("="))
    return max(0, len(compact) * 3 // 4 - padding)


# --- the untrusted envelope --------------------------------------------------------------------


def new_nonce() -> str:
    """A fresh random id for one :func:`wrap_untrusted` envelope (16 hex digits)."""
    return secrets.token_hex(8)


def wrap_untrusted(text: str, nonce: str, label: str = "kernel output") -> str:
    """Wrap text from the kernel so the model reads it as data, never as instructions.

    The envelope is::

        <untrusted-data id="NONCE" source="LABEL">
        TEXT
        </untrusted-data id="NONCE">

    Any closing tag inside ``text`` (``</untrusted-data``, whatever its id or case) is written
    ``<\\/untrusted-data`` so that the text cannot end the envelope early. Trailing newlines of
    ``text`` are dropped.
    """
    if not _NONCE.fullmatch(nonce):
        raise ValueError("nonce must be letters, digits, '-' or '_'")
    if '"' in label or "\n" in label:
        raise ValueError("label must not contain quotes or newlines")
    body = _CLOSING_TAG.sub(r"<\\/\1", text).rstrip("\n")
    return f'<untrusted-data id="{nonce}" source="{label}">\n{body}\n</untrusted-data id="{nonce}">'


# --- rendering outputs -------------------------------------------------------------------------


@dataclass
class _Images:
    """The image caps, counted across one digest."""

    vision: bool
    max_images: int
    max_bytes: int
    sent: list[ImagePart]
    dropped: bool = False

    def line(self, mime: str, data: str) -> str:
        """The image's line in the text; the image itself is kept if it is to be sent."""
        if mime.endswith("+xml"):  # SVG is stored as text, not base64
            return f"[{mime} output, {_size(len(data.encode()))}, not shown]"
        data = "".join(data.split())
        nbytes = _base64_size(data)
        size = _size(nbytes)
        if not self.vision or mime not in VISION_MIMES:
            return f"[{mime} output, {size}, not shown]"
        if nbytes > self.max_bytes:
            self.dropped = True
            limit = _size(self.max_bytes)
            return f"[{mime} output, {size}, not shown: larger than the {limit} image limit]"
        if len(self.sent) >= self.max_images:
            self.dropped = True
            return (
                f"[{mime} output, {size}, not shown: over the limit of "
                f"{self.max_images} image{'' if self.max_images == 1 else 's'}]"
            )
        self.sent.append(ImagePart(mime, data))
        return f"[image {len(self.sent)}: {mime}, {size}, sent as an image]"


def digest_outputs(
    outputs: Sequence[Mapping[str, Any]],
    *,
    max_chars: int = 4000,
    vision: bool = False,
    max_images: int = 2,
    max_image_bytes: int = 1_000_000,
) -> Digest:
    """Digest a cell's nbformat v4 outputs for the model.

    Rich data is reduced to text: ``text/plain`` is preferred; a pandas table's text is capped
    at :data:`TABLE_MAX_LINES` lines with its shape noted (``[DataFrame: 150 rows x 5
    columns]``) when pandas printed it; HTML alone is reduced to its text
    (``[HTML shown as text]``); JSON is written compactly. One line stands for each of:

    - an image sent to a vision model: ``[image 1: image/png, 12 KB, sent as an image]``;
    - an image not sent: ``[image/png output, 12 KB, not shown]``, with ``: larger than the
      1 MB image limit`` or ``: over the limit of 2 images`` when a cap dropped it;
    - SVG and other data with no text: ``[image/svg+xml output, 3 KB, not shown]``;
    - a widget: ``[interactive widget]``.

    Each output's text is capped first; when the whole is still over ``max_chars``, the longest
    pieces are cut (head and tail kept) to equal shares of the budget. ``truncated`` is True when
    any text was cut or an image was dropped by a cap (not when vision is simply off).
    """
    images = _Images(vision, max_images, max_image_bytes, [])
    blocks = [
        block for out in coalesce_streams(outputs) if (block := _render(out, images)) is not None
    ]
    if not blocks:
        return Digest(NO_OUTPUT, [], False)
    truncated = _fit(blocks, max_chars) or any(b.truncated for b in blocks) or images.dropped
    text, cut = head_tail("\n".join(block.render() for block in blocks), max_chars)
    return Digest(text, images.sent, truncated or cut)


#: The label of an error's block in a digest; its first line is the error's ``ename: evalue``.
ERROR_LABEL = "[error]"


def error_line(digest: str) -> str:
    """What a digest says went wrong, in one line: the ``ename: evalue`` of its last error
    (the line after :data:`ERROR_LABEL`; its traceback follows, compacted), else the digest's
    last line (a timeout's notice, a stream's last words), '' for an empty digest."""
    lines = digest.strip().splitlines()
    labels = [i for i, line in enumerate(lines[:-1]) if line.strip() == ERROR_LABEL]
    if labels:
        return lines[labels[-1] + 1].strip()
    return lines[-1].strip() if lines else ""


def digest_error(
    ename: str,
    evalue: str,
    traceback: Iterable[str],
    *,
    max_lines: int = TRACEBACK_MAX_LINES,
    max_chars: int | None = None,
) -> tuple[str, bool]:
    """An error as the model reads it: ``ename: evalue``, then the traceback without colours.

    An IPython traceback is first made compact (:func:`compact_traceback`). The traceback keeps
    its first and last lines (``max_lines`` in all); with ``max_chars`` the whole is then kept
    within it by :func:`head_tail`. Returns the text and whether it was cut.
    """
    first = strip_ansi(f"{ename}: {evalue}" if evalue else ename)
    pieces = compact_traceback([strip_ansi(piece) for piece in traceback], first)
    trace = "\n".join(pieces).strip("\n")
    trace, cut = cap_lines(trace, max_lines)
    text = f"{first}\n{trace}" if trace else first
    if max_chars is None:
        return text, cut
    text, cut_more = head_tail(text, max_chars)
    return text, cut or cut_more


def _render(out: Mapping[str, Any], images: _Images) -> _Block | None:
    kind = out.get("output_type")
    if kind == "stream":
        text = strip_ansi(joined(out.get("text"))).strip("\n")
        name = out.get("name") if out.get("name") in ("stdout", "stderr") else "stream"
        return _Block(f"[{name}]", text) if text else None
    if kind == "error":
        traceback = out.get("traceback")
        text, cut = digest_error(
            str(out.get("ename", "Error")),
            str(out.get("evalue", "")),
            [str(line) for line in traceback] if isinstance(traceback, list) else [],
        )
        return _Block(ERROR_LABEL, text, cut)
    if kind in ("execute_result", "display_data"):
        data = out.get("data")
        block = _render_data(data if isinstance(data, Mapping) else {}, images)
        if block is None:
            return None
        if kind == "execute_result":
            count = out.get("execution_count")
            block.label = f"Out[{count}]:" if isinstance(count, int) else "Out:"
        return block
    return _Block(None, f"[{kind} output, not shown]")


def _render_data(data: Mapping[str, Any], images: _Images) -> _Block | None:
    """The text for one mime bundle, by preference: widget, image, table, text, HTML, JSON."""
    if WIDGET_MIME in data:
        return _Block(None, "[interactive widget]")
    image_mime = next((m for m in VISION_MIMES if m in data), None) or next(
        (m for m in data if m.startswith("image/")), None
    )
    if image_mime is not None:
        line = images.line(image_mime, joined(data[image_mime]))
        caption = strip_ansi(joined(data.get("text/plain", ""))).strip()
        return _Block(None, f"{line}\n{caption}" if caption else line)
    if "text/plain" in data:
        text = strip_ansi(joined(data["text/plain"])).strip("\n")
        if _PANDAS_HTML.search(joined(data.get("text/html", ""))):
            return _table(text)
        return _Block(None, text)
    if "text/markdown" in data:
        return _Block(None, joined(data["text/markdown"]).strip("\n"))
    if "text/html" in data:
        return _html(joined(data["text/html"]))
    json_mime = next((m for m in data if m == "application/json" or m.endswith("+json")), None)
    if json_mime is not None:
        return _json(data[json_mime])
    if not data:
        return None
    mime, value = next(iter(data.items()))
    return _Block(None, f"[{mime} output, {_size(len(joined(value).encode()))}, not shown]")


def _table(text: str) -> _Block:
    capped, cut = cap_lines(text, TABLE_MAX_LINES)
    shape = _PANDAS_SHAPE.search(text)
    if shape:
        capped = f"[DataFrame: {shape[1]} rows x {shape[2]} columns]\n{capped}"
    return _Block(None, capped, cut)


def _html(markup: str) -> _Block:
    text = html_to_text(markup)
    if not text:
        return _Block(None, f"[text/html output, {_size(len(markup.encode()))}, no text]")
    capped, cut = head_tail(text, HTML_MAX_CHARS)
    return _Block(None, f"[HTML shown as text]\n{capped}", cut)


def _json(value: object) -> _Block:
    if isinstance(value, (str, list)):
        try:
            value = json.loads(joined(value))
        except ValueError:
            value = joined(value)
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    capped, cut = head_tail(text, JSON_MAX_CHARS, unit="chars")
    return _Block(None, capped, cut)


class _TextFromHTML(HTMLParser):
    """Collects the visible text of HTML: block elements become line breaks, cells spaces."""

    _BLOCKS = frozenset({"p", "div", "br", "hr", "pre", "table", "thead", "tbody", "tfoot", "tr"})
    _BLOCKS |= frozenset({"ul", "ol", "li", "dl", "dt", "dd", "blockquote", "caption", "section"})
    _BLOCKS |= frozenset({"h1", "h2", "h3", "h4", "h5", "h6", "header", "footer", "article"})
    _CELLS = frozenset({"td", "th"})
    _HIDDEN = frozenset({"script", "style", "head", "template"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._hidden = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._tag(tag, opening=True)

    def handle_endtag(self, tag: str) -> None:
        self._tag(tag, opening=False)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in self._HIDDEN:
            self._tag(tag, opening=True)

    def _tag(self, tag: str, *, opening: bool) -> None:
        if tag in self._HIDDEN:
            self._hidden = self._hidden + 1 if opening else max(0, self._hidden - 1)
        elif tag in self._BLOCKS:
            self.parts.append("\n")
        elif tag in self._CELLS:
            self.parts.append(" ")

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            self.parts.append(data)


def html_to_text(markup: str) -> str:
    """The visible text of HTML: tags dropped, entities decoded, whitespace collapsed per line."""
    parser = _TextFromHTML()
    parser.feed(markup)
    parser.close()
    lines = (" ".join(line.split()) for line in "".join(parser.parts).split("\n"))
    return "\n".join(line for line in lines if line)


# --- fitting the budget ------------------------------------------------------------------------


def _fit(blocks: list[_Block], max_chars: int) -> bool:
    """Cut the longest blocks' bodies to equal shares of ``max_chars``; True if any was cut."""
    available = max_chars - (len(blocks) - 1)
    sizes = [len(block.render()) for block in blocks]
    if sum(sizes) <= available:
        return False
    remaining, left = available, len(blocks)
    share = 0
    for size in sorted(sizes):
        share = max(0, remaining // left)
        if size > share:
            break
        remaining -= size
        left -= 1
    cut_any = False
    for block, size in zip(blocks, sizes, strict=True):
        if size > share:
            overhead = len(block.label) + 1 if block.label is not None else 0
            block.body, cut = head_tail(block.body, max(0, share - overhead))
            block.truncated = block.truncated or cut
            cut_any = cut_any or cut
    return cut_any
