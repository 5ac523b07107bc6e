"""Tests of the scripted OpenAI-compatible server (jupyter_ci.testing), through real clients.

Every behaviour is checked through the `openai` SDK and, where the project uses it, through
litellm, so the fault table in the server's docs is what those clients really do.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

from jupyter_ci.testing import (
    NO_REPLY_MESSAGE,
    Fault,
    Reply,
    Script,
    ScriptedModelServer,
    ScriptError,
    ToolCall,
    count_tokens,
    latest_message_text,
    split_tokens,
)

# litellm must not fetch its model cost map from the network at import.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
import litellm
from litellm.exceptions import (
    AuthenticationError,
    InternalServerError,
    MidStreamFallbackError,
    RateLimitError,
    ServiceUnavailableError,
)

litellm.suppress_debug_info = True

pytest_plugins = ("jupyter_ci.testing.pytest_plugin",)

pytestmark = [
    # litellm 1.106 + pydantic 2.14: emitted while litellm builds its response types; nothing
    # in jupyter-ci can fix them. Matched narrowly so any other warning still fails the test.
    pytest.mark.filterwarnings(
        "ignore:Item 'summary' on TypedDict class 'ChatCompletionReasoningItem' is using the "
        "`ReadOnly` qualifier:UserWarning"
    ),
    pytest.mark.filterwarnings(
        "ignore:Accessing the 'model_(computed_)?fields' attribute on the instance is deprecated"
        ":DeprecationWarning:litellm.*"
    ),
]

API_KEY = "test-key-do-not-record-1234"
USER: list[ChatCompletionMessageParam] = [{"role": "user", "content": "say hello"}]
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "run_cell",
            "description": "Run code in the kernel.",
            "parameters": {"type": "object", "properties": {"code": {"type": "string"}}},
        },
    }
]


@pytest.fixture
def srv(scripted_server: ScriptedModelServer) -> ScriptedModelServer:
    """The plugin's fixture under a short name."""
    return scripted_server


@pytest.fixture
def oai(srv: ScriptedModelServer) -> Iterator[openai.OpenAI]:
    """An openai SDK client for ``srv``, closed after the test."""
    with client(srv) as api:
        yield api


def client(server: ScriptedModelServer, timeout: float = 5.0) -> openai.OpenAI:
    """An openai SDK client for ``server`` that never retries."""
    return openai.OpenAI(base_url=server.base_url, api_key=API_KEY, max_retries=0, timeout=timeout)


def lite(server: ScriptedModelServer, **kwargs: Any) -> Any:
    """``litellm.completion`` against ``server`` without retries."""
    kwargs.setdefault("messages", USER)
    return litellm.completion(
        model="openai/scripted",
        api_base=server.base_url,
        api_key=API_KEY,
        max_retries=0,
        timeout=5,
        **kwargs,
    )


def collect_content(stream: Iterable[Any], into: list[str]) -> None:
    """Append each chunk's content to ``into`` (so it survives an exception mid-stream)."""
    for chunk in stream:
        into.append(chunk.choices[0].delta.content or "")


# --------------------------------------------------------------------------------------------
# openai SDK: normal replies


def test_openai_non_streaming_text(srv: ScriptedModelServer, oai: openai.OpenAI) -> None:
    srv.set_script([Reply.text("Hello big world")])
    reply = oai.chat.completions.create(model="my-model", messages=USER)
    assert reply.choices[0].message.content == "Hello big world"
    assert reply.choices[0].finish_reason == "stop"
    assert reply.model == "my-model"
    assert reply.usage is not None
    assert reply.usage.completion_tokens == 3
    # 3 per message + "say hello" (2 tokens)
    assert reply.usage.prompt_tokens == 5
    assert reply.usage.total_tokens == 8


