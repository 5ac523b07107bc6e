"""``jupyter ci``: jupyter-ci's command line (a Jupyter subcommand through ``jupyter-ci``)."""

from __future__ import annotations

import sys
from typing import Any

from jupyter_core.application import JupyterApp

from ._version import __version__
from .config import JupyterCI
from .errors import JupyterCIError
from .options import OPTIONS
from .settings import resolve_settings


def _option_aliases() -> dict[str, str]:
    """``--max-attempts 2`` → ``JupyterCI.max_attempts``: CLI flags from the options table."""
    return {opt.flag[2:]: f"JupyterCI.{opt.name}" for opt in OPTIONS if opt.kind is not bool}


def _option_flags() -> dict[str, Any]:
    flags: dict[str, Any] = {}
    for opt in OPTIONS:
        if opt.kind is bool:
            name = opt.flag[2:]
            flags[name] = ({"JupyterCI": {opt.name: True}}, f"Set {opt.name} to true.")
            flags["no-" + name] = ({"JupyterCI": {opt.name: False}}, f"Set {opt.name} to false.")
    flags["review"] = ({"JupyterCI": {"mode": "review"}}, "Same as --mode review.")
    flags["no-run"] = ({"JupyterCI": {"mode": "insert"}}, "Same as --mode insert.")
    return flags


class ConfigApp(JupyterApp):
    """``jupyter ci config``: print the settings jupyter-ci resolves here (never keys)."""

    name = "jupyter-ci-config"
    description = (
        "Show the settings jupyter-ci resolves from configuration files, flags and the environment."
    )
    version = __version__
    classes = [JupyterCI]
    aliases = _option_aliases()
    flags = {**JupyterApp.flags, **_option_flags()}
    # The server's configuration files are where c.JupyterCI.* usually lives.
    config_file_name = "jupyter_server_config"

    def start(self) -> None:
        """Resolve and print."""
        from .magics import describe

        try:
            settings = resolve_settings(JupyterCI(parent=self).as_layers())
        except JupyterCIError as err:
            print(f"jupyter-ci: {err}", file=sys.stderr)
            self.exit(2)
        print(describe(settings))


class JupyterCIApp(JupyterApp):
    """``jupyter ci``: jupyter-ci's command line."""

    name = "jupyter-ci"
    description = (
        "jupyter-ci turns a request in plain language into notebook cells run in a real kernel.\n"
        "In JupyterLab use the jupyter-ci panel or `%load_ext jupyter_ci` then `%%ci <request>`."
    )
    version = __version__
    classes = [JupyterCI]
    subcommands = {
        "config": (ConfigApp, ConfigApp.description),
    }

    def start(self) -> None:
        """Without a subcommand, say what there is."""
        if self.subapp is not None:
            self.subapp.start()
            return
        self.print_help()
        print("Subcommands: " + ", ".join(sorted(self.subcommands)) + " (jupyter ci <cmd> --help)")


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``jupyter-ci`` script."""
    JupyterCIApp.launch_instance(argv=argv)


if __name__ == "__main__":
    main()
