"""Settings precedence and the authority rules of untrusted layers."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from traitlets.config import Config

from jupyter_ci.config import JupyterCI, environment_values
from jupyter_ci.errors import ConfigError
from jupyter_ci.model_names import model_problem
from jupyter_ci.options import OPTIONS_BY_NAME
from jupyter_ci.settings import Layer, resolve_settings

#: JupyterLab's settings schema of the labextension (settings.ts reads its run options from it).
PLUGIN_SCHEMA = Path(__file__).resolve().parents[1] / "labextension" / "schema" / "plugin.json"
#: Settings of the tab itself, not run options.
TAB_SETTINGS = {"streamInterval"}
#: The JSON Schema type of each option kind.
JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean"}


def server(**values: object) -> Layer:
    return Layer("the server's configuration", values, trusted=True)


def test_precedence_request_over_session_over_user_over_server_over_default() -> None:
    settings = resolve_settings(
        [
            server(max_attempts=2, max_steps=9, timeout=30),
            Layer("user settings", {"max_attempts": 4, "max_steps": 8}),
            Layer("session", {"max_attempts": 5}),
            Layer("request", {"max_attempts": "6"}),
        ]
    )
    assert settings.max_attempts == 6
    assert settings.max_steps == 8
    assert settings.timeout == 30.0
    assert settings.context_tokens == 8000
    assert settings.sources["max_attempts"] == "request"
    assert settings.sources["max_steps"] == "user settings"
    assert settings.sources["timeout"] == "the server's configuration"
    assert settings.sources["context_tokens"] == "default"


def test_none_means_not_set() -> None:
    settings = resolve_settings([server(mode="review"), Layer("request", {"mode": None})])
    assert settings.mode == "review"


def test_request_cannot_introduce_an_api_base() -> None:
    with pytest.raises(ConfigError, match="api_base the server's configuration does not") as err:
        resolve_settings(
            [
                server(model="openai/local", api_base="http://127.0.0.1:8080/v1"),
                Layer("this request", {"api_base": "http://evil.example/v1"}),
            ]
        )
    assert err.value.option == "api_base"
    # The refusal says what to do instead.
    assert "c.JupyterCI.api_base" in err.value.hint
    assert "JUPYTER_CI_API_BASE=... jupyter lab" in err.value.hint


def test_with_no_key_held_a_request_may_name_its_own_endpoint() -> None:
    # Nothing to leak: a server that holds no key lets a notebook point at its local model.
    settings = resolve_settings(
        [server(), Layer("the kernel's %ci settings", {"api_base": "http://127.0.0.1:8080/v1"})],
        keyless_endpoints=True,
    )
    assert settings.api_base == "http://127.0.0.1:8080/v1"


def test_request_cannot_clear_the_configured_api_base() -> None:
    # "" would send the key meant for the configured endpoint to the provider's default one.
    with pytest.raises(ConfigError, match="api_base"):
        resolve_settings(
            [
                Layer("the environment", {}, trusted=True),
                server(api_base="http://127.0.0.1:8080/v1"),
                Layer("this request", {"api_base": ""}),
            ]
        )


def test_request_may_repeat_the_configured_api_base() -> None:
    base = "http://127.0.0.1:8080/v1"
    settings = resolve_settings([server(api_base=base), Layer("request", {"api_base": base})])
    assert settings.api_base == base


def test_untrusted_layer_cannot_set_server_only_options() -> None:
    with pytest.raises(ConfigError, match="only be set in the server's configuration"):
        resolve_settings([server(), Layer("user settings", {"api_key_env": "OTHER_KEY"})])
    with pytest.raises(ConfigError, match="allow-pip-install"):
        resolve_settings([server(), Layer("session", {"allow_pip_install": True})])


def test_models_are_chosen_among_configured_ones() -> None:
    layers = [server(model="openai/a", models="openai/b, anthropic/c")]
    chosen = resolve_settings([*layers, Layer("request", {"model": "anthropic/c"})])
    assert chosen.model == "anthropic/c"
    assert chosen.configured_models == ["anthropic/c", "openai/b"]
    with pytest.raises(ConfigError, match="not one of the configured models: openai/a, openai/b"):
        resolve_settings([*layers, Layer("request", {"model": "openai/z"})])


def test_any_model_when_the_server_configured_none() -> None:
    settings = resolve_settings([server(), Layer("user settings", {"model": "ollama/qwen"})])
    assert settings.model == "ollama/qwen"


def test_trusted_layers_may_set_anything() -> None:
    settings = resolve_settings(
        [Layer("kernel session", {"api_base": "http://127.0.0.1:1/v1", "db_path": "x"}, True)]
    )
    assert settings.api_base == "http://127.0.0.1:1/v1"


def test_bad_values_name_option_and_layer() -> None:
    with pytest.raises(ConfigError, match=r"--max-steps must be at least 1.*\(in request\)"):
        resolve_settings([Layer("request", {"max_steps": 0})])
    with pytest.raises(ConfigError, match="Unknown setting 'max_step' in request"):
        resolve_settings([Layer("request", {"max_step": 1})])


def test_public_dict_hides_endpoint_and_paths() -> None:
    settings = resolve_settings([server(api_base="http://10.0.0.1/v1", db_path="/secret/db")])
    public = settings.public_dict()
    assert "api_base" not in public
    assert "db_path" not in public
    assert public["max_attempts"] == 3


def test_traits_and_environment_feed_the_server_layer() -> None:
    config = Config()
    config.JupyterCI.max_attempts = 2
    ci = JupyterCI(config=config)
    environ = {"JUPYTER_CI_MODEL": "openai/env", "JUPYTER_CI_MAX_ATTEMPTS": "5"}
    settings = resolve_settings(ci.as_layers(environ))
    assert settings.model == "openai/env"
    assert settings.max_attempts == 2  # the configuration file wins over the environment
    assert settings.sources["model"] == "the environment"
    assert ci.max_attempts == 2
    assert "--max-attempts" in (JupyterCI.class_traits()["max_attempts"].help or "")


def test_bad_environment_value_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="JUPYTER_CI_TIMEOUT"):
        environment_values({"JUPYTER_CI_TIMEOUT": "soon"})


def lab_run_options() -> dict[str, dict[str, Any]]:
    """The run options of the settings schema (every property but the tab's own)."""
    properties: dict[str, dict[str, Any]] = json.loads(PLUGIN_SCHEMA.read_text())["properties"]
    return {name: spec for name, spec in properties.items() if name not in TAB_SETTINGS}


def test_the_lab_settings_offer_options_a_request_may_set() -> None:
    names = lab_run_options()
    assert names, "no run options in the settings schema"
    unknown = [name for name in names if name not in OPTIONS_BY_NAME]
    assert unknown == [], f"plugin.json names options options.py lacks: {unknown}"
    server_only = [name for name in names if not OPTIONS_BY_NAME[name].per_request]
    assert server_only == [], f"plugin.json offers server-only options: {server_only}"


@pytest.mark.parametrize("name", sorted(lab_run_options()))
def test_a_lab_setting_agrees_with_its_option(name: str) -> None:
    spec, option = lab_run_options()[name], OPTIONS_BY_NAME[name]
    # Unset (null) means "not set here": the next layer's value applies.
    assert spec["type"] == [JSON_TYPES[option.kind], "null"]
    assert spec["default"] is None
    assert spec.get("minimum") == option.minimum
    choices = None if option.choices is None else [*option.choices, None]
    assert spec.get("enum") == choices


@pytest.mark.parametrize(
    "layer",
    [
        server(model="gpt4o-mini"),
        server(model="openai/gpt-4o-mini", models="openai/x, gpt4o-mini"),
        Layer("%ci session settings", {"model": "gpt4o-mini"}, trusted=True),
        Layer("the environment", environment_values({"JUPYTER_CI_MODEL": "gpt4o"})),
        Layer("this request", {"model": "openai/"}),
    ],
)
def test_a_model_string_without_a_provider_is_refused_as_it_is_read(
    layer: Layer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without litellm imported (as in a kernel after %load_ext): the light check.
    monkeypatch.delitem(sys.modules, "litellm", raising=False)
    with pytest.raises(ConfigError) as err:
        resolve_settings([layer])
    assert err.value.hint == "Use provider/model, e.g. openai/gpt-4o-mini."
    assert err.value.option in ("model", "models")
    assert layer.name in err.value.message
    assert "does not name a provider" in err.value.message


@pytest.mark.parametrize("name", ["openai/gpt-4o-mini", "gpt-4o-mini", "ollama/qwen2.5-coder"])
def test_model_strings_litellm_can_place_are_accepted(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delitem(sys.modules, "litellm", raising=False)
    assert resolve_settings([server(model=name)]).model == name


def test_with_litellm_loaded_its_own_resolution_decides() -> None:
    from jupyter_ci.models.litellm_model import _load_litellm

    _load_litellm()
    assert model_problem("openai/gpt-4o-mini") == ""
    assert model_problem("gpt4o-mini") != ""
    # The light check lets any prefix through; litellm knows its providers.
    assert model_problem("opanai/gpt-4o-mini") != ""
    with pytest.raises(ConfigError, match="opanai"):
        resolve_settings([server(model="opanai/gpt-4o-mini")])
