"""The jupyter-ci server extension application."""

from __future__ import annotations

from typing import Any

from jupyter_server.extension.application import ExtensionApp

from .._version import __version__
from ..config import JupyterCI
from ..settings import Settings, resolve_settings
from .handlers import StatusHandler


class JupyterCIServer(ExtensionApp):
    """Loads jupyter-ci into a Jupyter server; its configuration is ``c.JupyterCI.*``."""

    name = "jupyter_ci"
    description = "jupyter-ci: plain-language requests turned into notebook cells."
    version = __version__
    load_other_extensions = True
    classes = [JupyterCI]

    def initialize_settings(self) -> None:
        """Read the configuration once and expose it to the handlers."""
        self.ci_config = JupyterCI(parent=self)
        self.settings["jupyter_ci"] = self

    def initialize_handlers(self) -> None:
        """Route ``/jupyter-ci/*``; every handler authenticates and authorizes."""
        self.handlers.extend([(r"/jupyter-ci/status", StatusHandler)])

    def server_settings(self) -> Settings:
        """The server's own settings (its trusted layer), resolved over the defaults."""
        return resolve_settings(self.ci_config.as_layers())

    def status(self) -> dict[str, Any]:
        """``GET /jupyter-ci/status``: version and model names, never keys nor api_base."""
        settings = self.server_settings()
        return {
            "version": __version__,
            "model": settings.model or None,
            "models": settings.configured_models,
        }
