"""Prose written into a Markdown file that loads nothing by itself when it is read.

The policy is the labextension's (``labextension/src/inertMedia.ts``): no remote resource is ever
fetched from a model's text, and an image or other embed is shown as its URL, fetched only if the
reader follows it. The labextension applies it where the page shows model text; this is its form
for Markdown that leaves the server as a file (the conversation export), which any viewer may
render: a viewer that shows raw HTML and images would otherwise fetch
``![x](https://host/?secret=...)`` as soon as the file is opened.

Outside code (fenced blocks and code spans, kept as they are):
- ``<`` becomes ``&lt;``: no raw HTML (``<img>``, ``<video poster>``, ``<iframe>``, CSS) is left;
- ``![`` becomes ``!\\[``: no image syntax is left (inline or by reference), and the reader sees
  the image's text and URL as written.
A fenced block the prose leaves open is closed at its end, so that what follows the prose in the
file is not read as its code.
"""

from __future__ import annotations

import re

#: A line that opens (or closes) a fenced code block: up to three spaces, then ``` or ~~~.
_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
#: A code span within one line: a run of backticks, then the same run again.
_CODE_SPAN = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)")


def inert_markdown(text: str) -> str:
    """``text`` with nothing in it that a Markdown viewer would load by itself (see above)."""
    out: list[str] = []
    fence: tuple[str, int] | None = None  # the open block's fence character and length
    for line in text.split("\n"):
        found = _FENCE.match(line)
        if fence is not None:
            out.append(line)
            if found and _closes(found, fence):
                fence = None
            continue
        if found and not (found.group(2)[0] == "`" and "`" in found.group(3)):
            fence = (found.group(2)[0], len(found.group(2)))
            out.append(line)
            continue
        out.append(_inert_line(line))
    if fence is not None:
        out.append(fence[0] * fence[1])
    return "\n".join(out)


def _closes(found: re.Match[str], fence: tuple[str, int]) -> bool:
    marks = found.group(2)
    return marks[0] == fence[0] and len(marks) >= fence[1] and not found.group(3).strip()


def _inert_line(line: str) -> str:
    """One line outside fenced blocks: code spans kept, the rest made inert."""
    parts: list[str] = []
    last = 0
    for span in _CODE_SPAN.finditer(line):
        parts.append(_inert_text(line[last : span.start()]))
        parts.append(span.group(0))
        last = span.end()
    parts.append(_inert_text(line[last:]))
    return "".join(parts)


def _inert_text(text: str) -> str:
    return text.replace("<", "&lt;").replace("![", "!\\[")
