"""With no model configured, ``/status`` says so and offers a local Ollama when one answers."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from jupyter_ci.errors import LAB_SETUP_COMMAND


class _Ollama(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path != "/api/tags":
            self.send_error(404)
            return
        body = json.dumps({"models": [{"name": "qwen2.5-coder:1.5b"}, {"name": "llama3.2"}]})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: Any) -> None:
        """Quiet."""


@pytest.fixture
def ollama() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ollama)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def jp_server_config(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.delenv("JUPYTER_CI_MODEL", raising=False)
    return {"ServerApp": {"jpserver_extensions": {"jupyter_ci": True}}}


async def test_a_local_ollama_is_offered_when_no_model_is_configured(
    jp_fetch: Any, ollama: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUPYTER_CI_OLLAMA_URL", ollama)
    status = json.loads((await jp_fetch("jupyter-ci", "status")).body)
    assert status["model"] is None
    assert status["ollama_models"] == ["ollama/qwen2.5-coder:1.5b", "ollama/llama3.2"]
    assert ollama not in json.dumps(status)


async def test_no_ollama_answering_means_none(
    jp_fetch: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUPYTER_CI_OLLAMA_URL", "http://127.0.0.1:9")
    status = json.loads((await jp_fetch("jupyter-ci", "status")).body)
    assert status["model"] is None
    assert status["ollama_models"] is None


async def test_a_configured_model_without_a_provider_is_a_problem_the_status_names(
    jp_fetch: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUPYTER_CI_OLLAMA_URL", "http://127.0.0.1:9")
    status = json.loads((await jp_fetch("jupyter-ci", "status")).body)
    assert status["config_problem"] is None
    assert status["setup"]["command"] == LAB_SETUP_COMMAND
    monkeypatch.setenv("JUPYTER_CI_MODEL", "gpt4o-mini")
    status = json.loads((await jp_fetch("jupyter-ci", "status")).body)
    assert status["model"] is None
    assert status["models"] == []
    assert "'gpt4o-mini' does not name a provider" in status["config_problem"]
    assert "Use provider/model, e.g. openai/gpt-4o-mini." in status["config_problem"]
