"""jupyter-ci in a JupyterLab whose kernels come from a kernel gateway (``jupyter kernelgateway``
on 127.0.0.1, JupyterLab started with ``--gateway-url``): the model and its key stay with the
Lab server; the kernels, the gateway's, run the generated cells and are interrupted through it.

Skipped unless jupyter_kernel_gateway is installed (``.ci/run``'s team stage installs it and
removes it again).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from jupyter_ci.testing import Reply, ScriptedModelServer

from .chat import stored_conversation, wait_run_state
from .conftest import SCRIPTED_KEY, model_lab_args
from .lab import ARTIFACTS, Lab
from .notebooks import wait_until
from .team import (
    gateway_missing,
    handoff_runs_a_generated_cell,
    long_cell_started_from_the_panel,
    panel_request_stop_and_export,
    rest,
    start_gateway_lab,
)

pytestmark = pytest.mark.skipif(bool(gateway_missing()), reason=gateway_missing() or "ready")


@pytest.fixture(scope="module")
def model_lab(
    tmp_path_factory: pytest.TempPathFactory, scripted_server: ScriptedModelServer
) -> Iterator[Lab]:
    """A JupyterLab whose kernels are the gateway's (the shared browser fixtures use it)."""
    base = tmp_path_factory.mktemp("gateway-lab")
    with start_gateway_lab(
        base, model_lab_args(scripted_server, base), env={"JUPYTER_CI_API_KEY": SCRIPTED_KEY}
    ) as (running, gateway_log):
        try:
            yield running
        finally:
            ARTIFACTS.mkdir(exist_ok=True)
            (ARTIFACTS / "gateway-lab.log").write_text(running.log())
            (ARTIFACTS / "kernelgateway.log").write_text(gateway_log.read_text())


def test_ci_handoff_runs_in_the_gateways_kernel(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    printed = handoff_runs_a_generated_cell(model_context, model_lab, model)
    assert "host gateway" in printed
    assert "key no" in printed


def test_panel_request_stop_and_export_with_the_gateways_kernel(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    panel_request_stop_and_export(model_context, model_lab, model)


def test_a_restart_of_the_gateways_kernel_stops_the_run(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    # The gateway's kernel manager reports the restart as the server's own does (its
    # kernel_actions event); the run stops, saying so, and its cell is not run again.
    page, path = long_cell_started_from_the_panel(
        model_context, model_lab, model, [Reply.text("never")]
    )
    sessions = rest(model_lab, "GET", "api/sessions")
    [kernel_id] = [s["kernel"]["id"] for s in sessions if s["path"] == path]
    rest(model_lab, "POST", f"api/kernels/{kernel_id}/restart")
    assert wait_run_state(page, ("done", "failed", "stopped"), timeout=60) == "stopped"

    def finished() -> dict[str, Any] | None:
        runs = stored_conversation(model_lab, path)["runs"]
        ends = [e for run in runs for e in run["events"] if e.get("type") == "finished"]
        return ends[-1] if ends else None

    end = wait_until(finished, 30, "the run's finished event in the store")
    assert (end["state"], end["reason"]) == ("stopped", "kernel_restarted"), end
    assert len(model.chat_requests) == 1
    assert model_context.jupyter_ci_errors == []
