"""What a run of the agent loop is asked, and how it asks back.

:class:`RunRequest` is the request with its settings and place in the notebook; an
:data:`EventCallback` receives each run event; in review mode an :data:`Approver` is asked for
each new or fixed cell and answers with a :class:`ReviewDecision`. :mod:`jupyter_ci.agent.loop`
re-exports them all.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..settings import Settings

#: Receives each run event (a dict matching the protocol's RunEvent).
EventCallback = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class ReviewDecision:
    """The user's answer to a cell awaiting approval: ``run`` (maybe edited), ``ran`` (they ran
    it themselves) or ``reject``, with the user's comment on a Reject (their reason, for the
    model), if they gave one."""

    decision: str
    source: str | None = None
    comment: str | None = None


#: Asked, in review mode, for each new or fixed cell: (cell id, source, diff) → decision.
Approver = Callable[[str, str, str], Awaitable[ReviewDecision]]


@dataclass(frozen=True)
class RunRequest:
    """What to do: the request, its settings, and where in the notebook."""

    prompt: str
    settings: Settings
    #: Generated cells go after this cell (the ``%%ci`` cell, or where the panel's next cells go);
    #: None: at the end of the notebook. A place only: it says nothing of whose cells they are.
    anchor_id: str | None = None
    #: The ``%%ci`` cell whose request this is (None for the panel's): its generated cells carry
    #: it in their metadata hint. Which cells a run made is the run record's, never a position.
    origin_cell_id: str | None = None
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
    #: Cells of an earlier answer of the same ``%%ci`` that this run's first new cell replaces
    #: (``--regenerate``, or asking again after a failure), by id, with the hash of the source
    #: the record holds for each: only a cell whose source still has it (unedited) is deleted,
    #: checked when the new cell comes, so a cell the user edits meanwhile is kept.
    replaces: Mapping[str, str] = field(default_factory=dict)
    #: The project's instructions, as the system prompt carries them ('' for none; see
    #: :mod:`jupyter_ci.agent.instructions`).
    instructions: str = ""
