"""The run state machine: every allowed move, and refusals of the rest."""

from __future__ import annotations

import itertools

import pytest

from jupyter_ci.agent.states import (
    END_REASONS,
    TERMINAL,
    TRANSITIONS,
    InvalidTransition,
    RunState,
    RunStateMachine,
)
from jupyter_ci.errors import InternalError

S = RunState


def machine_at(state: RunState) -> RunStateMachine:
    path = {
        S.QUEUED: [],
        S.GENERATING: [S.GENERATING],
        S.EXECUTING: [S.GENERATING, S.EXECUTING],
        S.FIXING: [S.GENERATING, S.EXECUTING, S.FIXING],
        S.AWAITING_APPROVAL: [S.GENERATING, S.AWAITING_APPROVAL],
    }[state]
    machine = RunStateMachine()
    for step in path:
        machine.advance(step)
    return machine


def test_a_fixed_run_in_review_mode() -> None:
    machine = RunStateMachine()
    for target in [
        S.GENERATING,
        S.AWAITING_APPROVAL,
        S.EXECUTING,
        S.FIXING,
        S.AWAITING_APPROVAL,
        S.EXECUTING,
        S.GENERATING,
    ]:
        machine.advance(target)
    machine.advance(S.DONE, "answered")
    assert machine.terminal
    assert machine.reason == "answered"
    assert [move.target for move in machine.history][-2:] == [S.GENERATING, S.DONE]
    assert machine.history[0].source is S.QUEUED


@pytest.mark.parametrize(
    ("source", "target"),
    [
        (source, target)
        for source, target in itertools.product(RunState, RunState)
        if source not in TERMINAL and target not in TERMINAL
    ],
)
def test_live_moves_follow_the_table(source: RunState, target: RunState) -> None:
    machine = machine_at(source)
    if target in TRANSITIONS[source]:
        assert machine.advance(target).target is target
        assert machine.state is target
    else:
        with pytest.raises(InvalidTransition, match=f"from {source.value} to {target.value}"):
            machine.advance(target)
        assert machine.state is source


@pytest.mark.parametrize("source", [s for s in RunState if s not in TERMINAL])
def test_every_live_state_can_fail_or_stop(source: RunState) -> None:
    machine_at(source).advance(S.FAILED, "model_error")
    machine_at(source).advance(S.STOPPED, "user")


@pytest.mark.parametrize("end", sorted(TERMINAL))
def test_ends_are_final(end: RunState) -> None:
    machine = RunStateMachine()
    machine.advance(S.GENERATING)
    machine.advance(S.EXECUTING)
    reason = sorted(END_REASONS[end])[0]
    machine.advance(end, reason)
    for target in RunState:
        with pytest.raises(InvalidTransition):
            machine.advance(target, reason)


def test_ending_needs_a_known_reason() -> None:
    machine = machine_at(S.EXECUTING)
    with pytest.raises(InvalidTransition, match="needs a reason"):
        machine.advance(S.FAILED)
    with pytest.raises(InvalidTransition, match="needs a reason"):
        machine.advance(S.STOPPED, "bored")
    assert machine.state is S.EXECUTING


def test_invalid_transition_is_an_internal_error() -> None:
    assert issubclass(InvalidTransition, InternalError)
    assert not InvalidTransition.feed_back


def test_the_status_line_says_no_cost_when_no_token_was_spent() -> None:
    from jupyter_ci.agent.outcome import RunOutcome, rate_limited_line
    from jupyter_ci.agent.states import RunState
    from jupyter_ci.models.base import TokenUsage

    def line(usage: TokenUsage) -> str:
        return RunOutcome(
            "r", RunState.FAILED, "model_error", None, [], 0, usage, 0.4
        ).status_line()

    # A run that failed before the model answered: nothing was spent, at any price.
    assert line(TokenUsage()).endswith("0 tokens, no cost, 0.4 s")
    assert line(TokenUsage(0, 0, None)).endswith("0 tokens, no cost, 0.4 s")
    assert line(TokenUsage(10, 2, None)).endswith("12 tokens, cost unknown, 0.4 s")
    assert line(TokenUsage(10, 2, 0.0012)).endswith("12 tokens, $0.0012, 0.4 s")
    assert rate_limited_line(6.2, 1, 2) == "jupyter-ci: rate limited — retrying in 6 s (1/2)"
