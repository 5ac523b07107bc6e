"""The messages a run sends to the model: its opening, and what it says after each cell.

One budget rule for every opening: the notebook view gets what the context budget leaves after
the system prompt, the request (with the cells and files the user attached) and a reserve for
the reply. Kernel output, attached files and cells are data, never instructions: they go in a
nonce envelope (:func:`jupyter_ci.agent.digest.wrap_untrusted`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import NotebookUnavailable
from ..models.base import Model
from ..settings import Settings
from .context import build_context, describe_attached
from .digest import Digest, wrap_untrusted
from .prompts import render
from .workspace import Cell, Variable, Workspace

#: Tokens kept free for the request and the model's reply when sizing the notebook view.
RESERVED_TOKENS = 1200
#: The smallest notebook view budget, however long the request.
MIN_VIEW_TOKENS = 200


def text_of(content: Any, *, placeholders: bool = False) -> str:
    """The text of a message's content (a string, or a list of parts, joined by newlines).

    With ``placeholders`` a part that is not text (an image) shows as ``[its type]``.
    """
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    texts = []
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type", "text") == "text":
            texts.append(str(part.get("text", "")))
        elif placeholders:
            texts.append(f"[{part.get('type', 'part')}]")
    return "\n".join(texts)


@dataclass
class Conversation:
    """Builds a run's messages for one model: its settings, the request's parts, the nonce."""

    model: Model
    settings: Settings
    nonce: str
    prompt: str
    history: tuple[dict[str, Any], ...] = ()
    attachments: str = ""
    attached_cells: tuple[str, ...] = ()
    #: The project's instructions, added to the system prompt ('' for none).
    instructions: str = ""
    #: The parts of :meth:`opening`'s request message (notebook view, variables, request).
    _opened: tuple[str, str, str] = field(default=("", "", ""), init=False, repr=False)

    def system(self) -> str:
        """The system prompt: jupyter-ci's own, then the project's instructions."""
        own = render("system")
        return f"{own}\n\n{self.instructions}" if self.instructions else own

    async def opening(self, workspace: Workspace, anchor_id: str | None) -> list[dict[str, Any]]:
        """The first messages of a request: system, history, then notebook, variables, request."""
        cells = await workspace.read_cells()
        variables = await workspace.inspect_variables()
        attached = describe_attached(
            cells,
            self.attached_cells,
            nonce=self.nonce,
            share_outputs=self.settings.share_outputs,
        )
        request = self.prompt
        if attached:
            request = attached + "\n" + request
        if self.attachments:
            request = wrap_untrusted(self.attachments, self.nonce, "attached") + "\n" + request
        context = self._context(cells, variables, anchor_id, attached + self.prompt)
        self._opened = (context.notebook, context.variables, request)
        body = render(
            "request",
            notebook=context.notebook,
            variables=context.variables,
            looked="",
            request=request,
        )
        return [*self._start(), {"role": "user", "content": body}]

    def add_look(self, messages: list[dict[str, Any]], looked: str, digest: Digest) -> None:
        """Put ``looked`` (what the first look at the data showed, ``inspect_data``) into the
        request message of :meth:`opening`'s ``messages``, before the request itself: facts
        about the data the request is read with, not a cell of the model's to imitate
        (``digest``: the look's outputs, whose images a vision model is shown)."""
        notebook, variables, request = self._opened
        body = render(
            "request", notebook=notebook, variables=variables, looked=looked, request=request
        )
        messages[-1] = self.user_message(body, digest)

    async def fix_opening(
        self, workspace: Workspace, cell_id: str, digest_of: Any
    ) -> tuple[list[dict[str, Any]], Cell]:
        """The first messages of "fix this cell", and the cell; ``digest_of(outputs)`` digests.

        Raises :class:`NotebookUnavailable` when the cell is not a code cell of the notebook.
        """
        cells = await workspace.read_cells()
        target = next((cell for cell in cells if cell.id == cell_id), None)
        if target is None or target.cell_type != "code":
            raise NotebookUnavailable(
                "The cell to fix is not in the notebook (or is not a code cell).",
                hint="Select the failed code cell and ask again.",
            )
        variables = await workspace.inspect_variables()
        context = self._context(cells, variables, cell_id, target.source + self.prompt)
        digest: Digest = digest_of(target.outputs)
        shown = f"{target.source}\n# what it printed or raised:\n{digest.text or '(nothing)'}"
        body = render(
            "fix_request",
            notebook=context.notebook,
            variables=context.variables,
            cell=wrap_untrusted(shown, self.nonce, "the cell to fix"),
            request=self.prompt or "Fix this cell.",
        )
        return [*self._start(), self.user_message(body, digest)], target

    def user_message(self, text: str, digest: Digest) -> dict[str, Any]:
        """A user message, with the digest's images as image parts for a vision model."""
        if not digest.images or not getattr(self.model, "vision", False):
            return {"role": "user", "content": text}
        parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
        for image in digest.images:
            url = f"data:{image.mime};base64,{image.data}"
            parts.append({"type": "image_url", "image_url": {"url": url}})
        return {"role": "user", "content": parts}

    def wrap(self, text: str) -> str:
        """Kernel output as data for the model (in the run's nonce envelope)."""
        return wrap_untrusted(text, self.nonce, "kernel output")

    def prompt_tokens(self, messages: list[dict[str, Any]]) -> int:
        """The tokens of ``messages`` as the model will count them (estimated where unknown)."""
        return sum(self.model.count_tokens(text_of(m.get("content"))) for m in messages)

    @staticmethod
    def shrink(messages: list[dict[str, Any]]) -> None:
        """Halve the largest message's text (the notebook view, usually), keeping its ends."""
        index = max(range(1, len(messages)), key=lambda i: len(text_of(messages[i].get("content"))))
        text = text_of(messages[index].get("content"))
        keep = len(text) // 4
        messages[index] = {
            **messages[index],
            "content": text[:keep] + "\n[... cut to fit the model's context ...]\n" + text[-keep:],
        }

    def _start(self) -> list[dict[str, Any]]:
        return [{"role": "system", "content": self.system()}, *(dict(m) for m in self.history)]

    def _context(
        self, cells: list[Cell], variables: list[Variable], anchor_id: str | None, request: str
    ) -> Any:
        used = self.model.count_tokens(self.system() + request)
        budget = max(self.settings.context_tokens - used - RESERVED_TOKENS, MIN_VIEW_TOKENS)
        return build_context(
            cells,
            variables,
            anchor_id=anchor_id,
            budget_tokens=budget,
            count_tokens=self.model.count_tokens,
            nonce=self.nonce,
            share_outputs=self.settings.share_outputs,
        )
