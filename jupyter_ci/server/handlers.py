"""HTTP handlers of the server extension. Each one authenticates and authorizes its caller."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from tornado import web

if TYPE_CHECKING:
    from .app import JupyterCIServer

#: The resource name jupyter_server's authorizer sees for jupyter-ci's endpoints.
AUTH_RESOURCE = "jupyter_ci"


class BaseHandler(APIHandler):
    """Common ground: the extension app, JSON replies, the authorization resource."""

    auth_resource = AUTH_RESOURCE

    @property
    def ci_app(self) -> JupyterCIServer:
        """The running extension application."""
        app: JupyterCIServer = self.settings["jupyter_ci"]
        return app

    def write_json(self, data: Any) -> None:
        """Reply with ``data`` as JSON."""
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(data))


class StatusHandler(BaseHandler):
    """``GET /jupyter-ci/status``: version and configured model names (no keys, no api_base)."""

    @web.authenticated
    @authorized
    def get(self) -> None:
        """Return the status document."""
        self.write_json(self.ci_app.status())
