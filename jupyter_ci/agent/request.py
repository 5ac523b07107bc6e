"""What a run of the agent loop is asked, and how it asks back.

:class:`RunRequest` is the request with its settings and place in the notebook; an
:data:`EventCallback` receives each run event; in review mode an :data:`Approver` is asked for
each new or fixed cell and answers with a :class:`ReviewDecision`. :mod:`jupyter_ci.agent.loop`
re-exports them all.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..settings import Settings

#: Receives each run event (a dict matching the protocol's RunEvent).
EventCallback = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class ReviewDecision:
    """The user's answer to a cell awaiting approval: ``run`` (maybe edited) or ``reject``."""

    decision: str
    source: str | None = None


#: Asked, in review mode, for each new or fixed cell: (cell id, source, diff) → decision.
Approver = Callable[[str, str, str], Awaitable[ReviewDecision]]


@dataclass(frozen=True)
class RunRequest:
    """What to do: the request, its settings, and where in the notebook."""

    prompt: str
    settings: Settings
    #: Generated cells go after this cell (the ``%%ci`` cell); None: at the end of the notebook.
    anchor_id: str | None = None
    #: Earlier messages of this notebook's conversation (user/assistant turns).
    history: Sequence[dict[str, Any]] = ()
    #: "Fix with jupyter-ci": the cell whose code the run fixes in place (no new cells).
    fix_cell_id: str | None = None
    #: More context the user attached (files they picked), shown to the model as data.
    attachments: str = ""
    #: Cells the user attached (by id): their code and outputs go with the request.
    attached_cells: tuple[str, ...] = ()
    #: Notices the notebook's conversation already holds: said once, not again every run.
    said: frozenset[str] = frozenset()
    #: The project's instructions, as the system prompt carries them ('' for none; see
    #: :mod:`jupyter_ci.agent.instructions`).
    instructions: str = ""
