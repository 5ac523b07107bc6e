"""The workspace: the hands the agent loop acts through.

Three implementations serve the same loop: the browser's notebook in JupyterLab (over the
server's websocket), a kernel plus an ``.ipynb`` file (headless ``jupyter ci run``), and the IPython
shell the magic runs in (no frontend). The loop never knows which one it has.

Who does what:

- The **loop** decides which cell to insert, replace or run, and computes diffs: it holds the
  source before and after a fix, so a workspace never diffs.
- The **workspace** finds cells by id only (never "the active cell"), runs them in the user's
  kernel, and returns their outputs as nbformat dicts, capped by the workspace where they are
  produced (the browser caps before sending).
- Timeouts are counted by the workspace from the moment the kernel starts the cell, not from
  when it was queued; on expiry it interrupts the kernel only if that cell is still the one
  running.
- How a cell ended is decided by :func:`jupyter_ci.execution.status.classify` from the raw
  facts the workspace gathered; the loop reads only the resulting :class:`CellStatus`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..execution.status import CellStatus
from .files import Snapshot


@dataclass(frozen=True)
class Cell:
    """A notebook cell as the loop sees it."""

    id: str
    cell_type: str  # "code", "markdown" or "raw"
    source: str
    outputs: list[dict[str, Any]] = field(default_factory=list)
    execution_count: int | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Execution:
    """The result of running one cell."""

    cell_id: str
    status: CellStatus
    outputs: list[dict[str, Any]]
    execution_count: int | None = None
    #: Seconds from the kernel starting the cell to its end (None when it never started).
    duration: float | None = None
    #: The text/plain value of the ``expression`` given to :meth:`Workspace.run_cell`, evaluated
    #: in the cell's own request; None when it was not (a failed cell, a workspace that can't).
    expression_value: str | None = None

    @property
    def error(self) -> dict[str, Any] | None:
        """The first ``error`` output, if any."""
        return next((out for out in self.outputs if out.get("output_type") == "error"), None)


@dataclass(frozen=True)
class Variable:
    """One variable in the kernel's namespace, summarised without expensive calls.

    ``shape``, ``columns`` and ``dtypes`` are set for arrays and data frames; ``summary`` is a
    short, capped description (never a full ``repr`` of an object of unknown cost).
    """

    name: str
    type: str
    summary: str = ""
    shape: tuple[int, ...] | None = None
    columns: list[str] | None = None
    dtypes: list[str] | None = None


@runtime_checkable
class Workspace(Protocol):
    """What the agent loop may do to a notebook and its kernel."""

    async def read_cells(self, *, outputs: bool = True) -> list[Cell]:
        """All cells of the notebook, in order, with their ids, sources and outputs. Without
        ``outputs`` a workspace may leave the outputs out (the browser tab does: a read of
        sources then stays small, whatever the notebook's outputs)."""
        ...

    async def insert_cell(
        self,
        after_id: str | None,
        source: str = "",
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        """Insert a code cell after the cell ``after_id`` (at the top when None); return its id.

        An empty ``source`` inserts an empty cell to stream into with :meth:`append_source`.
        """
        ...

    async def append_source(self, cell_id: str, text: str) -> None:
        """Append streamed text to a cell's source (outside the undo history where there is one)."""
        ...

    async def replace_source(self, cell_id: str, source: str, *, undoable: bool = False) -> None:
        """Replace a cell's whole source (a fix; the loop has shown the diff).

        ``undoable``: the cell is the user's (a fix of their cell), and the change goes into its
        undo history where there is one (one Ctrl+Z in the editor brings their code back);
        otherwise it stays out of it, as streamed code does.
        """
        ...

    async def delete_cell(self, cell_id: str) -> None:
        """Delete a generated cell (an unedited cell of the ``%%ci``'s earlier answer its new one
        replaces; a cell stopped before any code)."""
        ...

    async def run_cell(
        self, cell_id: str, timeout: float, expression: str | None = None
    ) -> Execution:
        """Run the cell in the kernel and wait for it; ``timeout`` seconds (0 = none).

        A kernel that dies, is shut down or restarted meanwhile ends the execution with the
        status that says so; it does not raise. ``expression`` (the files snapshot) may be
        evaluated with the cell, in the same request, into ``expression_value``: a workspace that
        cannot leaves it None, and the caller asks again separately.
        """
        ...

    async def inspect_variables(self) -> list[Variable]:
        """The user's variables, gathered without touching ``In``/``Out``, history or the count."""
        ...

    async def snapshot_files(self, root: str | None) -> Snapshot | None:
        """The files of the kernel's working folder (``root``; None: the one it has now), read
        by :data:`~jupyter_ci.agent.files.SNAPSHOT_SOURCE` as the variables are; None when the
        kernel cannot say (another language)."""
        ...

    async def fix_context(self, ename: str, evalue: str, code: str) -> list[str]:
        """What is there that the failure of ``code`` (``ename: evalue``) is about, read from
        the kernel by :data:`~jupyter_ci.agent.fix_context.FIX_CONTEXT_SOURCE` as the variables
        are: lines for the model; [] when nothing fits or the kernel cannot say."""
        ...

    async def figure_notes(self, read: bool) -> list[str]:
        """Start noting the matplotlib figures the kernel displays (once; silently, see
        :mod:`~jupyter_ci.agent.figures`) and, with ``read``, the notes taken since the last
        read (taken away): lines for a model that does not see images; [] when none or the
        kernel cannot say."""
        ...

    async def interrupt(self) -> None:
        """Interrupt the kernel (Stop): the running cell ends ``interrupted``."""
        ...
