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

from jupyter_ci.testing import ScriptedModelServer

from .conftest import SCRIPTED_KEY, model_lab_args
from .lab import ARTIFACTS, Lab
from .team import (
    gateway_missing,
    handoff_runs_a_generated_cell,
    panel_request_stop_and_export,
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
