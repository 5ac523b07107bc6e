"""Progress of an in-kernel ``%%ci`` run, under the magic cell: text lines or a widget.

Which view a run gets is decided from the execute request, deterministically
(:func:`renders_widgets`): a compact ipywidgets box where the frontend is known to render widgets
(JupyterLab and Notebook 7 notebooks, VS Code notebooks), lines of text everywhere else
(nbclient/papermill, terminal IPython, consoles, the classic notebook). ``%ci --progress`` or the
environment variable ``JUPYTER_CI_PROGRESS`` forces either (see :mod:`jupyter_ci.magics`).

Both views are fed run events on the main thread (the shell's), where the magic serves the loop.
The widget view never holds the only copy of anything that matters: failures, notices and the
model's answer are printed as text in both views, and the magic prints the final status line as
text. When the run ends the widget's output is replaced by an empty text output, so a saved
notebook holds no widget that other frontends (or the same one, reopened) cannot show.

This module imports no widget library at import time: ``%load_ext jupyter_ci`` must stay light.
ipywidgets is imported only when a widget view is made, and a failure there (ipywidgets missing,
no comm support) silently gives the text view instead.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from typing import Any, Protocol

from ..agent.outcome import end_words
from ..agent.states import RunState

#: What a frontend that cannot render widgets shows for the live widget.
WIDGET_FALLBACK_TEXT = (
    "jupyter-ci: progress is shown as a widget, which this frontend does not render "
    "(`%ci --progress text` shows it as text)"
)
#: How often the widget's clock is refreshed while nothing else happens (seconds).
TICK = 1.0
#: VS Code names the cells it runs with URIs of this scheme in ``metadata.cellId``.
VSCODE_CELL_SCHEME = "vscode-notebook-cell:"


def renders_widgets(parent: Mapping[str, Any] | None) -> bool:
    """Whether the client that sent this execute request is known to render ipywidgets.

    - JupyterLab and Notebook 7 notebooks (``CodeCell.execute`` called by ``NotebookActions``)
      send ``cellId`` and ``deletedCells`` (and ``recordTiming``) in the request's metadata.
    - VS Code sends ``cellId`` as a ``vscode-notebook-cell:`` URI, and renders ipywidgets.
    - nbclient/papermill and ``jupyter_client`` send no metadata; terminal IPython has no
      request at all; JupyterLab's console sends only ``cellId`` — all of them get text.
    """
    if not isinstance(parent, Mapping):
        return False
    metadata = parent.get("metadata")
    if not isinstance(metadata, Mapping):
        return False
    cell_id = metadata.get("cellId")
    if not isinstance(cell_id, str) or not cell_id:
        return False
    if cell_id.startswith(VSCODE_CELL_SCHEME):
        return True
    return isinstance(metadata.get("deletedCells"), list)


def choose_view(choice: str, parent: Mapping[str, Any] | None) -> str:
    """The view for a ``--progress`` choice and the request: ``"widgets"`` or ``"text"``.

    ``"auto"`` (or anything else) decides with :func:`renders_widgets`.
    """
    if choice in ("text", "widgets"):
        return choice
    return "widgets" if renders_widgets(parent) else "text"


class ProgressView(Protocol):
    """What the in-kernel run feeds, on the main thread."""

    def __call__(self, event: Mapping[str, Any]) -> None:
        """Show one run event."""

    def tick(self) -> None:
        """Called while the main thread waits for the loop (about every 50 ms)."""

    def close(self) -> None:
        """The run has ended: release what the view holds."""


class TextProgress:
    """Progress as plain text lines, printed on the main thread as events arrive.

    ``errors`` is the workspace's last error output per cell id (for the failure lines).
    """

    def __init__(self, errors: Mapping[str, Mapping[str, Any]], model_name: str) -> None:
        self.errors = errors
        self.model_name = model_name
        self.asked = False
        self.attempt = 1
        self.max_attempts = 1
        self.cell_numbers: dict[str, int] = {}

    def __call__(self, event: Mapping[str, Any]) -> None:
        """Print the event's line, if it has one."""
        line = self.line(event)
        if line:
            print(line, flush=True)

    def tick(self) -> None:
        """Nothing to refresh: lines are printed as events arrive."""

    def close(self) -> None:
        """Nothing to release."""

    def cell_number(self, cell_id: str) -> int:
        """1 for the run's first cell, 2 for the next, ..."""
        return self.cell_numbers.setdefault(cell_id, len(self.cell_numbers) + 1)

    def line(self, event: Mapping[str, Any]) -> str | None:
        """The text for one run event, or None for events not worth a line."""
        kind = event.get("type")
        if kind == "state" and event.get("state") == "generating" and not self.asked:
            self.asked = True
            return f"jupyter-ci: asking {self.model_name} ..."
        if kind == "attempt":
            self.attempt = int(event.get("attempt", 1))
            self.max_attempts = int(event.get("max_attempts", 1))
            number = self.cell_number(str(event.get("cell_id")))
            return f"jupyter-ci: running cell {number} (attempt {self.attempt}/{self.max_attempts})"
        if kind == "execution_finished":
            return self._finished(event)
        if (
            kind == "cell_updated"
            and event.get("cause") == "fix"
            and int(event.get("attempt", 1)) > 1
        ):
            return "jupyter-ci: fix received"
        if kind == "message" and event.get("text"):
            prefix = "jupyter-ci: " if event.get("role") == "notice" else ""
            return f"{prefix}{event['text']}"
        return None

    def _finished(self, event: Mapping[str, Any]) -> str | None:
        status = event.get("status")
        if status == "ok":
            return None
        what = f"jupyter-ci: attempt {self.attempt}/{self.max_attempts}"
        more = self.attempt < self.max_attempts
        follow = " — asking for a fix" if more else " — no attempts left"
        if status == "timed_out":
            return f"{what} timed out and was interrupted{follow}"
        if status in ("aborted", "interrupted"):  # in a kernel, every Stop is the user's
            return f"{what} was interrupted by the user; stopping"
        error = self.errors.get(str(event.get("cell_id")), {})
        ename, evalue = error.get("ename", "Error"), error.get("evalue", "")
        detail = f"{ename}: {evalue}" if evalue else str(ename)
        if len(detail) > 300:
            detail = detail[:297] + "..."
        return f"{what} failed: {detail}{follow}"


