"""The protocol schema and its Python types: they agree, and messages round-trip through both."""

from __future__ import annotations

import json
import typing
from typing import Any

import pytest

from jupyter_ci import protocol, vocabulary
from jupyter_ci.agent.states import END_REASONS, TERMINAL, RunState
from jupyter_ci.execution.status import CellStatus
from jupyter_ci.options import MODES

DEFS = protocol.schema()["$defs"]
UNIONS = {
    "RunEvent": protocol.RunEvent,
    "Call": protocol.Call,
    "CallReply": protocol.CallReply,
    "ClientRequest": protocol.ClientRequest,
    "RequestReply": protocol.RequestReply,
    "Notice": protocol.Notice,
}
#: Unions of unions: the schema lists the member unions; Python flattens them.
NESTED = {
    "ServerMessage": (protocol.ServerMessage, ["RunEvent", "Call", "RequestReply", "Notice"]),
    "ClientMessage": (protocol.ClientMessage, ["ClientRequest", "CallReply", "CallProgress"]),
}
ENUMS = {
    "RunState": [s.value for s in RunState],
    "TerminalRunState": [s.value for s in RunState if s in TERMINAL],
    "ReplyStatus": list(typing.get_args(protocol.ReplyStatusName)),
    "Mode": list(MODES),
}
#: Definitions that are a oneOf of titled constants, and the Python values they must match.
CHOICES = {
    "CellStatus": [s.value for s in CellStatus],
    "DoneReason": sorted(END_REASONS[RunState.DONE]),
    "FailedReason": sorted(END_REASONS[RunState.FAILED]),
    "StoppedReason": sorted(END_REASONS[RunState.STOPPED]),
}
#: Read by jupyter_ci.vocabulary (tested in test_vocabulary.py).
VOCABULARY = {
    "EndReason",
    "CICellPattern",
    "ProtocolVersion",
    "HandoffMime",
    "StatusMime",
    "HandoffErrorName",
    "HeldBackErrorName",
    "ResumeMetadataKey",
    "RunMetadataKey",
    "CellMetadataKey",
    "ReplyGraceSeconds",
    "RateLimitedReason",
    "LooksWrongReason",
}
OPAQUE = {"Output"}  # nbformat's own output shapes, passed through as dicts


def schema_fields(definition: dict[str, Any]) -> tuple[set[str], set[str]]:
    """All properties and required ones of a definition, following allOf references."""
    props = set(definition.get("properties", {}))
    required = set(definition.get("required", []))
    for part in definition.get("allOf", []):
        base = DEFS[part["$ref"].split("/")[-1]]
        more_props, more_required = schema_fields(base)
        props |= more_props
        required |= more_required
    return props, required


def test_every_definition_has_a_python_counterpart() -> None:
    covered = set(protocol.TYPES) | set(UNIONS) | set(NESTED) | set(ENUMS) | set(CHOICES)
    covered |= VOCABULARY | OPAQUE
    assert set(DEFS) == covered


@pytest.mark.parametrize("name", sorted(protocol.TYPES))
def test_typeddict_fields_match_the_schema(name: str) -> None:
    cls = protocol.TYPES[name]
    props, required = schema_fields(DEFS[name])
    py_required = set(cls.__required_keys__)  # type: ignore[attr-defined]
    py_optional = set(cls.__optional_keys__)  # type: ignore[attr-defined]
    assert py_required | py_optional == props, f"{name}: fields differ"
    assert py_required == required, f"{name}: required fields differ"


@pytest.mark.parametrize("name", sorted(UNIONS))
def test_unions_list_the_same_members(name: str) -> None:
    members = {ref["$ref"].split("/")[-1] for ref in DEFS[name]["oneOf"]}
    assert {cls.__name__ for cls in typing.get_args(UNIONS[name])} == members


@pytest.mark.parametrize("name", sorted(NESTED))
def test_nested_unions_cover_their_members(name: str) -> None:
    union, members = NESTED[name]
    assert [ref["$ref"].split("/")[-1] for ref in DEFS[name]["oneOf"]] == members
    flat: set[str] = set()
    for member in members:
        inner = UNIONS.get(member)
        flat |= {c.__name__ for c in typing.get_args(inner)} if inner else {member}
    assert {cls.__name__ for cls in typing.get_args(union)} == flat


@pytest.mark.parametrize("name", sorted(ENUMS))
def test_enums_match_the_python_enums(name: str) -> None:
    assert DEFS[name]["enum"] == ENUMS[name]


@pytest.mark.parametrize("name", sorted(CHOICES))
def test_titled_choices_match_python_and_each_has_words(name: str) -> None:
    values = [choice["const"] for choice in DEFS[name]["oneOf"]]
    assert sorted(values) == sorted(CHOICES[name])
    assert all(choice["title"].strip() for choice in DEFS[name]["oneOf"])


def test_cell_status_literal_and_terminal_states_follow_the_schema() -> None:
    assert list(typing.get_args(protocol.CellStatusName)) == [s.value for s in CellStatus]
    assert list(typing.get_args(protocol.TerminalRunStateName)) == list(
        vocabulary.terminal_states()
    )


