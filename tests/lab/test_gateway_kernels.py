"""Kernels that are not this server's processes: a JupyterLab started with ``--gateway-url``
holds ``GatewayKernelManager`` objects, with no connection file and no process here.

The browser side (a real kernel gateway) is ``tests/browser/test_team_gateway.py`` in ``.ci/run``'s
team stage; these check, without a gateway, what the server assumes of such a kernel.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from jupyter_server.gateway.managers import GatewayKernelManager

from jupyter_ci.server.expectations import HandoffExpectations
from jupyter_ci.server.lab.iopub import IOPubWatch


class _Kernels(dict[str, GatewayKernelManager]):
    """The mapping kernel manager's view used by :class:`HandoffExpectations`."""

    def get_kernel(self, kernel_id: str) -> GatewayKernelManager:
        return self[kernel_id]


def test_a_gateway_kernel_gets_no_expectations_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Anything written would land in the working directory or the runtime directory.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path))
    kernel = GatewayKernelManager(kernel_id="remote")
    assert kernel.connection_file == ""  # no file here: the kernel's own is on the gateway's host
    expectations = HandoffExpectations(lambda: _Kernels(remote=kernel))
    # The tab is told the server cannot recognise a server-side execution in that kernel (the
    # magic there runs %%ci itself, as without a frontend), and nothing is written.
    assert expectations.expect("remote", "cell-1", "%%ci plot it") is False
    expectations.close()
    assert list(tmp_path.iterdir()) == []


def test_the_server_does_not_listen_to_a_gateway_kernels_channels() -> None:
    # Its channels are on the gateway's host (no connection file here): a reload while one of
    # its cells runs ends the run (test_resilience.py checks that fallback).
    assert IOPubWatch.open(GatewayKernelManager(kernel_id="remote")) is None
