"""The litellm model layer against the scripted OpenAI-compatible server (no paid model)."""

from __future__ import annotations

import asyncio
import sys
import time
import types
from typing import Any

import pytest

from jupyter_ci.errors import ConfigError, InternalError, ModelError
from jupyter_ci.models import litellm_model
from jupyter_ci.models.litellm_model import LiteLLMModel, estimate_tokens
from jupyter_ci.models.scrub import scrub
from jupyter_ci.models.threaded import ThreadedModel
from jupyter_ci.settings import Settings
from jupyter_ci.testing import Fault, Reply, ScriptedModelServer

KEY = "sk-test-abcdefghijklmnopqrstuvwxyz123456"
MESSAGES = [{"role": "user", "content": "plot the iris data"}]


def model_for(server: ScriptedModelServer, name: str = "openai/scripted") -> LiteLLMModel:
    return LiteLLMModel(Settings(model=name, api_base=server.base_url), api_key=KEY)


@pytest.mark.asyncio
async def test_streams_text_with_usage_and_unknown_cost() -> None:
    with ScriptedModelServer([Reply.code("print(1)", prose="Here.", delay=0.001)]) as server:
        seen: list[str] = []
        reply = await model_for(server).complete(MESSAGES, on_text=seen.append)
    assert reply.text == "Here.\n\n```python\nprint(1)\n```"
    assert "".join(seen) == reply.text
    assert len(seen) > 3
    assert reply.finish_reason == "stop"
    assert reply.usage.prompt_tokens > 0
    assert reply.usage.completion_tokens > 0
    assert reply.usage.cost is None  # unknown price is unknown, not zero
    request = server.last_request
    assert request.body["stream"] is True
    assert request.body["stream_options"] == {"include_usage": True}
    assert request.body["messages"] == MESSAGES
    assert request.authorization_present


@pytest.mark.asyncio
@pytest.mark.parametrize(("name", "value"), [("temperature", 0.0), ("seed", 7)])
async def test_a_sampling_option_is_sent_only_when_set(name: str, value: Any) -> None:
    with ScriptedModelServer([Reply.text("a"), Reply.text("b")]) as server:
        chosen = Settings(model="openai/scripted", api_base=server.base_url, **{name: value})
        await LiteLLMModel(chosen, api_key=KEY).complete(MESSAGES)
        sent = server.last_request.body
        await model_for(server).complete(MESSAGES)
        default = server.last_request.body
    assert sent[name] == value
    assert name not in default


@pytest.mark.asyncio
async def test_a_call_s_own_seed_is_sent_only_where_the_settings_have_one() -> None:
    # Through the in-kernel path's wrapper too, which hands the call to another event loop.
    with ScriptedModelServer([Reply.text("a")] * 3) as server:
        seeded = LiteLLMModel(
            Settings(model="openai/scripted", api_base=server.base_url, seed=7), api_key=KEY
        )
        await ThreadedModel(seeded).complete(MESSAGES, seed=9)
        await seeded.complete(MESSAGES)
        await model_for(server).complete(MESSAGES, seed=9)
        sent = [request.body.get("seed") for request in server.chat_requests]
    assert sent == [9, 7, None]


@pytest.mark.parametrize(
    ("model", "takes"),
    [("openai/any", True), ("ollama_chat/llama3", True), ("anthropic/claude-sonnet-4", False)],
)
def test_a_seed_goes_only_to_providers_that_take_one(model: str, takes: bool) -> None:
    # litellm knows which providers take a seed; one that does not would fail the request.
    litellm = pytest.importorskip("litellm")
    assert LiteLLMModel(Settings(model=model, seed=1), api_key=KEY)._takes_seed(litellm) is takes


@pytest.mark.asyncio
async def test_known_model_has_a_cost() -> None:
    with ScriptedModelServer([Reply.text("hello")]) as server:
        reply = await model_for(server, "openai/gpt-4o-mini").complete(MESSAGES)
    assert reply.usage.cost is not None
    assert reply.usage.cost > 0