#: Events whose text line is printed by the widget view too: what went wrong, what was said.
_ALWAYS_TEXT = frozenset({"execution_finished", "message"})
_FINAL_STYLE = {"done": "success", "failed": "danger", "stopped": "warning"}


class WidgetProgress:
    """A one-line ipywidgets box: attempts bar, current step, cells · tokens · time.

    Made on the main thread inside the magic, so its output belongs to the magic cell; updated
    there too (trait changes become comm messages the frontend applies at once, while the
    kernel is busy). Any failure of the widgets turns the view into :class:`TextProgress` for
    the rest of the run, without a word.
    """

    def __init__(
        self,
        errors: Mapping[str, Mapping[str, Any]],
        model_name: str,
        *,
        max_attempts: int,
    ) -> None:
        # Imported here, not at module level: %load_ext must not import ipywidgets.
        import ipywidgets as widgets
        from IPython.display import display

        self.text = TextProgress(errors, model_name)
        self.model_name = model_name
        self.broken = False
        self.tokens = 0
        self.cells = 0
        self.started = time.monotonic()
        self._last_tick = self.started
        self._writing: str | None = None
        self.bar = widgets.IntProgress(
            value=0,
            min=0,
            max=max(1, max_attempts),
            bar_style="info",
            description="jupyter-ci",
            style={"description_width": "initial"},
            layout=widgets.Layout(width="16em"),
        )
        self.step = widgets.Label(value=f"asking {model_name} …")
        self.details = widgets.Label(value="")
        self.box = widgets.HBox([self.bar, self.step, self.details])
        self._show_details()
        bundle = dict(self.box._repr_mimebundle_())
        bundle["text/plain"] = WIDGET_FALLBACK_TEXT
        self.handle: Any = display(bundle, raw=True, display_id=True)  # type: ignore[no-untyped-call]

    # --- ProgressView ---------------------------------------------------------------------------

    def __call__(self, event: Mapping[str, Any]) -> None:
        """Update the widget; print the lines that must be text (failures, messages)."""
        line = self.text.line(event)  # also keeps the attempt and cell counters
        if self.broken:
            if line:
                print(line, flush=True)
            return
        if line and event.get("type") in _ALWAYS_TEXT:
            print(line, flush=True)
        try:
            self._update(event)
        except Exception:
            self.broken = True

    def tick(self) -> None:
        """Refresh the clock, at most once a second."""
        now = time.monotonic()
        if self.broken or now - self._last_tick < TICK:
            return
        self._last_tick = now
        try:
            self._show_details()
        except Exception:
            self.broken = True

    def close(self) -> None:
        """Replace the widget's output with an empty text output and close the widgets."""
        with contextlib.suppress(Exception):
            self.handle.update({"text/plain": ""}, raw=True)
        # Each widget has layout and style models of its own: close them all, or the kernel
        # keeps every run's widgets alive.
        for widget in (self.box, self.bar, self.step, self.details):
            for model in (widget, getattr(widget, "layout", None), getattr(widget, "style", None)):
                with contextlib.suppress(Exception):
                    if model is not None:
                        model.close()

    # --- the widget's content ---------------------------------------------------------------

    def _update(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        if kind == "token":
            cell_id = event.get("cell_id")
            if isinstance(cell_id, str) and cell_id != self._writing:
                self._writing = cell_id
                self.step.value = f"writing cell {self.text.cell_number(cell_id)} …"
            return
        if kind == "state":
            self._state(str(event.get("state")), str(event.get("reason") or ""))
        elif kind == "cell_inserted":
            self.cells += 1
        elif kind == "attempt":
            number = self.text.cell_number(str(event.get("cell_id")))
            attempt, most = self.text.attempt, self.text.max_attempts
            self.bar.max = max(1, most)
            self.bar.value = attempt
            self.bar.bar_style = "info" if attempt == 1 else "warning"
            self.step.value = f"running cell {number} (attempt {attempt}/{most})"
        elif kind == "execution_finished" and event.get("status") != "ok":
            self.bar.bar_style = "danger"
        elif kind == "usage":
            usage = event.get("usage") or {}
            self.tokens = int(usage.get("prompt_tokens") or 0) + int(
                usage.get("completion_tokens") or 0
            )
        else:
            return
        self._show_details()

    def _state(self, state: str, reason: str) -> None:
        if state == "generating":
            more = " for the next cell" if self.cells else ""
            self.step.value = f"asking {self.model_name}{more} …"
        elif state == "fixing":
            self.step.value = f"asking {self.model_name} for a fix …"
        elif state in _FINAL_STYLE:
            self.bar.value = self.bar.max
            self.bar.bar_style = _FINAL_STYLE[state]
            self.step.value = end_words(RunState(state), reason)

    def _show_details(self) -> None:
        seconds = time.monotonic() - self.started
        cells = f"{self.cells} cell" + ("" if self.cells == 1 else "s")
        self.details.value = f"· {cells} · {self.tokens:,} tokens · {seconds:.0f} s"


def make_view(
    kind: str,
    errors: Mapping[str, Mapping[str, Any]],
    model_name: str,
    *,
    max_attempts: int = 1,
) -> ProgressView:
    """The view for ``kind`` (``"widgets"`` or ``"text"``); text when widgets cannot be made."""
    if kind == "widgets":
        # ipywidgets missing or broken, no comm: text it is.
        with contextlib.suppress(Exception):
            return WidgetProgress(errors, model_name, max_attempts=max_attempts)
    return TextProgress(errors, model_name)


__all__ = [
    "ProgressView",
    "TextProgress",
    "WidgetProgress",
    "choose_view",
    "make_view",
    "renders_widgets",
]