def test_literal_tags_match_the_schema_consts() -> None:
    for name, cls in protocol.TYPES.items():
        hints = typing.get_type_hints(cls)
        for tag in ("type", "method", "request", "progress"):
            if tag in DEFS[name].get("properties", {}) and "const" in DEFS[name]["properties"][tag]:
                assert typing.get_args(hints[tag]) == (DEFS[name]["properties"][tag]["const"],)


USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "cost": None}
RUN_INFO = {
    "run_id": "r1",
    "notebook_path": "a.ipynb",
    "kernel_id": "k-1",
    "owner": "tab-0123456789",
    "origin": "panel",
    "state": "executing",
    "prompt": "plot",
    "anchor_cell_id": None,
    "position": 0,
    "last_seq": 12,
}
BASE = {"run_id": "r1", "seq": 3, "time": 1700000000.5}
VALID: list[tuple[str, dict[str, Any]]] = [
    (
        "RunEvent",
        {
            **BASE,
            "type": "state",
            "state": "fixing",
            "reason": "",
            "text": "jupyter-ci: fixing — attempt 2/3",
        },
    ),
    ("RunEvent", {**BASE, "type": "token", "text": "impo", "cell_id": "c1", "part": "code"}),
    (
        "RunEvent",
        {
            **BASE,
            "type": "cell_inserted",
            "cell_id": "c2",
            "after_id": None,
            "source": "",
            "step": 1,
        },
    ),
    (
        "RunEvent",
        {
            **BASE,
            "type": "cell_updated",
            "cell_id": "c2",
            "source": "x",
            "diff": "-y\n+x",
            "attempt": 2,
            "cause": "fix",
        },
    ),
    (
        "RunEvent",
        {
            **BASE,
            "type": "execution_finished",
            "cell_id": "c2",
            "status": "timed_out",
            "execution_count": None,
            "digest": "…",
            "duration": 120.0,
        },
    ),
    (
        "RunEvent",
        {
            **BASE,
            "type": "finished",
            "state": "failed",
            "reason": "max_attempts",
            "error": {"code": "cell_error", "message": "NameError: x", "hint": ""},
            "summary": {"cells": 1, "attempts": 3, "usage": USAGE, "seconds": 4.2},
            "answer": "",
            "text": "jupyter-ci: failed (the cell still failed at the last attempt) — 1 cell",
        },
    ),
    ("RunEvent", {**BASE, "type": "usage", "usage": {**USAGE, "cost": 0.0012}}),
    (
        "Call",
        {
            "call_id": "k1",
            "run_id": "r1",
            "notebook_path": "a/b.ipynb",
            "method": "insert_cell",
            "after_id": "c1",
            "source": "",
            "metadata": {"jupyter_ci": {"run_id": "r1"}},
        },
    ),
    ("Call", {"call_id": "k2", "run_id": "r1", "notebook_path": "b.ipynb", "method": "interrupt"}),
    (
        "Call",
        {
            "call_id": "k5",
            "run_id": "r1",
            "notebook_path": "b.ipynb",
            "method": "evaluate",
            "expression": "1",
        },
    ),
    (
        "CallReply",
        {
            "call_id": "k3",
            "ok": True,
            "reply_status": "ok",
            "execution_count": 4,
            "started_at": 1.0,
            "outputs": [{"output_type": "stream", "name": "stdout", "text": "hi\n"}],
        },
    ),
    (
        "CallReply",
        {
            "call_id": "k4",
            "ok": False,
            "error": {"code": "cell_not_found", "message": "no cell c9"},
        },
    ),
    ("CallProgress", {"call_id": "k3", "progress": "started", "started_at": 2.5}),
    (
        "ClientRequest",
        {
            "request": "start_run",
            "request_id": "q1",
            "notebook_path": "a.ipynb",
            "kernel_id": "k-1",
            "prompt": "plot $x {y}",
            "options": {"max_attempts": 2},
            "anchor_cell_id": "c0",
            "handoff_nonce": None,
        },
    ),
    (
        "ClientRequest",
        {
            "request": "review",
            "run_id": "r1",
            "cell_id": "c2",
            "decision": "run",
            "source": "print(1)",
        },
    ),
    ("ClientRequest", {"request": "replay", "run_id": "r1", "after_seq": 0}),
    (
        "ClientRequest",
        {
            "request": "start_run",
            "notebook_path": "a.ipynb",
            "kernel_id": "k-1",
            "prompt": "plot",
            "options": {},
            "anchor_cell_id": "c0",
            "handoff_nonce": "0123456789abcdef0123",
            "origin": "magic",
            "regenerate": True,
            "session_options": {"max_attempts": 2},
            "user_options": {"mode": "review"},
        },
    ),
    (
        "ClientMessage",
        {
            "request": "hello",
            "request_id": "q0",
            "client_id": "tab-0123456789",
            "protocol_version": 1,
            "notebook_paths": ["a.ipynb"],
        },
    ),
    ("ClientMessage", {"request": "subscribe", "notebook_paths": []}),
    ("ClientMessage", {"call_id": "k3", "progress": "started", "started_at": 2.5}),
    ("ServerMessage", {"reply_to": "q1", "ok": True, "run_id": "r1", "position": 0}),
    (
        "ServerMessage",
        {
            "reply_to": "q1",
            "ok": False,
            "error": {"code": "kernel_busy", "message": "busy", "hint": "Stop it first."},
            "run_id": "r0",
        },
    ),
    ("ServerMessage", {"notice": "runs", "runs": [RUN_INFO]}),
    ("ServerMessage", {"notice": "error", "error": {"code": "bad_message", "message": "x"}}),
    ("ServerMessage", {**BASE, "type": "usage", "usage": USAGE}),
    (
        "ServerMessage",
        {"call_id": "k", "run_id": "r", "notebook_path": "n", "method": "read_cells"},
    ),
    ("RequestReply", {"reply_to": "q0", "ok": True, "runs": [], "server_version": "0.1.0"}),
    (
        "ClientRequest",
        {
            "request": "preview",
            "request_id": "q5",
            "notebook_path": "a.ipynb",
            "kernel_id": "k-1",
            "prompt": "",
            "options": {},
            "anchor_cell_id": None,
            "fix_cell_id": "c3",
            "attachments": ["data/iris.csv"],
        },
    ),
    (
        "RequestReply",
        {
            "reply_to": "q5",
            "ok": True,
            "preview": {
                "model": "openai/scripted",
                "messages": [{"role": "system", "content": "You are jupyter-ci", "tokens": 5}],
                "prompt_tokens": 5,
                "context_tokens": 8000,
            },
        },
    ),
    (
        "Handoff",
        {
            "version": 1,
            "prompt": "plot the iris data",
            "options": {},
            "cell_id": "c0",
            "nonce": "0123456789abcdef0123",
            "jupyter_ci_version": "0.1.0",
            "session_options": {"max_attempts": 2},
            "regenerate": False,
            "kernel_session": "a1b2c3",
        },
    ),
    (
        "Call",
        {
            "call_id": "k9",
            "run_id": "r",
            "notebook_path": "n",
            "method": "delete_cell",
            "cell_id": "c5",
        },
    ),
]


