"""The jupyter-ci server extension application: configuration, keys, runs, conversations."""

from __future__ import annotations

import asyncio
import importlib
import os
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from jupyter_core.utils import ensure_async
from jupyter_server.extension.application import ExtensionApp

from .._version import __version__
from ..config import JupyterCI
from ..errors import LAB_SETUP_COMMAND, LOCAL_LAB_SETUP_COMMAND, ConfigError
from ..execution.status import KernelFate
from ..mcp.http import McpHandler
from ..models.base import Model
from ..settings import Layer, Settings, resolve_settings
from .dispatch import Dispatcher
from .expectations import HandoffExpectations
from .handlers import ConversationHandler, ExportHandler, StatusHandler
from .hub import Hub
from .keys import PROVIDER_KEY_VARIABLES, KeyRing
from .lab.iopub import IOPubWatch
from .nodelay import without_nagle
from .paths import BadPath, notebook_path
from .recording import abandoned_run_finished
from .runs import RunManager
from .store import ConversationStore
from .ws import RunSocketHandler

KERNEL_ACTIONS = "https://events.jupyter.org/jupyter_server/kernel_actions/v1"
CONTENTS_EVENTS = "https://events.jupyter.org/jupyter_server/contents_service/v1"

#: Seconds a run waits for its tab to reconnect before it stops.
DISCONNECT_GRACE = 30.0


class _ServerKernels:
    """The run manager's view of the server's kernels."""

    def __init__(self, app: JupyterCIServer) -> None:
        self.app = app

    def has(self, kernel_id: str) -> bool:
        manager = self.app.serverapp.kernel_manager if self.app.serverapp else None
        return manager is not None and kernel_id in manager

    async def interrupt(self, kernel_id: str) -> None:
        manager: Any = self.app.serverapp.kernel_manager if self.app.serverapp else None
        if manager is not None and kernel_id in manager:
            await ensure_async(manager.interrupt_kernel(kernel_id))

    def watch(self, kernel_id: str) -> IOPubWatch | None:
        manager: Any = self.app.serverapp.kernel_manager if self.app.serverapp else None
        if manager is None or kernel_id not in manager:
            return None
        try:
            return IOPubWatch.open(manager.get_kernel(kernel_id))
        except Exception:  # never in the way of the run: it then goes without (as for a gateway)
            self.app.log.warning("jupyter-ci: not listening to kernel %s", kernel_id, exc_info=True)
            return None


