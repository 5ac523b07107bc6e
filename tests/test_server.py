"""The server extension in a real Jupyter server: status, and authentication of every endpoint."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from jupyter_ci import __version__
from jupyter_ci.server.app import JupyterCIServer

SECRET = "sk-test-SECRET-0123456789"


@pytest.fixture
def jp_server_config() -> dict[str, Any]:
    return {
        "ServerApp": {"jpserver_extensions": {"jupyter_ci": True}},
        "JupyterCI": {
            "model": "openai/scripted",
            "models": "openai/other",
            "api_base": "http://127.0.0.1:9/v1",
        },
    }


@pytest.fixture(autouse=True)
def _key_in_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUPYTER_CI_API_KEY", SECRET)


def ci_app(serverapp: Any) -> JupyterCIServer:
    for name, extension in serverapp.extension_manager.extensions.items():
        if name == "jupyter_ci":
            for point in extension.extension_points.values():
                app = point.app
                if isinstance(app, JupyterCIServer):
                    return app
    raise AssertionError("jupyter_ci extension app not loaded")


async def test_status_reports_version_and_models_only(jp_fetch: Any) -> None:
    response = await jp_fetch("jupyter-ci", "status")
    assert response.code == 200
    body = response.body.decode()
    status = json.loads(body)
    assert status == {
        "version": __version__,
        "model": "openai/scripted",
        "models": ["openai/scripted", "openai/other"],
        "persistent": True,
        "storage_problem": None,
        "ollama_models": None,
        "config_problem": None,
        "setup": None,
    }
    assert "127.0.0.1:9" not in body
    assert SECRET not in body


def _sample_path(pattern: str) -> str:
    """A concrete path for a route pattern (each regex group replaced by a plausible value)."""
    path = re.sub(r"\(\?P<[^>]+>[^)]*\)|\([^)]*\)", "x", pattern)
    return path.rstrip("$").replace("\\", "")


def extension_routes(serverapp: Any) -> list[tuple[str, type]]:
    app = ci_app(serverapp)
    routes = [(pattern, handler) for pattern, handler, *_ in app.handlers]
    assert routes, "the extension registered no handlers"
    return routes


def _methods(handler: type) -> list[str]:
    """The HTTP methods ``handler`` implements in jupyter-ci's own classes."""
    own = [cls for cls in handler.__mro__ if cls.__module__.startswith("jupyter_ci")]
    names = ("get", "post", "put", "patch", "delete")
    return [name.upper() for name in names if any(name in vars(cls) for cls in own)]


async def test_every_endpoint_refuses_unauthenticated_requests(
    jp_serverapp: Any, jp_fetch: Any, jp_ws_fetch: Any
) -> None:
    no_credentials = {"Authorization": ""}
    checked = 0
    for pattern, handler in extension_routes(jp_serverapp):
        path = _sample_path(pattern)
        if any(cls.__name__ == "WebSocketHandler" for cls in handler.__mro__):
            with pytest.raises(HTTPClientError) as ws_err:
                await jp_ws_fetch(path, headers=no_credentials)
            assert ws_err.value.code in (401, 403), path
            checked += 1
            continue
        methods = _methods(handler)
        assert methods, f"{handler.__name__} implements no method"
        for method in methods:
            body = "{}" if method in ("POST", "PUT", "PATCH") else None
            with pytest.raises(HTTPClientError) as err:
                await jp_fetch(path, method=method, body=body, headers=no_credentials)
            assert err.value.code in (401, 403), f"{method} {path} answered {err.value.code}"
            checked += 1
    assert checked >= 1


async def test_routes_cover_the_status_endpoint(jp_serverapp: Any) -> None:
    paths = [_sample_path(pattern) for pattern, _ in extension_routes(jp_serverapp)]
    assert "/jupyter-ci/status" in paths
