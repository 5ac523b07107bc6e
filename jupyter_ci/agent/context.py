"""What the model is told about the notebook: cells above the anchor and the kernel's variables.

Everything here came from the notebook or the kernel, so it is wrapped as untrusted data. The
view fits a token budget: the nearest cells first (the ones just above the request matter most),
then shown in notebook order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from .digest import digest_outputs, head_tail, wrap_untrusted
from .workspace import Cell, Variable

#: Most characters of one cell's source and of one cell's output digest in the notebook view.
MAX_SOURCE_CHARS = 3000
MAX_OUTPUT_CHARS = 1500
MAX_VARIABLES = 60
#: Tags of cells the user keeps out of the context.
SKIP_TAG = "jupyter-ci-skip"


@dataclass(frozen=True)
class Context:
    """The rendered notebook view and variables, and what had to be left out."""

    notebook: str
    variables: str
    cells_shown: int
    cells_omitted: int
    variables_omitted: int


def withhold_outputs(cell: Cell) -> Cell:
    """The cell with only its error outputs (``share_outputs`` off)."""
    errors = [out for out in cell.outputs if out.get("output_type") == "error"]
    return replace(cell, outputs=errors)


def cells_above(cells: Sequence[Cell], anchor_id: str | None) -> list[Cell]:
    """The cells before ``anchor_id`` (all cells when None or not found), in notebook order."""
    if anchor_id is None:
        return list(cells)
    for index, cell in enumerate(cells):
        if cell.id == anchor_id:
            return list(cells[:index])
    return list(cells)


def describe_cell(cell: Cell, number: int) -> str:
    """One cell in the notebook view: a header line, its source, and its digested outputs."""
    source, _ = head_tail(cell.source, MAX_SOURCE_CHARS, unit="chars")
    if cell.cell_type != "code":
        return f"# cell {number} ({cell.cell_type})\n{source}"
    count = cell.execution_count if cell.execution_count is not None else " "
    parts = [f"# cell {number} (code, In [{count}])", source]
    if cell.outputs:
        digest = digest_outputs(cell.outputs, max_chars=MAX_OUTPUT_CHARS)
        parts.append(f"# output of cell {number}:\n{digest.text}")
    return "\n".join(parts)


def describe_variable(variable: Variable) -> str:
    """One line per variable: name, type, shape, columns, summary."""
    line = f"{variable.name}: {variable.type}"
    if variable.shape is not None:
        line += f", shape {tuple(variable.shape)}"
    if variable.columns:
        columns = variable.columns
        if variable.dtypes and len(variable.dtypes) == len(columns):
            columns = [f"{c} ({d})" for c, d in zip(columns, variable.dtypes, strict=True)]
        line += ", columns " + ", ".join(columns)
    if variable.summary:
        line += f" = {variable.summary}"
    return line


def build_context(
    cells: Sequence[Cell],
    variables: Sequence[Variable],
    *,
    anchor_id: str | None,
    budget_tokens: int,
    count_tokens: Callable[[str], int],
    nonce: str,
    share_outputs: bool = True,
) -> Context:
    """Fit the notebook view and the variables into ``budget_tokens``.

    Variables get up to a quarter of the budget; the notebook view the rest, nearest cells first.
    Cells tagged ``jupyter-ci-skip`` are never sent. Without ``share_outputs``, cells keep only
    their error outputs and variables lose their values (names, types and shapes stay).
    """
    visible = [
        (number, cell if share_outputs else withhold_outputs(cell))
        for number, cell in enumerate(cells_above(cells, anchor_id), start=1)
        if SKIP_TAG not in (cell.metadata.get("tags") or [])
    ]
    if not share_outputs:
        variables = [replace(variable, summary="") for variable in variables]
    variable_lines: list[str] = []
    variable_budget = budget_tokens // 4
    used = 0
    for variable in variables[:MAX_VARIABLES]:
        line = describe_variable(variable)
        cost = count_tokens(line) + 1
        if used + cost > variable_budget:
            break
        variable_lines.append(line)
        used += cost
    variables_omitted = len(variables) - len(variable_lines)
    if variables_omitted:
        variable_lines.append(f"[{variables_omitted} more variables not listed]")
    variables_text = (
        wrap_untrusted("\n".join(variable_lines), nonce, "kernel variables")
        if variable_lines
        else "The kernel has no user variables yet."
    )

    remaining = budget_tokens - used
    chosen: list[str] = []
    for number, cell in reversed(visible):
        text = describe_cell(cell, number)
        cost = count_tokens(text) + 2
        if cost > remaining:
            break
        chosen.append(text)
        remaining -= cost
    omitted = len(visible) - len(chosen)
    chosen.reverse()
    if omitted:
        chosen.insert(0, f"[{omitted} earlier cells not shown]")
    notebook_text = (
        wrap_untrusted("\n\n".join(chosen), nonce, "notebook cells")
        if visible
        else "The notebook has no cells above the request."
    )
    return Context(
        notebook_text, variables_text, len(visible) - omitted, omitted, variables_omitted
    )


def describe_attached(
    cells: Sequence[Cell], cell_ids: Sequence[str], *, nonce: str, share_outputs: bool = True
) -> str:
    """The cells the user attached to a request, numbered as in the notebook view ("" if none).

    Each with its source and digested outputs (only error outputs without ``share_outputs``);
    cells tagged ``jupyter-ci-skip`` are never sent, and a cell no longer in the notebook is said
    to be gone.
    """
    if not cell_ids:
        return ""
    numbers = {cell.id: (number, cell) for number, cell in enumerate(cells, start=1)}
    parts: list[str] = []
    for cell_id in dict.fromkeys(cell_ids):
        found = numbers.get(cell_id)
        if found is None:
            parts.append("[an attached cell is no longer in the notebook]")
            continue
        number, cell = found
        if SKIP_TAG in (cell.metadata.get("tags") or []):
            parts.append(f"[cell {number} is tagged {SKIP_TAG}: not shown]")
            continue
        parts.append(describe_cell(cell if share_outputs else withhold_outputs(cell), number))
    return wrap_untrusted("\n\n".join(parts), nonce, "cells the user attached")
