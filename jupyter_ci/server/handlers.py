"""HTTP handlers of the server extension. Each one authenticates and authorizes its caller."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from jupyter_core.utils import ensure_async
from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler, JupyterHandler
from tornado import web

from .export import export_markdown
from .paths import BadPath, notebook_path
from .store import Conversation, ConversationStore, Message, RunRecord, UsageTotals

if TYPE_CHECKING:
    from .app import JupyterCIServer

#: The resource name jupyter_server's authorizer sees for jupyter-ci's endpoints.
AUTH_RESOURCE = "jupyter_ci"
#: What a caller must be allowed to run code through jupyter-ci (the websocket, the MCP route):
#: execute in kernels, and execute on jupyter-ci's own resource.
EXECUTE_PERMISSIONS = (("execute", "kernels"), ("execute", AUTH_RESOURCE))


async def check_may_execute(handler: JupyterHandler) -> None:
    """Raise 403 unless the handler's (authenticated) user may run code in kernels through
    jupyter-ci: runs and MCP tools execute code in the user's kernels."""
    user = handler.current_user
    for action, resource in EXECUTE_PERMISSIONS:
        allowed = await ensure_async(
            handler.authorizer.is_authorized(handler, user, action, resource)
        )
        if not allowed:
            handler.log.warning("jupyter-ci: %s may not %s %s", user, action, resource)
            raise web.HTTPError(403)


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
    async def get(self) -> None:
        """Return the status document."""
        await self.ci_app.ensure_started()
        self.write_json(await self.ci_app.status())


#: How many of a conversation's latest runs come with their steps (events) in its history.
HISTORY_RUNS = 50


class ConversationHandler(BaseHandler):
    """``/jupyter-ci/conversation?path=NOTEBOOK``: a notebook's conversation for the chat panel.

    ``GET`` returns its messages (oldest first), the stored events of its latest runs (so the
    panel shows their steps, cells and usage again after a reload) and the tokens and cost of its
    runs; reading makes nothing (a notebook without a conversation reads as an empty one).
    ``DELETE`` clears it (the panel asks the user first). Conversations follow notebook renames.
    """

    def _path(self) -> str:
        return _notebook_path(self)

    @web.authenticated
    @authorized
    async def get(self) -> None:
        """The conversation's messages, its latest runs' events and its usage."""
        await self.ci_app.ensure_started()
        store = self.ci_app.store
        path = self._path()
        conversation = await store.find_conversation(path)
        messages, _, totals = await _stored(store, conversation, with_runs=False)
        run_ids = list(dict.fromkeys(m.run_id for m in messages if m.run_id))[-HISTORY_RUNS:]
        events = await store.events_of(run_ids)
        runs = [{"run_id": run_id, "events": events[run_id]} for run_id in run_ids]
        self.write_json(
            {
                "conversation_id": conversation.id if conversation is not None else None,
                "path": conversation.path if conversation is not None else path,
                "messages": [
                    {
                        "role": message.role,
                        "text": message.text,
                        "run_id": message.run_id,
                        "time": message.created,
                    }
                    for message in messages
                ],
                "runs": runs,
                "usage": {
                    "prompt_tokens": totals.prompt_tokens,
                    "completion_tokens": totals.completion_tokens,
                    "cost": totals.cost,
                    "runs": totals.runs,
                },
                "persistent": store.persistent,
            }
        )

    @web.authenticated
    @authorized
    async def delete(self) -> None:
        """Clear the conversation (its messages and run records)."""
        await self.ci_app.ensure_started()
        store = self.ci_app.store
        conversation = await store.find_conversation(self._path())
        if conversation is not None:
            await store.clear(conversation.id)
        self.set_status(204)
        self.finish()


def _notebook_path(handler: web.RequestHandler) -> str:
    """The ``?path=`` of a request, in its canonical form (400 with what to do if none)."""
    path = handler.get_query_argument("path", "").strip()
    if not path:
        raise web.HTTPError(400, "Give the notebook's path as ?path=...")
    try:
        return notebook_path(path)
    except BadPath as err:
        raise web.HTTPError(400, str(err)) from None


class ExportHandler(BaseHandler):
    """``GET /jupyter-ci/conversation/export?path=NOTEBOOK``: the conversation as Markdown."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        """The Markdown text, offered as a download named after the notebook."""
        path = _notebook_path(self)
        await self.ci_app.ensure_started()
        store = self.ci_app.store
        conversation = await store.find_conversation(path)
        messages, runs, totals = await _stored(store, conversation, with_runs=True)
        events = await store.events_of([run.run_id for run in runs]) if runs else {}
        name = path.rsplit("/", 1)[-1].rsplit(".", 1)[0] or "conversation"
        self.set_header("Content-Disposition", attachment(f"{name}-jupyter-ci.md"))
        shown = conversation.path if conversation else path
        self.finish(
            export_markdown(shown, messages, runs, totals, events),
            set_content_type="text/markdown; charset=utf-8",
        )


async def _stored(
    store: ConversationStore, conversation: Conversation | None, *, with_runs: bool
) -> tuple[list[Message], list[RunRecord], UsageTotals]:
    """A conversation's messages, run records (``with_runs``) and usage (empty for none)."""
    if conversation is None:
        return [], [], UsageTotals(0, 0, 0.0, 0)
    messages = await store.messages(conversation.id, limit=None)
    runs = await store.runs(conversation.id) if with_runs else []
    return messages, runs, await store.usage_totals(conversation.id)


def attachment(filename: str) -> str:
    """A Content-Disposition header offering ``filename`` as a download, whatever its characters.

    An ASCII ``filename`` for old clients (anything else, quotes, backslashes and control
    characters made ``_``) and the exact name as ``filename*`` (RFC 6266, UTF-8, percent-encoded).
    """
    fallback = "".join(c if " " <= c < "\x7f" and c not in '"\\' else "_" for c in filename)
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename, safe='')}"
