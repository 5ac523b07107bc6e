"""How a run stands and how it ended, in words: the status line, composed here only.

The loop puts the line in every ``state`` and ``finished`` event (``text``); the labextension,
the magic, the CLI and the server's log show that text as it is. The words for each end reason
come from the protocol's schema (:func:`jupyter_ci.vocabulary.reason_words`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import JupyterCIError
from ..models.base import TokenUsage
from ..vocabulary import constant, reason_words
from .extract import fenced
from .states import RunState

PREFIX = "jupyter-ci: "


def prefix(agent: str | None = None) -> str:
    """How a status line begins: ``jupyter-ci: ``, or ``claude-code via jupyter-ci: `` for an
    outside agent's run (an MCP client's call)."""
    return PREFIX if agent is None else f"{agent} via {PREFIX}"


def usage_dict(usage: TokenUsage) -> dict[str, Any]:
    """The protocol's Usage of a run's token usage."""
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "cost": usage.cost,
    }


def live_line(
    state: RunState,
    attempt: int | None = None,
    max_attempts: int | None = None,
    reason: str = "",
    *,
    agent: str | None = None,
) -> str:
    """The status line of a run that is not over ("jupyter-ci: executing — attempt 2/3");
    ``agent`` names the outside agent whose call the run is."""
    start = prefix(agent)
    if state is RunState.QUEUED:
        return start + "queued behind another request in this kernel"
    if state is RunState.AWAITING_APPROVAL and reason == "missing_package":
        return start + "a package is missing — install it and continue?"
    if agent is not None:
        return start + _AGENT_WORDS.get(state, str(state.value).replace("_", " "))
    line = start + str(state.value).replace("_", " ")
    if attempt is not None and max_attempts is not None:
        line += f" — attempt {attempt}/{max_attempts}"
    return line


#: What an outside agent's run is doing, by state (it has one cell and one try).
_AGENT_WORDS = {
    RunState.GENERATING: "writing a cell",
    RunState.AWAITING_APPROVAL: "waiting for your review",
    RunState.EXECUTING: "running a cell",
}


#: The reason of the ``state`` events sent when the model starts and ends waiting out a rate
#: limit (the state is unchanged; only its line changes).
RATE_LIMITED: str = constant("RateLimitedReason")


def rate_limited_line(seconds: float, retry: int, retries: int) -> str:
    """The status line while the model waits out a rate limit ("retrying in 6 s (1/2)")."""
    return f"{PREFIX}rate limited — retrying in {max(1, round(seconds))} s ({retry}/{retries})"


def end_words(state: RunState, reason: str) -> str:
    """How a run ended, in words ("done", "failed (the cell still failed ...)")."""
    words = reason_words().get(reason, reason.replace("_", " "))
    if state is RunState.DONE and reason in ("answered", "called", ""):
        return "done"
    if state is RunState.STOPPED and reason == "user":
        return words
    return f"{state.value} ({words})" if words else state.value


def cost_words(usage: TokenUsage) -> str:
    """A run's cost in words: "$0.0123", "cost unknown" (tokens at an unknown price), or "no
    cost" when no token was spent (a run that failed before the model answered), whatever the
    model's price: the panel's usage line says the same (steps.ts, usageLine)."""
    if usage.total_tokens == 0:
        return "no cost"
    return "cost unknown" if usage.cost is None else f"${usage.cost:.4f}"


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}" + ("" if count == 1 else "s")


@dataclass
class RunOutcome:
    """How a run ended, with everything its status line needs."""

    run_id: str
    state: RunState
    reason: str
    error: JupyterCIError | None
    cells: list[str]
    attempts: int
    usage: TokenUsage
    seconds: float
    answer: str = ""
    notices: list[str] = field(default_factory=list)
    #: The user's code was put back into their cell: the model's proposal was not accepted.
    users_code_back: bool = False
    #: The outside agent whose call the run was (no model calls: no tokens nor cost to tell).
    agent: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the run finished (``done``)."""
        return self.state is RunState.DONE

    def summary(self) -> dict[str, Any]:
        """The protocol's RunSummary."""
        return {
            "cells": len(self.cells),
            "attempts": self.attempts,
            "usage": usage_dict(self.usage),
            "seconds": round(self.seconds, 3),
        }

    def status_line(self) -> str:
        """One line: how it ended (and that the user's code is back in their cell, when it
        is), cells, attempts, tokens, cost, time (an outside agent's run: how it ended, cells
        and time)."""
        back = ", your code is back" if self.users_code_back else ""
        if self.agent is not None:
            numbers = f"{_plural(len(self.cells), 'cell')}, {self.seconds:.1f} s"
            return f"{prefix(self.agent)}{end_words(self.state, self.reason)}{back} — {numbers}"
        cost = cost_words(self.usage)
        tokens = _plural(self.usage.total_tokens, "token")
        if self.usage.estimated:
            tokens += " (est.)"
        numbers = ", ".join(
            (
                _plural(len(self.cells), "cell"),
                _plural(self.attempts, "attempt"),
                tokens,
                cost,
                f"{self.seconds:.1f} s",
            )
        )
        return f"{PREFIX}{end_words(self.state, self.reason)}{back} — {numbers}"


def rejection_text(source: str, comment: str | None = None) -> str:
    """What the conversation keeps when the user rejects a proposed cell in review mode (with
    their reason, if they gave one)."""
    code = source.rstrip("\n")
    shown = f"\n\n{fenced(code)}" if code else ""
    reason = f"\n\nMy reason: {comment}" if comment else ""
    return f"I rejected the cell you proposed, without running it.{reason}{shown}"