@pytest.mark.asyncio
async def test_tool_calls_are_assembled_without_the_mcp_package() -> None:
    tool = {
        "type": "function",
        "function": {
            "name": "run_python",
            "parameters": {"type": "object", "properties": {"code": {"type": "string"}}},
        },
    }
    with ScriptedModelServer([Reply.tool_call("run_python", {"code": "x = 1"})]) as server:
        reply = await model_for(server).complete(MESSAGES, tools=[tool])
    assert server.last_request.body["tools"] == [tool]
    assert reply.finish_reason == "tool_calls"
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [
        ("run_python", '{"code": "x = 1"}')
    ]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("fault", "kind", "words"),
    [
        (Fault.auth(), "auth", "Incorrect API key"),
        (Fault.server_error(), "provider", ""),
        (Fault.empty_stream(), "empty_reply", "empty reply"),
        (Fault.cut_stream(2), "bad_reply", "broke off"),
        (Fault.malformed_json(), "bad_reply", "broke off"),
        (Fault.http_error(404, "no such model", "model_not_found"), "provider", "not found"),
    ],
)
async def test_faults_become_clear_model_errors(fault: Fault, kind: str, words: str) -> None:
    script = [Reply.fail(fault, content="partial text here")]
    with ScriptedModelServer(script) as server, pytest.raises(ModelError) as err:
        await model_for(server).complete(MESSAGES)
    assert err.value.kind == kind, err.value
    assert words in str(err.value)
    assert KEY not in str(err.value)
    assert KEY[-6:] not in str(err.value)
    assert err.value.hint


@pytest.mark.asyncio
async def test_a_cleanly_ended_body_has_no_finish_reason_of_the_providers() -> None:
    """litellm invents "stop" for a body that ends without one; the reply says none came."""
    script = [Reply.fail(Fault.cut_stream(3, graceful=True), content="one two three four")]
    with ScriptedModelServer(script) as server:
        reply = await model_for(server).complete(MESSAGES)
    assert reply.text == "one two "
    assert reply.finish_reason is None


@pytest.mark.asyncio
async def test_rate_limit_is_retried_after_the_servers_delay() -> None:
    script = [Reply.fail(Fault.rate_limit(0.3)), Reply.text("ok now")]
    waits: list[tuple[float, int, int]] = []
    with ScriptedModelServer(script) as server:
        started = time.monotonic()
        reply = await model_for(server).complete(MESSAGES, on_wait=lambda *wait: waits.append(wait))
        waited = time.monotonic() - started
        assert len(server.chat_requests) == 2
    assert reply.text == "ok now"
    assert waited >= 0.3
    # The wait is said as it starts (seconds, retry, most retries) and as it ends.
    assert waits == [(0.3, 1, 2), (0.0, 1, 2)]


@pytest.mark.asyncio
async def test_rate_limit_gives_up_after_bounded_retries() -> None:
    script = [Reply.fail(Fault.rate_limit(0.05), times=None)]
    with ScriptedModelServer(script) as server:
        with pytest.raises(ModelError) as err:
            await model_for(server).complete(MESSAGES)
        assert len(server.chat_requests) == 3
    assert err.value.kind == "rate_limit"


@pytest.mark.asyncio
async def test_connection_refused() -> None:
    with ScriptedModelServer([]) as server:
        base = server.base_url
    model = LiteLLMModel(Settings(model="openai/x", api_base=base), api_key=KEY)
    with pytest.raises(ModelError) as err:
        await model.complete(MESSAGES)
    assert err.value.kind == "connection"


@pytest.mark.asyncio
async def test_cancelling_closes_the_stream() -> None:
    with ScriptedModelServer([Reply.fail(Fault.never_ending(0.02))]) as server:
        seen: list[str] = []
        task = asyncio.ensure_future(model_for(server).complete(MESSAGES, on_text=seen.append))
        for _ in range(200):
            if seen:
                break
            await asyncio.sleep(0.02)
        assert seen, "no text arrived"
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        request = await asyncio.to_thread(server.wait_for_close, 5.0)
    assert request.client_closed_early


def test_no_model_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="No model is configured"):
        LiteLLMModel.from_settings(Settings())


def test_scrub_removes_keys_and_fragments() -> None:
    text = (
        f"bad key {KEY}; masked sk-test-ab****3456 and Bearer abcdefghijklmnop; sk-other123456789"
    )
    cleaned = scrub(text, [KEY])
    assert KEY not in cleaned
    assert "3456" not in cleaned
    assert "abcdefghijklmnop" not in cleaned
    assert "sk-other" not in cleaned
    assert cleaned.startswith("bad key [key]")


@pytest.mark.parametrize(
    "quoted",
    [
        KEY[4:-4],  # the key with a few characters cut at each end
        KEY[10:30],
        KEY.upper(),
        KEY[::-1],
        KEY[5:25].upper()[::-1],
    ],
)
def test_scrub_masks_every_piece_of_a_secret(quoted: str) -> None:
    cleaned = scrub(f"Incorrect API key provided: {quoted}. See the docs.", [KEY])
    assert cleaned.startswith("Incorrect API key provided: [key]")
    assert cleaned.endswith(". See the docs.")
    lowered = cleaned.lower()
    for start in range(len(KEY) - 5):
        piece = KEY[start : start + 6].lower()
        assert piece not in lowered, piece
        assert piece[::-1] not in lowered, piece