def test_openai_streaming_text_with_usage(srv: ScriptedModelServer, oai: openai.OpenAI) -> None:
    text = "First line\n  second line, with  spaces.\n"
    srv.set_script([Reply.text(text)])
    stream = oai.chat.completions.create(
        model="scripted",
        messages=USER,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == text
    assert chunks[0].choices[0].delta.role == "assistant"
    finish = [
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    ]
    assert finish == ["stop"]
    last = chunks[-1]
    assert last.choices == []
    assert last.usage is not None
    assert last.usage.completion_tokens == count_tokens(text) == len(split_tokens(text))
    assert all(c.usage is None for c in chunks[:-1])


def test_openai_streaming_without_include_usage_has_no_usage(
    srv: ScriptedModelServer, oai: openai.OpenAI
) -> None:
    srv.set_script([Reply.text("a b c")])
    chunks = list(oai.chat.completions.create(model="scripted", messages=USER, stream=True))
    assert all(c.usage is None for c in chunks)
    assert all(c.choices for c in chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "a b c"


def test_openai_stream_token_delay_spreads_chunks(
    srv: ScriptedModelServer, oai: openai.OpenAI
) -> None:
    srv.set_script([Reply.text("one two three four five", delay=0.06)])
    stream = oai.chat.completions.create(model="scripted", messages=USER, stream=True)
    arrivals: list[float] = []
    pieces: list[str] = []
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            arrivals.append(time.monotonic())
            pieces.append(chunk.choices[0].delta.content)
    assert pieces == ["one ", "two ", "three ", "four ", "five"]
    # 4 gaps of >= 0.06 s between the first and the last token
    assert arrivals[-1] - arrivals[0] >= 0.2


def test_openai_code_reply_is_fenced(srv: ScriptedModelServer, oai: openai.OpenAI) -> None:
    srv.set_script([Reply.code("print(1)\n", prose="Here you go:")])
    reply = oai.chat.completions.create(model="scripted", messages=USER)
    assert reply.choices[0].message.content == "Here you go:\n\n```python\nprint(1)\n```"


def test_openai_tool_call_non_streaming(srv: ScriptedModelServer, oai: openai.OpenAI) -> None:
    srv.set_script([Reply.tool_call("run_cell", {"code": "1 + 1"}, id="call_abc")])
    reply = oai.chat.completions.create(model="scripted", messages=USER, tools=TOOLS)
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    assert choice.message.tool_calls is not None
    (call,) = choice.message.tool_calls
    assert call.id == "call_abc"
    assert call.type == "function"
    assert call.function.name == "run_cell"
    assert json.loads(call.function.arguments) == {"code": "1 + 1"}
    assert srv.last_request.body["tools"] == TOOLS


def test_openai_tool_calls_streaming_in_fragments(
    srv: ScriptedModelServer, oai: openai.OpenAI
) -> None:
    calls = [
        ToolCall("run_cell", {"code": "import pandas as pd\ndf = pd.DataFrame()"}),
        ToolCall("run_cell", {"code": "df.head()"}),
    ]
    srv.set_script([Reply.calls(calls)])
    stream = oai.chat.completions.create(model="scripted", messages=USER, tools=TOOLS, stream=True)
    names: dict[int, str] = {}
    ids: dict[int, str] = {}
    args: dict[int, str] = {}
    fragments = 0
    finish: list[str] = []
    for chunk in stream:
        choice = chunk.choices[0]
        if choice.finish_reason:
            finish.append(choice.finish_reason)
        for delta in choice.delta.tool_calls or []:
            fragments += 1
            if delta.id:
                ids[delta.index] = delta.id
            if delta.function and delta.function.name:
                names[delta.index] = delta.function.name
            if delta.function and delta.function.arguments:
                args[delta.index] = args.get(delta.index, "") + delta.function.arguments
    assert finish == ["tool_calls"]
    assert names == {0: "run_cell", 1: "run_cell"}
    assert len(set(ids.values())) == 2
    assert json.loads(args[0]) == {"code": "import pandas as pd\ndf = pd.DataFrame()"}
    assert json.loads(args[1]) == {"code": "df.head()"}
    assert fragments > 4  # the arguments really arrive in pieces


# --------------------------------------------------------------------------------------------
# openai SDK: faults


@pytest.mark.parametrize("stream", [False, True])
def test_openai_auth_fault(srv: ScriptedModelServer, oai: openai.OpenAI, stream: bool) -> None:
    srv.set_script([Reply.fail(Fault.auth())])
    with pytest.raises(openai.AuthenticationError) as info:
        oai.chat.completions.create(model="scripted", messages=USER, stream=stream)
    assert info.value.status_code == 401
    assert info.value.code == "invalid_api_key"
    assert API_KEY not in str(info.value)


@pytest.mark.parametrize("stream", [False, True])
def test_openai_rate_limit_fault_has_retry_after(
    srv: ScriptedModelServer, oai: openai.OpenAI, stream: bool
) -> None:
    srv.set_script([Reply.fail(Fault.rate_limit(retry_after=2))])
    with pytest.raises(openai.RateLimitError) as info:
        oai.chat.completions.create(model="scripted", messages=USER, stream=stream)
    assert info.value.status_code == 429
    assert info.value.response.headers["retry-after"] == "2"
    assert info.value.code == "rate_limit_exceeded"


def test_openai_server_error_faults(srv: ScriptedModelServer, oai: openai.OpenAI) -> None:
    srv.set_script([Reply.fail(Fault.server_error("boom")), Reply.fail(Fault.http_error(503))])
    with pytest.raises(openai.InternalServerError) as info:
        oai.chat.completions.create(model="scripted", messages=USER)
    assert info.value.status_code == 500
    assert "boom" in info.value.message
    with pytest.raises(openai.InternalServerError) as info503:
        oai.chat.completions.create(model="scripted", messages=USER, stream=True)
    assert info503.value.status_code == 503


def test_openai_cut_stream_raises_mid_iteration(
    srv: ScriptedModelServer, oai: openai.OpenAI
) -> None:
    srv.set_script([Reply.text("one two three four", fault=Fault.cut_stream(after_chunks=2))])
    stream = oai.chat.completions.create(model="scripted", messages=USER, stream=True)
    received: list[str] = []
    # The SDK does not wrap errors raised while iterating: httpx's own exception surfaces.
    with pytest.raises(httpx.RemoteProtocolError, match="incomplete chunked read"):
        collect_content(stream, received)
    assert received == ["", "one "]
    assert srv.last_request.outcome == "fault:cut_stream"
    assert srv.last_request.chunks_sent == 2


def test_openai_graceful_cut_stream_ends_without_finish_reason(
    srv: ScriptedModelServer, oai: openai.OpenAI
) -> None:
    srv.set_script([Reply.text("one two three", fault=Fault.cut_stream(3, graceful=True))])
    chunks = list(oai.chat.completions.create(model="scripted", messages=USER, stream=True))
    assert [c.choices[0].delta.content for c in chunks] == ["", "one ", "two "]
    assert all(c.choices[0].finish_reason is None for c in chunks)


@pytest.mark.parametrize("stream", [True, False])
def test_openai_length_fault_ends_part_of_the_reply_at_its_limit(
    srv: ScriptedModelServer, oai: openai.OpenAI, stream: bool
) -> None:
    srv.set_script([Reply.text("one two three", fault=Fault.length(3))])
    if stream:
        chunks = list(oai.chat.completions.create(model="scripted", messages=USER, stream=True))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        reasons = [c.choices[0].finish_reason for c in chunks if c.choices]
        assert reasons[-1] == "length"
    else:
        reply = oai.chat.completions.create(model="scripted", messages=USER)
        text = reply.choices[0].message.content or ""
        assert reply.choices[0].finish_reason == "length"
    assert text == "one two "
    assert srv.last_request.outcome == "fault:length"


def test_openai_cut_non_streaming_is_connection_error(
    srv: ScriptedModelServer, oai: openai.OpenAI
) -> None:
    srv.set_script([Reply.text("one two", fault=Fault.cut_stream())])
    with pytest.raises(openai.APIConnectionError):
        oai.chat.completions.create(model="scripted", messages=USER)


def test_openai_malformed_json_raises(srv: ScriptedModelServer, oai: openai.OpenAI) -> None:
    srv.set_script([Reply.text("one two", fault=Fault.malformed_json())] * 2)
    # The SDK lets json's own error through (not an openai.APIError), streaming or not.
    with pytest.raises(json.JSONDecodeError):
        oai.chat.completions.create(model="scripted", messages=USER)
    stream = oai.chat.completions.create(model="scripted", messages=USER, stream=True)
    received: list[str] = []
    with pytest.raises(json.JSONDecodeError):
        collect_content(stream, received)
    assert received == [""]  # the role chunk came through, then the broken one
    assert [r.status for r in srv.requests] == [200, 200]


def test_openai_empty_stream_yields_no_chunks(srv: ScriptedModelServer, oai: openai.OpenAI) -> None:
    srv.set_script([Reply.fail(Fault.empty_stream()), Reply.fail(Fault.empty_stream())])
    chunks = list(oai.chat.completions.create(model="scripted", messages=USER, stream=True))
    assert chunks == []
    # Non-streaming, the empty 200 body is not JSON.
    with pytest.raises(json.JSONDecodeError):
        oai.chat.completions.create(model="scripted", messages=USER)


@pytest.mark.timeout(15)
def test_openai_never_ending_stream_reports_client_close(
    srv: ScriptedModelServer, oai: openai.OpenAI
) -> None:
    srv.set_script([Reply.fail(Fault.never_ending(interval=0.02), content="tick tock")])
    stream = oai.chat.completions.create(model="scripted", messages=USER, stream=True)
    received: list[str] = []
    for chunk in stream:
        received.append(chunk.choices[0].delta.content or "")
        if len(received) == 6:
            break
    assert received == ["", "tick ", "tock", "tick ", "tock", "tick "]
    assert not srv.last_request.client_closed_early
    stream.close()
    record = srv.wait_for_close(timeout=3)
    assert record.client_closed_early
    assert record.wait_finished(3)
    assert record.chunks_sent >= 6


@pytest.mark.timeout(15)
def test_openai_never_ending_keepalive_comments(
    srv: ScriptedModelServer, oai: openai.OpenAI
) -> None:
    srv.set_script([Reply.fail(Fault.never_ending(interval=0.02, comments=True))])
    api = oai.chat.completions.with_streaming_response
    with api.create(model="scripted", messages=USER, stream=True) as response:
        lines = []
        for line in response.iter_lines():
            if line:
                lines.append(line)
            if len(lines) == 3:
                break
    assert lines[0].startswith("data: ")
    assert lines[1:] == [": keepalive", ": keepalive"]
    assert srv.wait_for_close(timeout=3).client_closed_early


@pytest.mark.timeout(15)
def test_stop_is_prompt_with_a_never_ending_stream_open() -> None:
    server = ScriptedModelServer([Reply.fail(Fault.never_ending(interval=0.02))]).start()
    with client(server, timeout=3) as api:
        stream = api.chat.completions.create(model="scripted", messages=USER, stream=True)
        first = next(iter(stream))
        assert first.choices[0].delta.role == "assistant"
        started = time.monotonic()
        server.stop()
        assert time.monotonic() - started < 1.5
        assert server.requests[0].finished
        assert not server.requests[0].client_closed_early
        with pytest.raises(httpx.RemoteProtocolError):
            for _chunk in stream:
                pass


# --------------------------------------------------------------------------------------------
# script semantics (client-independent; driven through the openai SDK)


def test_ordered_replies_then_no_reply_left(srv: ScriptedModelServer, oai: openai.OpenAI) -> None:
    srv.set_script(["first", Reply.text("second")])
    api = oai.chat.completions
    assert api.create(model="scripted", messages=USER).choices[0].message.content == "first"
    assert api.create(model="scripted", messages=USER).choices[0].message.content == "second"
    with pytest.raises(openai.InternalServerError) as info:
        api.create(model="scripted", messages=USER)
    assert NO_REPLY_MESSAGE in info.value.message
    assert info.value.code == "no_reply_left"
    assert "say hello" in info.value.message  # names the message that found no reply
    assert srv.last_request.outcome == "no_reply"


def test_pattern_replies_match_latest_user_or_tool_message(
    srv: ScriptedModelServer, oai: openai.OpenAI
) -> None:
    srv.set_script(
        Script(
            [
                Reply.text("fixed it", match=r"Traceback|Error", times=None),
                Reply.text("plot done", match=r"(?i)\bplot\b"),
                Reply.text("ordered one"),
                Reply.text("ordered two"),
            ]
        )
    )
    api = oai.chat.completions

    def ask(messages: list[Any]) -> str | None:
        return api.create(model="scripted", messages=messages).choices[0].message.content

    assert ask([{"role": "user", "content": "Please PLOT it"}]) == "plot done"
    # A pattern reply is used up after `times` (default once): the next plot request is ordered.
    assert ask([{"role": "user", "content": "plot again"}]) == "ordered one"
    # The latest user/tool message decides, not the assistant's or the system's.
    tool_round = [
        {"role": "system", "content": "Error handling rules"},
        {"role": "user", "content": "load the data"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "run_cell", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "Traceback: NameError"},
    ]
    assert ask(tool_round) == "fixed it"
    assert ask(tool_round) == "fixed it"  # times=None: reusable
    assert ask([{"role": "system", "content": "Error"}, *USER]) == "ordered two"


def test_default_reply_when_script_is_exhausted(
    srv: ScriptedModelServer, oai: openai.OpenAI
) -> None:
    srv.set_script(Script(["only"], default=Reply.text("fallback")))
    api = oai.chat.completions
    contents = [api.create(model="s", messages=USER).choices[0].message.content for _ in range(3)]
    assert contents == ["only", "fallback", "fallback"]
    assert srv.script.exhausted


def test_set_script_reset_and_add(srv: ScriptedModelServer, oai: openai.OpenAI) -> None:
    api = oai.chat.completions
    srv.add("added")
    assert api.create(model="s", messages=USER).choices[0].message.content == "added"
    srv.reset(["after reset"])
    assert srv.requests == []
    assert api.create(model="s", messages=USER).choices[0].message.content == "after reset"
    assert len(srv.requests) == 1


def test_latency_delays_the_whole_reply(srv: ScriptedModelServer, oai: openai.OpenAI) -> None:
    srv.set_script([Reply.text("late", latency=0.3)])
    started = time.monotonic()
    oai.chat.completions.create(model="s", messages=USER)
    assert time.monotonic() - started >= 0.3


def test_hold_keeps_replies_until_released(srv: ScriptedModelServer, oai: openai.OpenAI) -> None:
    """The replies let through go; the next held request is recorded and waits; release lets
    it (and later ones) go."""
    srv.set_script(["first", "held", "free"])
    srv.hold(after=1)
    assert oai.chat.completions.create(model="s", messages=USER).choices[0].message.content == (
        "first"
    )
    with ThreadPoolExecutor(1) as pool:
        answer = pool.submit(oai.chat.completions.create, model="s", messages=USER)
        held = srv.wait_for_requests(2)[1]
        assert not held.wait_finished(0.3)  # recorded, not answered
        assert not answer.done()
        srv.release()
        assert answer.result(timeout=10).choices[0].message.content == "held"
    reply = oai.chat.completions.create(model="s", messages=USER)
    assert reply.choices[0].message.content == "free"


# --------------------------------------------------------------------------------------------
# recording


def test_requests_are_recorded_without_the_api_key(tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    messages = [
        {"role": "system", "content": "You write notebook cells."},
        {"role": "user", "content": [{"type": "text", "text": "plot the iris data"}]},
    ]
    with ScriptedModelServer(["ok", "ok again"], record_path=log) as server, client(server) as c:
        c.chat.completions.create(model="scripted", messages=messages)  # type: ignore[arg-type]
        list(c.chat.completions.create(model="scripted", messages=USER, stream=True))
        recorded = server.wait_for_requests(2)
        assert recorded[1].wait_finished(3)
    first, second = recorded
    assert first.method == "POST"
    assert first.path == "/v1/chat/completions"
    assert first.messages == messages
    assert latest_message_text(first.messages) == "plot the iris data"
    assert first.model == "scripted"
    assert first.authorization_present
    assert first.status == 200
    assert first.outcome == "text"
    assert not first.stream
    assert second.stream
    assert second.messages == USER
    assert not second.client_closed_early
    assert all(name.lower() != "authorization" for name in first.headers)
    assert API_KEY not in repr(recorded)
    assert API_KEY not in json.dumps([r.to_json() for r in recorded])
    text = log.read_text(encoding="utf-8")
    assert API_KEY not in text
    lines = [json.loads(line) for line in text.splitlines()]
    assert [line["body"]["messages"] for line in lines] == [messages, USER]
    assert all(line["authorization_present"] for line in lines)


def test_request_without_authorization_is_recorded_as_such(srv: ScriptedModelServer) -> None:
    srv.set_script(["hi"])
    request = urllib.request.Request(
        srv.base_url + "/chat/completions",
        data=json.dumps({"model": "m", "messages": USER}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        body = json.loads(response.read())
    assert body["choices"][0]["message"]["content"] == "hi"
    assert srv.last_request.authorization_present is False


# --------------------------------------------------------------------------------------------
# other endpoints and paths


def test_models_endpoint_lists_script_models(srv: ScriptedModelServer, oai: openai.OpenAI) -> None:
    srv.set_script(Script([], models=["alpha", "beta"]))
    models = oai.models.list()
    assert [m.id for m in models.data] == ["alpha", "beta"]
    assert oai.models.retrieve("beta").id == "beta"
    with pytest.raises(openai.NotFoundError):
        oai.models.retrieve("gamma")


def test_paths_without_v1_prefix_work(srv: ScriptedModelServer) -> None:
    srv.set_script(Script(["no prefix"], models=["m1"]))
    with urllib.request.urlopen(srv.url + "/models", timeout=5) as response:
        assert json.loads(response.read())["data"][0]["id"] == "m1"
    with openai.OpenAI(base_url=srv.url, api_key=API_KEY, max_retries=0, timeout=5) as no_v1:
        reply = no_v1.chat.completions.create(model="m1", messages=USER)
    assert reply.choices[0].message.content == "no prefix"
    assert srv.last_request.path == "/chat/completions"


def test_unknown_path_and_bad_body_are_client_errors(srv: ScriptedModelServer) -> None:
    with pytest.raises(urllib.error.HTTPError) as not_found:
        urllib.request.urlopen(srv.url + "/v1/embeddings", data=b"{}", timeout=5)
    assert not_found.value.code == 404
    assert json.loads(not_found.value.read())["error"]["code"] == "unknown_url"
    not_found.value.close()
    with pytest.raises(urllib.error.HTTPError) as bad:
        urllib.request.urlopen(srv.base_url + "/chat/completions", data=b"not json", timeout=5)
    assert bad.value.code == 400
    bad.value.close()
    assert srv.last_request.body_text == "not json"
    assert srv.last_request.outcome == "bad_request"


# --------------------------------------------------------------------------------------------
# scripts as JSON


def test_script_json_round_trip_and_validation(tmp_path: Path) -> None:
    script = Script(
        [
            Reply.code("x = 1"),
            Reply.tool_call("run_cell", {"code": "x"}, match="again", times=None),
            Reply.fail(Fault.rate_limit(retry_after=1.5)),
            Reply.text("slow", delay=0.01, fault=Fault.cut_stream(1, graceful=True)),
        ],
        default="fallback",
        models=["a"],
    )
    path = tmp_path / "script.json"
    script.save(path)
    loaded = Script.load(path)
    assert loaded.replies == script.replies
    assert loaded.default == Reply.text("fallback")
    assert loaded.models == ("a",)
    shorthand = Script.from_dict(
        [
            "plain",
            {"code": "print(2)"},
            {"fault": "empty_stream"},
            {"tool_calls": [{"name": "f", "arguments": "not json"}]},
        ]
    )
    assert shorthand.replies[0].content == "plain"
    assert shorthand.replies[1].content == "```python\nprint(2)\n```"
    assert shorthand.replies[2].fault == Fault.empty_stream()
    assert shorthand.replies[3].tool_calls[0].arguments_json == "not json"
    with pytest.raises(ScriptError, match="unknown reply field"):
        Script.from_dict([{"contnet": "typo"}])
    with pytest.raises(ScriptError, match="unknown fault kind"):
        Script.from_dict([{"fault": "explode"}])
    with pytest.raises(ScriptError, match="bad match pattern"):
        Reply.text("x", match="(")


def test_split_tokens_round_trips() -> None:
    for text in ["", "a", "  lead", "trail  ", "a\n\nb\tc", "```python\nprint(1)\n```"]:
        assert "".join(split_tokens(text)) == text
    assert count_tokens("Hello big world") == 3


# --------------------------------------------------------------------------------------------
# command line


@pytest.mark.timeout(30)
def test_cli_serves_a_script_until_sigterm(tmp_path: Path) -> None:
    script_path = tmp_path / "script.json"
    Script(["from the cli"], models=["cli-model"]).save(script_path)
    record = tmp_path / "requests.jsonl"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyter_ci.testing",
            "--script",
            str(script_path),
            "--port",
            "0",
            "--record",
            str(record),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        base_url = process.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:")
        assert base_url.endswith("/v1")
        with openai.OpenAI(base_url=base_url, api_key=API_KEY, max_retries=0) as cli_client:
            reply = cli_client.chat.completions.create(model="cli-model", messages=USER)
        assert reply.choices[0].message.content == "from the cli"
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
    lines = record.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1
    assert json.loads(lines[0])["body"]["messages"] == USER
    assert API_KEY not in lines[0]


def test_cli_rejects_a_bad_script(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('[{"contnet": "typo"}]', encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    result = subprocess.run(
        [sys.executable, "-m", "jupyter_ci.testing", "--script", str(bad)],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2
    assert "unknown reply field" in result.stderr
    assert result.stdout == ""


# --------------------------------------------------------------------------------------------
# litellm


def test_litellm_non_streaming_text(srv: ScriptedModelServer) -> None:
    srv.set_script([Reply.text("Hello from litellm")])
    response = lite(srv)
    assert response.choices[0].message.content == "Hello from litellm"
    assert response.choices[0].finish_reason == "stop"
    assert response.usage.completion_tokens == 3
    assert srv.last_request.model == "scripted"
    assert srv.last_request.authorization_present


def test_litellm_streaming_text_with_usage_and_delay(srv: ScriptedModelServer) -> None:
    text = "alpha beta gamma delta"
    srv.set_script([Reply.text(text, delay=0.05)])
    started = time.monotonic()
    chunks = list(lite(srv, stream=True, stream_options={"include_usage": True}))
    elapsed = time.monotonic() - started
    pieces = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    assert pieces == ["alpha ", "beta ", "gamma ", "delta"]
    assert elapsed >= 0.15
    usage = getattr(chunks[-1], "usage", None)
    assert usage is not None
    assert usage.completion_tokens == 4


def test_litellm_tool_calls_with_skip_mcp_handler(srv: ScriptedModelServer) -> None:
    # litellm 1.106 imports its MCP gateway (and so the `mcp` package) whenever `tools=` is
    # passed; the private `_skip_mcp_handler=True` bypasses that import.
    srv.set_script([Reply.tool_call("run_cell", {"code": "2 * 21"})] * 2)
    response = lite(srv, tools=TOOLS, _skip_mcp_handler=True)
    call: Any
    (call,) = response.choices[0].message.tool_calls
    assert call.function.name == "run_cell"
    assert json.loads(call.function.arguments) == {"code": "2 * 21"}
    assert response.choices[0].finish_reason == "tool_calls"
    chunks = list(lite(srv, tools=TOOLS, _skip_mcp_handler=True, stream=True))
    rebuilt: Any = litellm.stream_chunk_builder(chunks)
    (streamed,) = rebuilt.choices[0].message.tool_calls
    assert json.loads(streamed.function.arguments) == {"code": "2 * 21"}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    assert srv.requests[0].body["tools"] == TOOLS


def test_litellm_tools_without_the_flag_need_mcp(srv: ScriptedModelServer) -> None:
    srv.set_script([Reply.tool_call("run_cell", {"code": "1"})])
    if find_spec("mcp") is None:
        with pytest.raises(ModuleNotFoundError, match="mcp"):
            lite(srv, tools=TOOLS)
        assert srv.requests == []  # fails before any request is sent
    else:
        response = lite(srv, tools=TOOLS)
        assert response.choices[0].message.tool_calls[0].function.name == "run_cell"


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    ("fault", "error", "status"),
    [
        (Fault.auth(), AuthenticationError, 401),
        (Fault.rate_limit(retry_after=3), RateLimitError, 429),
        (Fault.server_error(), InternalServerError, 500),
        (Fault.http_error(503), ServiceUnavailableError, 503),
    ],
)
def test_litellm_http_faults(
    srv: ScriptedModelServer, fault: Fault, error: type[Exception], status: int, stream: bool
) -> None:
    srv.set_script([Reply.fail(fault)])
    with pytest.raises(error) as info:
        lite(srv, stream=stream)
    assert getattr(info.value, "status_code", None) == status
    if status == 429:
        headers = info.value.litellm_response_headers  # type: ignore[attr-defined]
        assert headers["retry-after"] == "3"
    assert len(srv.requests) == 1  # max_retries=0: no hidden retry


def test_litellm_cut_stream(srv: ScriptedModelServer) -> None:
    srv.set_script(
        [
            Reply.text("one two three", fault=Fault.cut_stream(2)),
            Reply.text("one two three", fault=Fault.cut_stream(2)),
            Reply.text("one two three", fault=Fault.cut_stream(2, graceful=True)),
        ]
    )
    with pytest.raises(InternalServerError, match="Connection error"):
        lite(srv)
    received: list[str] = []
    with pytest.raises(MidStreamFallbackError, match="incomplete chunked read"):
        collect_content(lite(srv, stream=True), received)
    assert "".join(received) == "one "
    # A cleanly ended body without finish_reason: litellm invents finish_reason "stop".
    chunks = list(lite(srv, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "one "
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_litellm_malformed_json(srv: ScriptedModelServer) -> None:
    srv.set_script([Reply.fail(Fault.malformed_json(), content="x")] * 2)
    with pytest.raises(InternalServerError, match="Unterminated string"):
        lite(srv)
    with pytest.raises(MidStreamFallbackError, match="Unterminated string"):
        list(lite(srv, stream=True))


def test_litellm_empty_stream(srv: ScriptedModelServer) -> None:
    srv.set_script([Reply.fail(Fault.empty_stream())] * 2)
    chunks = list(lite(srv, stream=True))
    # litellm turns an empty stream into a single synthetic chunk: no content, finish "stop".
    assert len(chunks) == 1
    assert chunks[0].choices[0].delta.content is None
    assert chunks[0].choices[0].finish_reason == "stop"
    with pytest.raises(InternalServerError, match="Expecting value"):
        lite(srv)


@pytest.mark.timeout(15)
def test_litellm_never_ending_stream_closed_by_client(srv: ScriptedModelServer) -> None:
    srv.set_script([Reply.fail(Fault.never_ending(interval=0.02), content="more")])
    stream = lite(srv, stream=True)
    pieces: list[str] = []
    for chunk in stream:
        pieces.append(chunk.choices[0].delta.content or "")
        if len(pieces) == 4:
            break
    assert pieces[1:] == ["more", "more", "more"]
    stream.completion_stream.close()  # the underlying openai.Stream
    assert srv.wait_for_close(timeout=3).client_closed_early


# --------------------------------------------------------------------------------------------
# plumbing


def test_server_addresses_and_context_manager() -> None:
    server = ScriptedModelServer()
    with pytest.raises(RuntimeError):
        _ = server.url
    with server:
        assert server.running
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        assert server.url == f"http://127.0.0.1:{server.port}"
        with pytest.raises(LookupError):
            _ = server.last_request
    assert not server.running
    with pytest.raises(httpx.ConnectError):
        httpx.get(server.url + "/v1/models", timeout=2)


@pytest.fixture
def two_servers() -> Iterator[tuple[ScriptedModelServer, ScriptedModelServer]]:
    with ScriptedModelServer(["from a"]) as a, ScriptedModelServer(["from b"]) as b:
        yield a, b


def test_independent_servers(two_servers: tuple[ScriptedModelServer, ScriptedModelServer]) -> None:
    a, b = two_servers
    assert a.port != b.port
    with client(b) as api:
        assert api.chat.completions.create(model="m", messages=USER).choices[0].message.content
    assert [r.outcome for r in a.requests] == []
    assert [r.outcome for r in b.requests] == ["text"]
