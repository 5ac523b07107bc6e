"""Merging the layers of settings into the one set a run uses.

Precedence, highest first: the request's own options > the ``%ci`` session settings > the user's
settings (JupyterLab's settings registry) > the server's configuration (``c.JupyterCI.*`` traits,
environment) > the defaults in :mod:`jupyter_ci.options`.

Layers differ in authority. A *trusted* layer is the configuration of whoever owns the key: the
server's traits on the JupyterLab path; on the in-kernel path (no server) the kernel's own
settings. Every other layer is *untrusted*: it may choose among what the trusted layers set up,
but it may not

- set an option reserved to the server (``per_request=False``: key variable names, paths, ...);
- name an ``api_base`` that no trusted layer named (the key must not be sent elsewhere);
- name a model outside the configured ones, when the server configured any.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from .errors import ConfigError
from .model_names import MODEL_HINT, models_problem
from .options import OPTIONS, OPTIONS_BY_NAME

#: The options that hold model strings (checked as they are read).
MODEL_OPTIONS = frozenset({"model", "models"})


@dataclass(frozen=True)
class Layer:
    """One source of settings: a name for messages, its values, and whether it is trusted."""

    name: str
    values: Mapping[str, Any]
    trusted: bool = False


@dataclass(frozen=True)
class Settings:
    """The resolved settings of one run. Field names are the option names of :data:`OPTIONS`."""

    model: str = ""
    models: str = ""
    api_base: str = ""
    api_key_env: str = "JUPYTER_CI_API_KEY"
    mode: str = "auto"
    max_attempts: int = 3
    max_steps: int = 5
    timeout: float = 120.0
    context_tokens: int = 8000
    max_tokens_per_run: int = 200_000
    max_cost_per_run: float = 1.0
    temperature: float = -1.0
    seed: int = -1
    fix_temperatures: str = "0.6,0.9"
    fresh_fixes: bool = True
    check_results: bool = True
    own_fixes: bool = True
    inspect_data: bool = False
    tool_calling: str = "auto"
    instructions: str = ""
    vision: str = "auto"
    share_outputs: bool = True
    allow_pip_install: bool = False
    strip_provider_keys: bool = False
    db_path: str = ""
    #: For each option, the layer its value came from ("default" when none set it).
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)

    @property
    def configured_models(self) -> list[str]:
        """``model`` followed by the comma-separated ``models``, without blanks or repeats."""
        names = [self.model, *self.models.split(",")]
        return list(dict.fromkeys(name.strip() for name in names if name.strip()))

    def public_dict(self) -> dict[str, Any]:
        """The settings safe to show in the browser, the kernel or a log (no endpoints or paths)."""
        return {opt.name: getattr(self, opt.name) for opt in OPTIONS if opt.public}


def resolve_settings(
    layers: Iterable[Layer], *, keyless_endpoints: bool = False, check_models: bool = True
) -> Settings:
    """Merge ``layers`` (lowest precedence first) over the defaults into one :class:`Settings`.

    Unknown names, values of the wrong type, model strings that name no provider
    (``check_models``; see :mod:`jupyter_ci.model_names`) and values an untrusted layer may not
    set raise :class:`~jupyter_ci.errors.ConfigError` naming the option, the layer and what is
    allowed. ``None`` values are ignored (they mean "not set here"). ``keyless_endpoints``: the
    caller holds no key, so an untrusted layer may name an ``api_base`` (no key can be sent
    there).
    """
    layers = list(layers)
    trusted = _merge([layer for layer in layers if layer.trusted], check_models)[0]
    endpoint = None if keyless_endpoints else trusted["api_base"]
    models = _model_list(trusted["model"], trusted["models"])
    for layer in layers:
        if not layer.trusted:
            for name, value in _coerced(layer, check_models).items():
                _check_untrusted(name, value, layer, endpoint, models)
    values, sources = _merge(layers, check_models)
    return Settings(**values, sources=sources)


def _coerced(layer: Layer, check_models: bool = True) -> dict[str, Any]:
    """The layer's values converted to their options' types; ``ConfigError`` when one is wrong."""
    result: dict[str, Any] = {}
    for name, raw in layer.values.items():
        if raw is None:
            continue
        opt = OPTIONS_BY_NAME.get(name)
        if opt is None:
            raise ConfigError(
                f"Unknown setting {name!r} in {layer.name}.",
                hint="Known settings: " + ", ".join(sorted(OPTIONS_BY_NAME)) + ".",
                option=name,
            )
        try:
            result[name] = opt.coerce(raw)
        except ValueError as err:
            raise ConfigError(f"{err} (in {layer.name}).", option=name) from None
        problem = models_problem(result[name]) if check_models and name in MODEL_OPTIONS else ""
        if problem:
            raise ConfigError(f"{problem[:-1]} (in {layer.name}).", hint=MODEL_HINT, option=name)
    return result


def _merge(layers: list[Layer], check_models: bool = True) -> tuple[dict[str, Any], dict[str, str]]:
    values: dict[str, Any] = {opt.name: opt.default for opt in OPTIONS}
    sources: dict[str, str] = {opt.name: "default" for opt in OPTIONS}
    for layer in layers:
        for name, value in _coerced(layer, check_models).items():
            values[name] = value
            sources[name] = layer.name
    return values, sources


def _model_list(model: str, models: str) -> list[str]:
    names = [model, *models.split(",")]
    return [name.strip() for name in names if name.strip()]


def _check_untrusted(
    name: str, value: Any, layer: Layer, endpoint: str | None, models: list[str]
) -> None:
    opt = OPTIONS_BY_NAME[name]
    if not opt.per_request:
        raise ConfigError(
            f"{opt.flag} can only be set in the server's configuration (c.JupyterCI.{name}), "
            f"not in {layer.name}.",
            option=name,
        )
    if name == "api_base" and endpoint is not None and value != endpoint:
        raise ConfigError(
            f"{layer.name} names an api_base the server's configuration does not: the server "
            "holds a key, and jupyter-ci never sends it to an endpoint its owner did not name.",
            hint=(
                "Set the endpoint where the server starts (c.JupyterCI.api_base, or "
                "JUPYTER_CI_API_BASE=... jupyter lab), or ask without --api-base."
            ),
            option=name,
        )
    if name == "model" and value and models and value not in models:
        raise ConfigError(
            f"Model {value!r} (from {layer.name}) is not one of the configured models: "
            + ", ".join(models)
            + ".",
            hint="Add it to c.JupyterCI.models to make it available.",
            option=name,
        )


def settings_field_names() -> list[str]:
    """The option fields of :class:`Settings` (used to check it matches the options table)."""
    return [f.name for f in fields(Settings) if f.name != "sources"]
