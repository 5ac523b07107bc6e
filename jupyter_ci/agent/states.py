"""The run state machine shared by the magic, the panel and the CLI.

::

    queued → generating → awaiting_approval → executing → fixing → … → done | failed | stopped

- ``generating``: the model is writing (the first cell, or the next step after a success).
- ``awaiting_approval``: review mode; a new or fixed cell waits for Run, Edit or Reject.
- ``executing``: a cell runs in the kernel.
- ``fixing``: a cell failed; the model is writing its fix (an attempt, not a step).
- ``done``: finished; ``failed``: ended by an error; ``stopped``: ended by the user, a
  disconnect, or a cap. Each end carries a reason.

Transitions outside :data:`TRANSITIONS` are bugs and raise :class:`InvalidTransition`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import Enum

from ..errors import InternalError
from ..vocabulary import end_reasons, terminal_states


class RunState(str, Enum):
    """Where a run is."""

    QUEUED = "queued"
    GENERATING = "generating"
    AWAITING_APPROVAL = "awaiting_approval"
    EXECUTING = "executing"
    FIXING = "fixing"
    DONE = "done"
    FAILED = "failed"
    STOPPED = "stopped"

    @property
    def terminal(self) -> bool:
        """Whether a run in this state is over."""
        return self in TERMINAL


#: The states a run ends in (from the protocol's schema, as the labextension has them).
TERMINAL = frozenset(RunState(state) for state in terminal_states())
_ENDS = frozenset({RunState.FAILED, RunState.STOPPED})

#: The allowed moves. Every live state may end in ``failed`` or ``stopped``.
TRANSITIONS: dict[RunState, frozenset[RunState]] = {
    RunState.QUEUED: frozenset({RunState.GENERATING}) | _ENDS,
    RunState.GENERATING: frozenset(
        {
            RunState.FIXING,  # "fix this cell": the model writes a fix of an existing cell
            RunState.AWAITING_APPROVAL,  # review mode: a new cell waits for approval
            RunState.EXECUTING,  # auto mode: the new cell runs
            RunState.DONE,  # a reply without code is the answer; insert mode ends here
        }
    )
    | _ENDS,
    RunState.AWAITING_APPROVAL: frozenset(
        {
            RunState.EXECUTING,  # approved (possibly after the user's edit)
            RunState.GENERATING,  # rejected: the model is told and writes again
            RunState.DONE,  # rejected with nothing further to do
        }
    )
    | _ENDS,
    RunState.EXECUTING: frozenset(
        {
            RunState.GENERATING,  # success: the next step
            RunState.FIXING,  # error or timeout: the model writes a fix
            RunState.AWAITING_APPROVAL,  # a package install or an own fix waits for approval
            RunState.DONE,  # success and max_steps reached
        }
    )
    | _ENDS,
    RunState.FIXING: frozenset(
        {
            RunState.AWAITING_APPROVAL,  # review mode: the fix waits for approval
            RunState.EXECUTING,  # the fix runs
            RunState.GENERATING,  # check_results: the model kept a result that looked wrong
            RunState.DONE,  # insert mode: a fix of the user's cell is written, not run
        }
    )
    | _ENDS,
    RunState.DONE: frozenset(),
    RunState.FAILED: frozenset(),
    RunState.STOPPED: frozenset(),
}

#: Reasons a run ends with, by final state (from the protocol's schema, with the words shown
#: for each: :func:`jupyter_ci.vocabulary.reason_words`).
END_REASONS: dict[RunState, frozenset[str]] = {
    RunState(state): frozenset(reasons) for state, reasons in end_reasons().items()
}


class InvalidTransition(InternalError):
    """A move the state machine does not allow: a bug in the caller."""

    code = "invalid_transition"


@dataclass(frozen=True)
class Transition:
    """One move: from, to, why, and when (``time.time()``)."""

    source: RunState
    target: RunState
    reason: str
    at: float


@dataclass
class RunStateMachine:
    """The state of one run, with its history of moves."""

    state: RunState = RunState.QUEUED
    reason: str = ""
    history: list[Transition] = field(default_factory=list)

    def advance(self, target: RunState, reason: str = "") -> Transition:
        """Move to ``target``; an end state needs one of :data:`END_REASONS`."""
        if target not in TRANSITIONS[self.state]:
            raise InvalidTransition(f"run cannot go from {self.state.value} to {target.value}")
        if target in TERMINAL and reason not in END_REASONS[target]:
            allowed = ", ".join(sorted(END_REASONS[target]))
            raise InvalidTransition(
                f"a run ending {target.value} needs a reason ({allowed}); got {reason!r}"
            )
        move = Transition(self.state, target, reason, time.time())
        self.history.append(move)
        self.state = target
        self.reason = reason
        return move

    @property
    def terminal(self) -> bool:
        """Whether the run is over."""
        return self.state.terminal
