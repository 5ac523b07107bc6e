"""Shared pieces of the agent-loop tests: a real kernel workspace and the scripted model."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import nbformat

from jupyter_ci import protocol
from jupyter_ci.agent.loop import AgentRun, Approver, RunOutcome, RunRequest
from jupyter_ci.models.litellm_model import LiteLLMModel
from jupyter_ci.settings import Settings
from jupyter_ci.testing import ScriptedModelServer
from jupyter_ci.workspaces.kernel import KernelWorkspace

KEY = "sk-loop-test-0123456789abcdef"

IRIS_SETUP = """\
import pandas as pd
import numpy as np
rng = np.random.default_rng(0)
iris = pd.DataFrame({
    "sepal_length": rng.normal(5.8, 0.8, 150).round(1),
    "sepal_width": rng.normal(3.0, 0.4, 150).round(1),
    "petal_length": rng.normal(3.7, 1.7, 150).round(1),
    "petal_width": rng.normal(1.2, 0.7, 150).round(1),
    "species": np.repeat(["setosa", "versicolor", "virginica"], 50),
})
"""


def write_notebook(path: Path, sources: Sequence[str] = ()) -> Path:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in sources]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nbformat.write(notebook, str(path))
    return path


class Recorder:
    """Collects run events and checks each against the protocol schema."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self._arrived = asyncio.Event()

    def __call__(self, event: dict[str, Any]) -> None:
        protocol.validate("RunEvent", event)
        self.events.append(event)
        self._arrived.set()

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [event for event in self.events if event["type"] == kind]

    async def first(self, kind: str) -> dict[str, Any]:
        """The first event of ``kind``, once the run emitted it."""
        while not self.of(kind):
            self._arrived.clear()
            await self._arrived.wait()
        return self.of(kind)[0]


async def run_loop(
    workspace: KernelWorkspace,
    server: ScriptedModelServer,
    prompt: str,
    *,
    model_name: str = "openai/scripted",
    recorder: Recorder | None = None,
    run_holder: list[AgentRun] | None = None,
    approve: Approver | None = None,
    **settings: Any,
) -> RunOutcome:
    chosen = Settings(model=model_name, api_base=server.base_url, **settings)
    model = LiteLLMModel(chosen, api_key=KEY)
    run = AgentRun(RunRequest(prompt, chosen), workspace, model, on_event=recorder, approve=approve)
    if run_holder is not None:
        run_holder.append(run)
    return await run.run()
