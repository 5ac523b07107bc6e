"""jupyter-ci: turn a request in plain language into real notebook cells, run in your kernel.

This module is what ``%load_ext jupyter_ci`` and Jupyter's extension discovery import: it must stay
light. The server extension and the magics are imported only when asked for.
"""

from __future__ import annotations

from typing import Any

from ._version import __version__

__all__ = ["__version__", "load_ipython_extension", "unload_ipython_extension"]


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where JupyterLab finds the prebuilt labextension (installed as shared data)."""
    return [{"src": "labextension", "dest": "jupyter-ci"}]


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    """The server extension, for jupyter_server's extension manager."""
    from .server.app import JupyterCIServer

    return [{"module": "jupyter_ci", "app": JupyterCIServer}]


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext jupyter_ci``: register ``%ci`` and ``%%ci``."""
    from .magics import CIMagics, allow_one_line_cell_magic

    ipython.register_magics(CIMagics)
    cleanup = ipython.input_transformers_cleanup
    if allow_one_line_cell_magic not in cleanup:
        cleanup.append(allow_one_line_cell_magic)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext jupyter_ci``: stop accepting one-line ``%%ci`` cells (magics stay)."""
    from .magics import allow_one_line_cell_magic

    cleanup = ipython.input_transformers_cleanup
    if allow_one_line_cell_magic in cleanup:
        cleanup.remove(allow_one_line_cell_magic)
