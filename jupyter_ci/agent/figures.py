"""Plots told in words, for a model that does not see images.

A text-only model shown "[image/png output, 23 KB, not shown]" cannot say anything true about a
plot. Before a run's first cell, the loop asks the kernel, silently, to note every matplotlib
figure it displays from then on (:data:`FIGURES_SOURCE`): a display formatter of its own, for
a MIME type no output ever carries (its printer returns nothing, so outputs are unchanged),
whose printer notes what is a ``matplotlib.figure.Figure`` (matplotlib need not be imported). After
a cell with an image, the loop reads the notes and clears them: for each figure, its title, and
for each of its axes the title, the axis labels and ranges, the categories on an axis, the
kinds and counts of what is drawn (lines and their points, scatter points, bars, images,
filled areas), and the legend's entries. Nothing is added to the user's namespace or history;
the notes live on the shell object. The same source runs in every workspace: through a silent
user expression in a separate kernel, directly in the in-kernel loop's process.
"""

from __future__ import annotations

import json
from typing import Any

#: Characters of figure notes one cell's digest may hold (within the digest's budget).
MAX_NOTES_CHARS = 1200

#: Python source run in the user's kernel (standard library and IPython; matplotlib's objects
#: only as they are displayed). Its globals are ``shell`` (the IPython shell) and ``read``
#: (whether to return the notes taken; they are cleared either way); it leaves ``result``,
#: whose ``repr()`` is the JSON list of lines. It never raises.
FIGURES_SOURCE = r"""
import json

KEY = "application/vnd.jupyter-ci.figure-notes"
MAX_FIGURES = 4
MAX_AXES = 6
MAX_ITEMS = 8


class Report(str):
    def __repr__(self):
        return str(self)


def number(value):
    try:
        return format(float(value), ".4g")
    except Exception:
        return str(value)


def words(items):
    items = [str(item) for item in items if str(item).strip()]
    shown = ", ".join(repr(item) for item in items[:MAX_ITEMS])
    more = len(items) - MAX_ITEMS
    return shown + (f", ... ({more} more)" if more > 0 else "")


def categories(axis, ticks):
    # The tick labels of an axis whose values are words (bars per category, and the like).
    try:
        labels = axis.get_major_formatter().format_ticks(ticks)
    except Exception:
        return []
    texts = [str(label) for label in labels if str(label).strip()]
    for text in texts:
        try:
            float(text.replace("\u2212", "-"))
        except ValueError:
            return texts
    return []


def drawn(ax):
    kinds = []
    lines = [line for line in ax.get_lines() if line.get_visible()]
    if lines:
        points = sum(len(line.get_xdata()) for line in lines)
        kinds.append(f"{len(lines)} line{'s' if len(lines) != 1 else ''} ({points} points)")
    scatter = others = 0
    for collection in ax.collections:
        offsets = getattr(collection, "get_offsets", lambda: [])()
        if type(collection).__name__ == "PathCollection":
            scatter += len(offsets)
        else:
            others += 1
    if scatter:
        kinds.append(f"{scatter} scatter points")
    bars = [p for p in ax.patches if type(p).__name__ == "Rectangle"]
    if bars:
        kinds.append(f"{len(bars)} bars")
    if len(ax.patches) > len(bars):
        kinds.append(f"{len(ax.patches) - len(bars)} other shapes")
    if others:
        kinds.append(f"{others} filled areas or meshes")
    for image in ax.get_images():
        shape = getattr(image.get_array(), "shape", ())
        kinds.append("an image " + "x".join(str(n) for n in shape[:2]))
    return kinds


def describe_axes(ax):
    parts = []
    if ax.get_title():
        parts.append(f"title {ax.get_title()!r}")
    for name, axis, label, limits, ticks in (
        ("x", ax.xaxis, ax.get_xlabel(), ax.get_xlim(), ax.get_xticks()),
        ("y", ax.yaxis, ax.get_ylabel(), ax.get_ylim(), ax.get_yticks()),
    ):
        named = categories(axis, ticks)
        text = f"{name} {label!r}" if label else f"{name}"
        if named:
            text += " categories " + words(named)
        else:
            text += f" from {number(limits[0])} to {number(limits[1])}"
        if axis.get_scale() != "linear":
            text += f" ({axis.get_scale()} scale)"
        parts.append(text)
    kinds = drawn(ax)
    parts.append("shows " + (", ".join(kinds) if kinds else "nothing drawn"))
    legend = ax.get_legend()
    if legend is not None:
        parts.append("legend " + words(t.get_text() for t in legend.get_texts()))
    return "; ".join(parts)


def describe(figure, index):
    axes = [ax for ax in figure.get_axes() if ax.get_visible() and ax.get_label() != "<colorbar>"]
    title = getattr(figure, "_suptitle", None)
    head = f"Figure {index}"
    if title is not None and title.get_text():
        head += f" {title.get_text()!r}"
    head += f": {len(axes)} axes"
    lines = [head]
    for number_, ax in enumerate(axes[:MAX_AXES], 1):
        try:
            lines.append(f"  axes {number_}: " + describe_axes(ax))
        except Exception:
            lines.append(f"  axes {number_}: (could not be described)")
    if len(axes) > MAX_AXES:
        lines.append(f"  ... {len(axes) - MAX_AXES} more axes")
    return lines


def is_figure(value):
    return any(
        getattr(kind, "__module__", "") == "matplotlib.figure" and kind.__name__ == "Figure"
        for kind in type(value).__mro__
    )


def note(figure):
    if not is_figure(figure):
        return None
    try:
        notes = shell.__dict__.setdefault("_jupyter_ci_figure_notes", [])
        if len(notes) < MAX_FIGURES:
            notes.append(describe(figure, len(notes) + 1))
    except Exception:
        pass
    return None  # nothing is added to the output


def install():
    formatters = shell.display_formatter.formatters
    if KEY in formatters:
        return
    from IPython.core.formatters import BaseFormatter

    class FigureNotes(BaseFormatter):
        format_type = KEY
        print_method = "_jupyter_ci_no_such_method_"

    notes = FigureNotes(parent=shell.display_formatter)
    # For every type: matplotlib's inline backend removes the Figure printer of every
    # formatter when it sets its figure formats, and matplotlib need not be imported yet.
    notes.for_type(object, note)
    formatters[KEY] = notes


try:
    install()
    # Taken away either way: a run starts from no notes (not those of the user's own plots).
    taken = shell.__dict__.pop("_jupyter_ci_figure_notes", [])
    result = Report(json.dumps([line for lines in taken for line in lines] if read else []))
except Exception:
    result = Report("[]")
"""


