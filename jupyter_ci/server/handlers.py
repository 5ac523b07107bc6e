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
    async def get(self) -> None:
        """Return the status document."""
        await self.ci_app.ensure_started()
        self.write_json(await self.ci_app.status())


#: How many of a conversation's latest runs come with their steps (events) in its history.
HISTORY_RUNS = 50


class ConversationHandler(BaseHandler):
    """``/jupyter-ci/conversation?path=NOTEBOOK``: a notebook's conversation for the chat panel.

    ``GET`` returns its messages (oldest first), the stored events of its latest runs (so the
    panel shows their steps and usage again after a reload) and the tokens and cost of its runs;
    ``DELETE`` clears it (the panel asks the user first). Conversations follow notebook renames.
    """

    def _path(self) -> str:
        path = self.get_query_argument("path", "").strip()
        if not path:
            raise web.HTTPError(400, "Give the notebook's path as ?path=...")
        return path

    @web.authenticated
    @authorized
    async def get(self) -> None:
        """The conversation's messages, its latest runs' events and its usage."""
        await self.ci_app.ensure_started()
        store = self.ci_app.store
        conversation = await store.conversation_for(self._path())
        messages = await store.messages(conversation.id, limit=None)
        totals = await store.usage_totals(conversation.id)
        run_ids = list(dict.fromkeys(m.run_id for m in messages if m.run_id))[-HISTORY_RUNS:]
        events = await store.events_of(run_ids)
        runs = [{"run_id": run_id, "events": events[run_id]} for run_id in run_ids]
        self.write_json(
            {
                "conversation_id": conversation.id,
                "path": conversation.path,
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
        conversation = await store.conversation_for(self._path())
        await store.clear(conversation.id)
        self.set_status(204)
        self.finish()


class ExportHandler(BaseHandler):
    """``GET /jupyter-ci/conversation/export?path=NOTEBOOK``: the conversation as Markdown."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        """The Markdown text, offered as a download named after the notebook."""
        path = self.get_query_argument("path", "").strip()
        if not path:
            raise web.HTTPError(400, "Give the notebook's path as ?path=...")
        await self.ci_app.ensure_started()
        store = self.ci_app.store
        conversation = await store.conversation_for(path)
        messages = await store.messages(conversation.id, limit=None)
        totals = await store.usage_totals(conversation.id)
        name = path.rsplit("/", 1)[-1].rsplit(".", 1)[0] or "conversation"
        self.set_header("Content-Disposition", f'attachment; filename="{name}-jupyter-ci.md"')
        self.finish(
            export_markdown(conversation.path, messages, totals),
            set_content_type="text/markdown; charset=utf-8",
        )


def export_markdown(path: str, messages: Any, totals: Any) -> str:
    """A conversation as Markdown: who said what, in order, and what it cost."""
    names = {"user": "You", "assistant": "jupyter-ci", "notice": "Note"}
    lines = [f"# jupyter-ci conversation: {path}", ""]
    for message in messages:
        lines.append(f"**{names.get(message.role, message.role)}:**")
        lines.append("")
        lines.append(message.text)
        lines.append("")
    cost = "unknown" if totals.cost is None else f"${totals.cost:.4f}"
    lines.append(
        f"_{totals.runs} run(s), {totals.prompt_tokens + totals.completion_tokens:,} tokens, "
        f"cost {cost}._"
    )
    return "\n".join(lines) + "\n"
