"""jupyter-ci's MCP tools without a Jupyter server: a server's managers, in this process.

``jupyter ci mcp`` uses this when no running Jupyter server serves the folder: the same
contents, kernel and session managers a server has (jupyter_server's own classes, with the folder
as their root), so the tools act exactly as they do headless in a server, on files and kernels of
this process. Kernels it started are shut down when it ends. jupyter-ci's key (for ``ask``) is
taken out of the environment before any kernel starts, as the server does.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from traitlets.config import Config

from ..models.base import Model
from ..server.keys import KeyRing
from ..server.recording import RunRecorder
from ..server.store import ConversationStore
from ..settings import Layer, Settings, resolve_settings
from ..workspaces.kernel import channel_encryption
from .notebooks import Backend

log = logging.getLogger("jupyter_ci.mcp")


def _contents_log() -> logging.Logger:
    """The contents manager's log, without its warning at each save of a notebook with outputs
    ("Notebook x.ipynb is not trusted"): the notebooks an agent runs are left unsigned, as a
    notebook run outside JupyterLab is, and saying so at every call fills the client's log."""
    contents = log.getChild("contents")
    if not contents.filters:
        contents.addFilter(lambda record: "is not trusted" not in record.getMessage())
    return contents


class LocalJupyter:
    """A folder's contents, kernels and sessions, managed in this process."""

    def __init__(self, root: str, config: Any) -> None:
        """``config``: the :class:`~jupyter_ci.config.JupyterCI` of the command's configuration."""
        from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
        from jupyter_server.services.kernels.kernelmanager import AsyncMappingKernelManager
        from jupyter_server.services.sessions.sessionmanager import SessionManager

        self.root = os.path.abspath(root)
        self.config = config
        trusted = self.server_settings()
        # Before any kernel starts: kernels inherit this process's environment.
        self.keyring = KeyRing.take(
            trusted.api_key_env, strip_provider_keys=trusted.strip_provider_keys
        )
        self.contents = AsyncLargeFileManager(root_dir=self.root, log=_contents_log())
        # Kernels' channels encrypted where they can be (else each kernel warns on stderr, the
        # client's log, that it runs unencrypted), as jupyter ci run's are.
        self.kernels = AsyncMappingKernelManager(  # type: ignore[no-untyped-call]
            root_dir=self.root, config=Config({"KernelManager": channel_encryption()})
        )
        self.sessions = SessionManager(  # type: ignore[no-untyped-call]
            kernel_manager=self.kernels, contents_manager=self.contents
        )
        self.store = ConversationStore(trusted.db_path or None, scope=self.root, logger=log)

    def server_settings(self) -> Settings:
        """The settings of configuration files, flags and the environment (trusted)."""
        layers: list[Layer] = self.config.as_layers()
        return resolve_settings(layers)

    def resolve(self, request: Mapping[str, Any]) -> Settings:
        """A request's settings: its options (untrusted) over the trusted ones."""
        options = dict(request.get("options") or {})
        return resolve_settings(
            [*self.config.as_layers(), Layer("this request", options)],
            keyless_endpoints=not self.keyring.keys.get(self.server_settings().api_key_env),
        )

    def make_model(self, settings: Settings) -> Model:
        """The model of ``ask`` (litellm, imported now), with the key this process took."""
        from ..models.litellm_model import LiteLLMModel
        from ..models.threaded import ThreadedModel

        return ThreadedModel(LiteLLMModel(settings, api_key=self.keyring.api_key_for(settings)))

    async def backend(self) -> Backend:
        """The MCP layer's view of it (the conversation store opened, to record the runs)."""
        recorder = RunRecorder(None, log)
        try:
            await self.store.open()
            recorder.store = self.store
        except Exception:
            log.warning("jupyter-ci: the conversation store could not be opened", exc_info=True)
        return Backend(
            contents=self.contents,
            sessions=self.sessions,
            kernels=self.kernels,
            root_dir=self.root,
            settings=self.server_settings,
            recorder=recorder,
            resolve=self.resolve,
            make_model=self.make_model,
        )

    async def close(self) -> None:
        """Shut down the kernels this process started and close the store."""
        try:
            await self.kernels.shutdown_all(now=True)
        finally:
            self.sessions.close()  # type: ignore[no-untyped-call]
            await self.store.close()
