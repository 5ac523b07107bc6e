"""Python types of jupyter-ci's protocol, and validation against its JSON Schema.

The schema (``jupyter_ci/schema/protocol.schema.json``) is the source of truth. The TypedDicts here
mirror its definitions one to one (``tests/test_protocol.py`` fails when they drift apart); the
TypeScript types in ``labextension/src/protocol.ts`` are generated from the same file. The types
are kept by kind (:mod:`.records`, :mod:`.events`, :mod:`.calls`, :mod:`.requests`) and are all
imported from here.
"""

import json
from functools import cache
from importlib import resources
from typing import Any

from ..vocabulary import constant
from .calls import (
    AppendSourceCall,
    Call,
    CallBase,
    CallFailure,
    CallProgress,
    CallReply,
    CallResult,
    DeleteCellCall,
    EvaluateCall,
    InsertCellCall,
    InterruptCall,
    ReadCellsCall,
    ReplaceSourceCall,
    RestoreCellsCall,
    RunCellCall,
    RunOptionsCall,
    SaveCall,
    ShowOutputsCall,
)
from .events import (
    AttemptEvent,
    CellDeletedEvent,
    CellInsertedEvent,
    CellUpdatedEvent,
    ChangedFile,
    EventBase,
    ExecutionFinishedEvent,
    ExecutionStartedEvent,
    FilesEvent,
    FinishedEvent,
    MessageEvent,
    RunEvent,
    StateEvent,
    TokenEvent,
    UsageEvent,
)
from .records import (
    CellInfo,
    CellStatusName,
    ErrorInfo,
    ReplyStatusName,
    RunStateName,
    RunSummary,
    TerminalRunStateName,
    Usage,
    VariableInfo,
)
from .requests import (
    ClientRequest,
    ErrorNotice,
    ExpectHandoffRequest,
    Handoff,
    HelloRequest,
    Notice,
    Preview,
    PreviewMessage,
    PreviewRequest,
    ReplayRequest,
    RequestAccepted,
    RequestRefused,
    RequestReply,
    ReviewRequest,
    RunInfo,
    RunRequestBase,
    RunsNotice,
    StartRunRequest,
    StopRunRequest,
    SubscribeRequest,
)

PROTOCOL_VERSION: int = constant("ProtocolVersion")
#: The mime type of the ``%%ci`` handoff output.
HANDOFF_MIME: str = constant("HandoffMime")

#: Anything the server sends on the websocket (schema: ServerMessage).
ServerMessage = RunEvent | Call | RequestReply | Notice
#: Anything a tab sends on the websocket (schema: ClientMessage).
ClientMessage = ClientRequest | CallReply | CallProgress


#: Each TypedDict above, by the name of its definition in the schema.
TYPES: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        ErrorInfo,
        Usage,
        CellInfo,
        VariableInfo,
        RunSummary,
        EventBase,
        StateEvent,
        TokenEvent,
        CellInsertedEvent,
        CellUpdatedEvent,
        ExecutionStartedEvent,
        ExecutionFinishedEvent,
        AttemptEvent,
        MessageEvent,
        UsageEvent,
        ChangedFile,
        FilesEvent,
        CellDeletedEvent,
        FinishedEvent,
        CallBase,
        ReadCellsCall,
        InsertCellCall,
        AppendSourceCall,
        ReplaceSourceCall,
        DeleteCellCall,
        RunCellCall,
        EvaluateCall,
        InterruptCall,
        RunOptionsCall,
        SaveCall,
        RestoreCellsCall,
        ShowOutputsCall,
        CallResult,
        CallFailure,
        CallProgress,
        HelloRequest,
        SubscribeRequest,
        RunRequestBase,
        StartRunRequest,
        StopRunRequest,
        ReviewRequest,
        ReplayRequest,
        PreviewRequest,
        ExpectHandoffRequest,
        RunInfo,
        Preview,
        RequestAccepted,
        RequestRefused,
        RunsNotice,
        ErrorNotice,
        Handoff,
    )
}


@cache
def schema() -> dict[str, Any]:
    """The protocol's JSON Schema, as shipped in the package."""
    text = resources.files("jupyter_ci").joinpath("schema/protocol.schema.json").read_text()
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def validate(definition: str, message: Any) -> None:
    """Check ``message`` against the schema's ``definition``; ``ValueError`` says what is wrong.

    Used at the edges (websocket, handoff); jsonschema is imported only here.
    """
    import jsonschema

    validator = _validator(definition)
    error = jsonschema.exceptions.best_match(validator.iter_errors(message))
    if error is not None:
        where = "/".join(str(part) for part in error.absolute_path) or "the message"
        raise ValueError(f"invalid {definition}: {where}: {error.message}")


@cache
def _validator(definition: str) -> Any:
    """A validator for one definition, made once (making one costs far more than using it)."""
    import jsonschema

    root = schema()
    if definition not in root["$defs"]:
        raise KeyError(f"no definition {definition!r} in the protocol schema")
    return jsonschema.Draft202012Validator({"$ref": f"#/$defs/{definition}", **root})


__all__ = [
    "HANDOFF_MIME",
    "PROTOCOL_VERSION",
    "TYPES",
    "AppendSourceCall",
    "AttemptEvent",
    "Call",
    "CallBase",
    "CallFailure",
    "CallProgress",
    "CallReply",
    "CallResult",
    "CellDeletedEvent",
    "CellInfo",
    "CellInsertedEvent",
    "CellStatusName",
    "CellUpdatedEvent",
    "ChangedFile",
    "ClientMessage",
    "ClientRequest",
    "DeleteCellCall",
    "ErrorInfo",
    "ErrorNotice",
    "EvaluateCall",
    "EventBase",
    "ExecutionFinishedEvent",
    "ExecutionStartedEvent",
    "ExpectHandoffRequest",
    "FilesEvent",
    "FinishedEvent",
    "Handoff",
    "HelloRequest",
    "InsertCellCall",
    "InterruptCall",
    "MessageEvent",
    "Notice",
    "Preview",
    "PreviewMessage",
    "PreviewRequest",
    "ReadCellsCall",
    "ReplaceSourceCall",
    "ReplayRequest",
    "ReplyStatusName",
    "RequestAccepted",
    "RequestRefused",
    "RequestReply",
    "RestoreCellsCall",
    "ReviewRequest",
    "RunCellCall",
    "RunEvent",
    "RunInfo",
    "RunOptionsCall",
    "RunRequestBase",
    "RunStateName",
    "RunSummary",
    "RunsNotice",
    "SaveCall",
    "ServerMessage",
    "ShowOutputsCall",
    "StartRunRequest",
    "StateEvent",
    "StopRunRequest",
    "SubscribeRequest",
    "TerminalRunStateName",
    "TokenEvent",
    "Usage",
    "UsageEvent",
    "VariableInfo",
    "schema",
    "validate",
]
