"""A small Python API: run a request against a notebook file, get the outcome back.

    from jupyter_ci.api import run_notebook
    outcome = run_notebook(
        "analysis.ipynb", "plot the iris data", options={"model": "openai/gpt-4o-mini"}
    )
    print(outcome.status_line())

The same as ``jupyter ci run``: a kernel is started for the notebook, generated cells are appended
(after the last cell) with their outputs, and the file is written atomically.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from .agent.instructions import file_instructions
from .agent.loop import AgentRun, EventCallback, RunOutcome, RunRequest
from .config import environment_values
from .models.base import Model
from .settings import Layer, Settings, resolve_settings
from .workspaces.notebook_file import check_notebook_file, exclusive_run, save_run

T = TypeVar("T")


def resolve_api_settings(options: Mapping[str, Any] | None = None) -> Settings:
    """Settings from ``JUPYTER_CI_*`` variables and ``options`` (both the caller's own)."""
    return resolve_settings(
        [
            Layer("the environment", environment_values(), trusted=True),
            Layer("the options", dict(options or {}), trusted=True),
        ]
    )


async def run_notebook_async(
    path: str | Path,
    prompt: str,
    *,
    settings: Settings | None = None,
    restore: bool = False,
    model: Model | None = None,
    on_event: EventCallback | None = None,
    kernel_name: str | None = None,
    options: Mapping[str, Any] | None = None,
    nonce: str | None = None,
) -> RunOutcome:
    """Run ``prompt`` against the notebook at ``path`` and save it; see :func:`run_notebook`.

    ``nonce`` fixes the id of the markers around kernel output in the model's prompts, which
    is otherwise random per run so that output cannot forge one: for the bench only, whose
    seeded arms need the same prompts for the same question (never where output is not yours).
    """
    from .models.litellm_model import LiteLLMModel
    from .workspaces.kernel import KernelWorkspace

    settings = settings or resolve_api_settings(options)
    chosen: Model = model or LiteLLMModel.from_settings(settings, where="api")
    notebook = Path(path)
    original = check_notebook_file(notebook)
    with exclusive_run(notebook):
        async with await KernelWorkspace.open(notebook, kernel_name=kernel_name) as workspace:
            cells = workspace.notebook.cells
            anchor = str(cells[-1].id) if cells else None
            if restore:
                await workspace.restore()
            instructions = file_instructions(settings.instructions, notebook)
            request = RunRequest(prompt, settings, instructions=instructions)
            run = AgentRun(request, workspace, chosen, on_event=on_event, nonce=nonce)
            outcome = await run.run()
            if outcome.cells:
                note = await asyncio.to_thread(
                    save_run, notebook, original, workspace.notebook, outcome.cells, anchor
                )
                if note:
                    outcome.notices.append(note)
        return outcome


def run_notebook(path: str | Path, prompt: str, **kwargs: Any) -> RunOutcome:
    """Run ``prompt`` against a notebook file with a fresh kernel; return the outcome.

    Keyword arguments: ``options`` (a mapping of option names of :mod:`jupyter_ci.options`:
    ``{"model": ..., "max_attempts": ...}``, over the ``JUPYTER_CI_*`` variables) or ``settings``
    (an already resolved :class:`Settings`); ``restore=True`` re-runs the notebook's code cells
    first; ``model`` a :class:`~jupyter_ci.models.Model` object to use instead of litellm;
    ``on_event`` receives run events; ``kernel_name`` overrides the notebook's kernel. Generated
    cells are added after the last cell; existing cells are never changed. The file is written
    (atomically) only if cells were generated; if another program changed it meanwhile, the run's
    cells are merged into its version (see :func:`~jupyter_ci.workspaces.notebook_file.save_run`).
    A file that cannot be run on (not a notebook, read-only, another run on it) raises
    :class:`~jupyter_ci.errors.BadNotebookFile` before anything runs.
    """
    return asyncio.run(closing_clients(run_notebook_async(path, prompt, **kwargs)))


async def closing_clients(work: Awaitable[T]) -> T:
    """``work``, then litellm's HTTP clients closed on the loop that used them (the caller's
    ``asyncio.run`` ends it): see :func:`~jupyter_ci.models.litellm_model.close_clients`."""
    from .models.litellm_model import close_clients

    try:
        return await work
    finally:
        await close_clients()