class JupyterCIServer(ExtensionApp):
    """Loads jupyter-ci into a Jupyter server; its configuration is ``c.JupyterCI.*``."""

    name = "jupyter_ci"
    description = "jupyter-ci: plain-language requests turned into notebook cells."
    version = __version__
    load_other_extensions = True
    classes = [JupyterCI]

    #: Seconds a run waits for its tab to come back after a disconnect (tests shorten it).
    disconnect_grace = DISCONNECT_GRACE

    def initialize_settings(self) -> None:
        """Read the configuration, take the key out of the environment, set up the run manager."""
        from ..models import litellm_model

        # The server imports litellm once and serves many runs: keep its objects out of the
        # garbage collector's full passes (see FREEZE_AFTER_IMPORT).
        litellm_model.FREEZE_AFTER_IMPORT = True
        self.ci_config = JupyterCI(parent=self)
        self.settings["jupyter_ci"] = self
        # Kernel messages go to the browser at once, not 40 ms later (see nodelay.py); the
        # server's settings are replaced by these once this method returns.
        connection = self.settings.get("kernel_websocket_connection_class")
        if isinstance(connection, type):
            self.settings["kernel_websocket_connection_class"] = without_nagle(connection)
        # Model strings are checked per request and in the status (a wrong one must not keep
        # the extension from loading, nor its key in the environment).
        server = self.server_settings(check_models=False)
        # Before any kernel starts: kernels inherit the server's environment.
        self.keyring = KeyRing.take(
            server.api_key_env, strip_provider_keys=server.strip_provider_keys
        )
        root = getattr(self.serverapp, "root_dir", "") or ""
        self.store = ConversationStore(
            server.db_path or None, scope=os.path.abspath(root), logger=self.log
        )
        self.hub = Hub()
        self.manager = RunManager(
            publisher=self.hub,
            kernels=_ServerKernels(self),
            resolve=self.resolve_request,
            make_model=self.make_model,
            store=None,  # set once the store is open (it opens on the server's event loop)
            grace=self.disconnect_grace,
            secrets=self.secrets,
            logger=self.log,
            root_dir=root,
        )
        self.hub.holds = self.manager.holds
        self.hub.on_connected = self.manager.client_connected
        self.hub.on_disconnected = self.manager.client_disconnected
        self.expectations = HandoffExpectations(
            lambda: self.serverapp.kernel_manager if self.serverapp else None, logger=self.log
        )
        self.dispatcher = Dispatcher(self.hub, self.manager, expectations=self.expectations)
        #: Set once the store is open and the server's events are listened to.
        self.started = asyncio.Event()
        self._starting: asyncio.Future[None] | None = None
        self._warming: asyncio.Future[Any] | None = None
        self._mcp: asyncio.Future[Any] | None = None

    def initialize_handlers(self) -> None:
        """Route ``/jupyter-ci/*``; every handler authenticates and authorizes."""
        self.handlers.extend(
            [
                (r"/jupyter-ci/status", StatusHandler),
                (r"/jupyter-ci/conversation", ConversationHandler),
                (r"/jupyter-ci/conversation/export", ExportHandler),
                (r"/jupyter-ci/ws", RunSocketHandler),
                (r"/jupyter-ci/mcp", McpHandler),
            ]
        )

    async def _start_jupyter_server_extension(self, serverapp: Any) -> None:
        """Once the server's event loop runs: open the store, listen to kernel and file events."""
        await self.ensure_started()

    async def ensure_started(self) -> None:
        """Open the store and subscribe to the server's events, once.

        Called when the server starts, and again (a no-op then) by every handler, so a server
        that never ran the start hook (an embedding, a test harness) still works.
        """
        if self._starting is None:
            self._starting = asyncio.ensure_future(self._start())
        await asyncio.shield(self._starting)

    async def _start(self) -> None:
        await self.store.open()
        try:
            abandoned = await self.store.abandon_unfinished_runs(abandoned_run_finished)
        except Exception:
            abandoned = []
            self.log.warning("jupyter-ci: could not close the runs of an earlier server")
        if abandoned:
            self.log.info("jupyter-ci: %d run(s) of an earlier server marked ended", len(abandoned))
        self.manager.recorder.store = self.store
        logger = getattr(self.serverapp, "event_logger", None)
        if logger is not None:
            logger.add_listener(schema_id=KERNEL_ACTIONS, listener=self._on_kernel_action)
            logger.add_listener(schema_id=CONTENTS_EVENTS, listener=self._on_contents_event)
        self.started.set()
        if self.server_settings(check_models=False).model:
            # The first request must not wait for litellm's import (seconds): warm it now,
            # on a worker thread, while the user opens a notebook.
            from ..models.litellm_model import import_litellm

            self._warming = asyncio.ensure_future(import_litellm())

    async def mcp_service(self) -> Any:
        """jupyter-ci's MCP server over this server's notebooks (:mod:`jupyter_ci.mcp`), made
        and started on first use: the MCP SDK is imported then, on a worker thread, so neither
        the server's start nor ``%load_ext`` pays for it."""
        if self._mcp is None:
            self._mcp = asyncio.ensure_future(self._start_mcp())
        return await asyncio.shield(self._mcp)

    async def _start_mcp(self) -> Any:
        await self.ensure_started()
        module = await asyncio.to_thread(importlib.import_module, "jupyter_ci.mcp.service")
        serverapp: Any = self.serverapp
        backend = module.Backend(
            contents=serverapp.contents_manager,
            sessions=serverapp.session_manager,
            kernels=serverapp.kernel_manager,
            root_dir=getattr(serverapp, "root_dir", "") or "",
            settings=self.server_settings,
            recorder=self.manager.recorder,
            manager=self.manager,
            hub=self.hub,
            resolve=self.resolve_request,
            make_model=self.make_model,
        )
        service = module.McpService(backend)
        await service.start()
        return service

    async def stop_extension(self) -> None:
        """Stop the runs and the MCP sessions, and close the store."""
        if self._mcp is not None:
            try:
                service = await self._mcp
            except Exception:
                self.log.warning("jupyter-ci: the MCP server had not started", exc_info=True)
            else:
                await service.close()
        await self.manager.close()
        self.expectations.close()
        await self.store.close()

    # --- events of the server --------------------------------------------------------------

    async def _on_kernel_action(self, logger: Any, schema_id: str, data: Mapping[str, Any]) -> None:
        if data.get("status") != "success" or not data.get("kernel_id"):
            return
        action = data.get("action")
        if action == "restart":
            self.manager.kernel_ended(str(data["kernel_id"]), KernelFate.RESTARTED)
            self.expectations.forget(str(data["kernel_id"]))
        elif action == "shutdown":
            self.manager.kernel_ended(str(data["kernel_id"]), KernelFate.SHUTDOWN)
            self.expectations.forget(str(data["kernel_id"]))

    async def _on_contents_event(
        self, logger: Any, schema_id: str, data: Mapping[str, Any]
    ) -> None:
        action = data.get("action")
        try:
            path = notebook_path(str(data.get("path") or ""))
            source = notebook_path(str(data["source_path"])) if data.get("source_path") else ""
        except BadPath:
            return  # not a file's path (the root itself)
        if action == "delete":
            # A new notebook at that path starts a new conversation.
            try:
                await self.store.forget_path(path)
            except Exception:
                self.log.warning("jupyter-ci: could not archive the conversation of a deleted file")
            return
        if action != "rename" or not source:
            return
        old, new = source, path
        self.manager.notebook_renamed(old, new)
        self.hub.rename(old, new)
        try:
            await self.store.rename(old, new)
        except Exception:
            self.log.warning("jupyter-ci: could not move the conversation of %s", old)

    # --- settings, keys and models ---------------------------------------------------------

    def server_settings(self, *, check_models: bool = True) -> Settings:
        """The server's own settings (its trusted layer), resolved over the defaults."""
        return resolve_settings(self.ci_config.as_layers(), check_models=check_models)

    def resolve_request(self, request: Mapping[str, Any]) -> Settings:
        """A ``start_run`` request's settings: the request's options over the kernel's ``%ci``
        settings over the user's settings over the server's. Only the server's are trusted.

        An untrusted layer may name an ``api_base`` of its own only while the server holds no
        key of its own (``api_key_env``): then no key can go there (local servers need none).
        """
        server = self.server_settings()
        return resolve_settings(
            [
                *self.ci_config.as_layers(),
                Layer("your JupyterLab settings", dict(request.get("user_options") or {})),
                Layer("the kernel's %ci settings", dict(request.get("session_options") or {})),
                Layer("this request", dict(request.get("options") or {})),
            ],
            keyless_endpoints=not self.keyring.keys.get(server.api_key_env),
        )

    def make_model(self, settings: Settings) -> Model:
        """The run's model, with the key the server holds for it (imports litellm lazily).

        Its calls run on a background event loop: litellm's per-request work must not stall
        the server's loop (see :mod:`jupyter_ci.models.threaded`).
        """
        from ..models.litellm_model import LiteLLMModel
        from ..models.threaded import ThreadedModel

        return ThreadedModel(LiteLLMModel(settings, api_key=self.keyring.api_key_for(settings)))

    def secrets(self) -> list[str]:
        """Every key the server knows of, to scrub from what leaves it."""
        own = self.keyring.secrets()
        provider = [os.environ.get(name, "") for name in PROVIDER_KEY_VARIABLES.values()]
        return [value for value in (*own, *provider) if len(value) >= 8]

    async def status(self) -> dict[str, Any]:
        """``GET /jupyter-ci/status``: version and model names, never keys nor api_base.

        With no model configured, it also says which models a local Ollama offers, if one
        answers on its default port (the setup card shows how to configure one). A model string
        litellm cannot use is a ``config_problem``, and then no model is offered.
        """
        problem: str | None = None
        try:
            settings = self.server_settings()
        except ConfigError as err:
            problem = str(err)
            settings = replace(self.server_settings(check_models=False), model="", models="")
        return {
            "version": __version__,
            "model": settings.model or None,
            "models": settings.configured_models,
            "config_problem": problem,
            "persistent": self.store.persistent,
            "storage_problem": self.store.problem,
            "ollama_models": None if settings.model else await local_ollama_models(),
            "setup": None
            if settings.model
            else {"command": LAB_SETUP_COMMAND, "local_command": LOCAL_LAB_SETUP_COMMAND},
        }


#: Where a local Ollama answers by default (``JUPYTER_CI_OLLAMA_URL`` moves it, for tests).
OLLAMA_URL = "http://127.0.0.1:11434"


async def local_ollama_models(timeout: float = 0.5) -> list[str] | None:
    """The models of a local Ollama, as litellm model strings; None if none answers."""
    import json

    from tornado.httpclient import AsyncHTTPClient, HTTPClientError

    base = os.environ.get("JUPYTER_CI_OLLAMA_URL", OLLAMA_URL).rstrip("/")
    try:
        response = await AsyncHTTPClient().fetch(
            f"{base}/api/tags", connect_timeout=timeout, request_timeout=timeout
        )
        tags = json.loads(response.body)
    except (HTTPClientError, OSError, ValueError, asyncio.TimeoutError):
        return None
    models = tags.get("models") if isinstance(tags, dict) else None
    if not isinstance(models, list):
        return None
    names = [str(m.get("name", "")) for m in models if isinstance(m, dict) and m.get("name")]
    return [f"ollama/{name}" for name in names]