def test_scrub_leaves_other_text_alone() -> None:
    text = "KeyError: 'sepal length' in column 12; 3 of 5 runs"
    assert scrub(text, [KEY]) == text


def test_estimate_tokens() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2


def test_custom_endpoint_never_gets_a_provider_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-provider-key-must-not-travel-1234")
    monkeypatch.delenv("JUPYTER_CI_API_KEY", raising=False)
    local = LiteLLMModel(Settings(model="openai/local", api_base="http://127.0.0.1:1/v1"))
    assert local._api_key == "no-key"
    monkeypatch.setenv("JUPYTER_CI_API_KEY", "sk-named-for-this-endpoint-1234")
    named = LiteLLMModel(Settings(model="openai/local", api_base="http://127.0.0.1:1/v1"))
    assert named._api_key == "sk-named-for-this-endpoint-1234"
    monkeypatch.delenv("JUPYTER_CI_API_KEY")
    provider = LiteLLMModel(Settings(model="openai/gpt-4o-mini"))
    assert provider._api_key is None  # litellm then uses the provider's own variable


@pytest.mark.asyncio
async def test_vision_is_looked_up_once_litellm_is_loaded() -> None:
    with ScriptedModelServer([Reply.text("a"), Reply.text("b")]) as server:
        known = model_for(server, "openai/gpt-4o")
        assert known.vision is False  # not known before litellm is imported
        await known.complete(MESSAGES)
        assert known.vision is True
        unknown = model_for(server, "openai/scripted")
        await unknown.complete(MESSAGES)
        assert unknown.vision is False


def test_a_failed_litellm_import_says_so_and_leaves_nothing_half_imported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Seen in the test suite: a warning turned into an error in the middle of litellm's import
    # left litellm.exceptions behind, and every later run failed with "module 'litellm' has no
    # attribute 'exceptions'" as an internal error.
    for name in [n for n in sys.modules if n == "litellm" or n.startswith("litellm.")]:
        monkeypatch.delitem(sys.modules, name)  # put back as they were after the test

    def failing_import(name: str) -> types.ModuleType:
        sys.modules["litellm.exceptions"] = types.ModuleType("litellm.exceptions")
        raise UserWarning("Items 'model' on TypedDict class 'Info' use ReadOnly")

    monkeypatch.setattr(litellm_model.importlib, "import_module", failing_import)
    with pytest.raises(ConfigError) as raised:
        litellm_model._load_litellm()
    assert "litellm could not be imported: UserWarning: Items 'model'" in raised.value.message
    assert "pip install -U litellm" in raised.value.hint
    assert not [n for n in sys.modules if n == "litellm" or n.startswith("litellm.")]


@pytest.mark.asyncio
async def test_a_provider_error_names_its_exception_once() -> None:
    script = [Reply.fail(Fault.server_error("the GPU fell over"))]
    with ScriptedModelServer(script) as server, pytest.raises(ModelError) as err:
        await model_for(server).complete(MESSAGES)
    assert err.value.message == "InternalServerError: the GPU fell over"
    wrapped = ModelError("provider", "InternalServerError: InternalServerError: x")
    assert wrapped.message == "InternalServerError: x"
    assert str(InternalError("KeyError: KeyError: 'a'")).startswith("KeyError: 'a'. This is a bug")
    # Only litellm's prefix of an exception name goes, not its name inside a link.
    linked = litellm_model.provider_text(
        "litellm.BadRequestError: BadRequestError: see https://docs.litellm.ai/docs/providers"
    )
    assert linked == "BadRequestError: see https://docs.litellm.ai/docs/providers"


@pytest.mark.asyncio
async def test_a_model_litellm_cannot_place_is_a_config_error_saying_what_to_write() -> None:
    # A provider prefix only litellm can judge (the light check lets any prefix through).
    with ScriptedModelServer([Reply.text("never")]) as server:
        with pytest.raises(ConfigError) as err:
            await model_for(server, "opanai/gpt-4o-mini").complete(MESSAGES)
        assert server.chat_requests == []
    assert (
        err.value.message
        == "The model 'opanai/gpt-4o-mini' does not name a provider litellm knows."
    )
    assert err.value.hint == "Use provider/model, e.g. openai/gpt-4o-mini."
    assert err.value.option == "model"
