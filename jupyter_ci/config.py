"""``c.JupyterCI.*``: the server's configuration, as traitlets built from the options table.

Each option of :mod:`jupyter_ci.options` becomes a trait with its help text. A value set in a
configuration file or on the command line wins; otherwise the environment variable
``JUPYTER_CI_<NAME>`` supplies it when set; otherwise the table's default applies.
The server extension and ``jupyter ci`` read their configuration through this class.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from traitlets import Bool, Float, Int, TraitType, Unicode
from traitlets.config import Configurable

from .errors import ConfigError
from .options import OPTIONS, Option
from .settings import Layer

_TRAIT_TYPES: dict[type, type[TraitType[Any, Any]]] = {
    bool: Bool,
    int: Int,
    float: Float,
    str: Unicode,
}


def _make_trait(opt: Option) -> TraitType[Any, Any]:
    help_text = f"{opt.help} (Also: {opt.flag}; environment variable {opt.env_var}.)"
    return _TRAIT_TYPES[opt.kind](opt.default, help=help_text).tag(config=True)


def environment_values(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Options given as ``JUPYTER_CI_<NAME>`` environment variables, converted to their types."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for opt in OPTIONS:
        raw = environ.get(opt.env_var)
        if raw:
            try:
                values[opt.name] = opt.coerce(raw)
            except ValueError as err:
                raise ConfigError(f"{err} (from the environment variable {opt.env_var}).") from None
    return values


class _JupyterCIBase(Configurable):
    def as_layers(self, environ: Mapping[str, str] | None = None) -> list[Layer]:
        """The trusted layers: ``JUPYTER_CI_*`` variables, then (winning) configured traits.

        Only values actually set appear, so :attr:`Settings.sources` tells defaults apart.
        """
        configured = set(self.config.get(type(self).__name__, {}))
        return [
            Layer("the environment", environment_values(environ), trusted=True),
            Layer(
                "the server's configuration",
                {opt.name: getattr(self, opt.name) for opt in OPTIONS if opt.name in configured},
                trusted=True,
            ),
        ]


#: jupyter-ci's configuration: ``c.JupyterCI.<option>`` in jupyter_server_config.py. Its traits
#: are generated from :data:`jupyter_ci.options.OPTIONS`.
JupyterCI: type[_JupyterCIBase] = type(
    "JupyterCI",
    (_JupyterCIBase,),
    {
        "__doc__": "jupyter-ci's configuration (traits generated from the options table).",
        "__module__": __name__,
        **{opt.name: _make_trait(opt) for opt in OPTIONS},
    },
)
