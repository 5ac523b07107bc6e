"""Test helpers for jupyter-ci: a scripted OpenAI-compatible model server.

Every test that needs "a model" talks to :class:`ScriptedModelServer`, which answers chat
completion requests from a :class:`Script` of :class:`Reply` objects (text, code, tool calls or
simulated :class:`Fault` s) and records what it received. It uses only the standard library.

    from jupyter_ci.testing import Fault, Reply, ScriptedModelServer

    with ScriptedModelServer([Reply.code("print(1)"), Reply.fail(Fault.rate_limit(2))]) as srv:
        ...  # point an OpenAI/litellm client at srv.base_url

From a shell: ``python -m jupyter_ci.testing --script script.json --port 8000``.
"""

from .handler import NO_REPLY_MESSAGE
from .openai_format import count_tokens, split_tokens
from .recording import RecordedRequest
from .script import Fault, FaultKind, Reply, Script, ScriptError, ToolCall, latest_message_text
from .server import ScriptedModelServer

__all__ = [
    "NO_REPLY_MESSAGE",
    "Fault",
    "FaultKind",
    "RecordedRequest",
    "Reply",
    "Script",
    "ScriptError",
    "ScriptedModelServer",
    "ToolCall",
    "count_tokens",
    "latest_message_text",
    "split_tokens",
]