def figures_scope(read: bool) -> dict[str, Any]:
    """The globals :data:`FIGURES_SOURCE` runs with, but ``shell``."""
    return {"read": read}


def figures_expression(read: bool) -> str:
    """One Python expression, evaluated in the user's kernel, that starts noting figures (once),
    clears the notes taken so far and, with ``read``, gives them as JSON text. It adds nothing
    to the user's namespace (the source runs in a fresh globals dict)."""
    scope = repr(figures_scope(read))
    return (
        "(lambda g: (__import__('builtins').exec("
        + repr(FIGURES_SOURCE)
        + ", g), g['result'])[1])(dict("
        + scope
        + ", shell=__import__('IPython').get_ipython()))"
    )


def figures_here(shell: Any, read: bool) -> list[str]:
    """The same, in this process (the in-kernel loop)."""
    scope: dict[str, Any] = {**figures_scope(read), "shell": shell}
    try:
        exec(FIGURES_SOURCE, scope)  # noqa: S102 - our own source, in a fresh globals dict
    except Exception:
        return []
    return parse_figures(repr(scope.get("result", "[]")))


def parse_figures(text: str | None) -> list[str]:
    """The notes' lines from their JSON text ([] when it is not a list of strings)."""
    try:
        data = json.loads(text or "")
    except (TypeError, ValueError):
        return []
    if not isinstance(data, list):
        return []
    return [line for line in data if isinstance(line, str) and line]


def figure_notes(lines: list[str]) -> str:
    """The notes as the digest says them, at most :data:`MAX_NOTES_CHARS` characters."""
    if not lines:
        return ""
    text = "[the image output(s) above, described for a model that does not see images]\n"
    text += "\n".join(lines)
    if len(text) > MAX_NOTES_CHARS:
        text = text[: MAX_NOTES_CHARS - 20].rstrip() + "\n[... notes cut]"
    return text