@pytest.mark.parametrize(("definition", "message"), VALID)
def test_valid_messages_round_trip(definition: str, message: dict[str, Any]) -> None:
    again = json.loads(json.dumps(message))
    assert again == message
    protocol.validate(definition, again)


INVALID: list[tuple[str, dict[str, Any], str]] = [
    ("RunEvent", {**BASE, "type": "state", "state": "dancing", "reason": ""}, "state"),
    ("RunEvent", {**BASE, "type": "token", "text": "x"}, ""),
    ("RunEvent", {**BASE, "seq": 0, "type": "usage", "usage": USAGE}, ""),
    ("RunEvent", {**BASE, "type": "usage", "usage": USAGE, "key": "sk-1"}, ""),
    ("Call", {"call_id": "k", "run_id": "r", "method": "interrupt"}, ""),
    ("Call", {"call_id": "k", "run_id": "r", "notebook_path": "n", "method": "rm_rf"}, ""),
    ("CallReply", {"call_id": "k", "ok": False}, ""),
    (
        "ClientRequest",
        {
            "request": "start_run",
            "notebook_path": "a",
            "kernel_id": "k",
            "prompt": "",
            "options": {},
            "anchor_cell_id": None,
            "handoff_nonce": None,
        },
        "",
    ),
    (
        "ClientRequest",
        {
            "request": "start_run",
            "notebook_path": "a",
            "prompt": "p",
            "options": {},
            "anchor_cell_id": None,
            "handoff_nonce": None,
        },
        "",
    ),
    (
        "ClientMessage",
        {"request": "hello", "client_id": "short", "protocol_version": 1, "notebook_paths": []},
        "",
    ),
    ("RunInfo", {**RUN_INFO, "position": -1}, "position"),
    ("ServerMessage", {"reply_to": "q", "ok": False}, ""),
    ("Notice", {"notice": "runs", "runs": [{**RUN_INFO, "api_key": "sk-1"}]}, ""),
    (
        "Handoff",
        {
            "version": 2,
            "prompt": "p",
            "options": {},
            "cell_id": "c",
            "nonce": "0" * 16,
            "jupyter_ci_version": "9",
            "session_options": {},
            "regenerate": False,
            "kernel_session": "s",
        },
        "version",
    ),
]


@pytest.mark.parametrize(("definition", "message", "where"), INVALID)
def test_invalid_messages_are_refused(definition: str, message: dict[str, Any], where: str) -> None:
    with pytest.raises(ValueError, match=f"invalid {definition}") as err:
        protocol.validate(definition, message)
    assert where in str(err.value)


def test_unknown_definition() -> None:
    with pytest.raises(KeyError, match="no definition"):
        protocol.validate("Nope", {})


def test_handoff_constants() -> None:
    assert protocol.HANDOFF_MIME == "application/vnd.jupyter-ci.handoff+json"
    assert DEFS["Handoff"]["properties"]["version"]["const"] == protocol.PROTOCOL_VERSION
