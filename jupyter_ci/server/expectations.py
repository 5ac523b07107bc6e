"""The ``%%ci`` cells tabs expect from a server-side executor, written where the kernel reads them.

A tab sends ``expect_handoff`` when it schedules a ``%%ci`` cell. Should an extension such as
jupyter-server-nbmodel run that cell from the server (with the kernel manager's own client, and
no cell metadata), the magic finds the cell here by its code and the session it came from, and
hands it off as it would a stamped request (see :mod:`jupyter_ci.expected`). An expectation
ends when a run is started for its cell's handoff, when it expires, or with its kernel.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from typing import Any

from .. import expected

log = logging.getLogger("jupyter_ci.server")


class HandoffExpectations:
    """Expected ``%%ci`` cells by kernel, mirrored in each kernel's expectations file."""

    def __init__(
        self,
        kernel_manager: Callable[[], Any],
        *,
        clock: Callable[[], float] = time.time,
        lifetime: float = expected.LIFETIME,
        logger: logging.Logger | None = None,
    ) -> None:
        #: The server's MappingKernelManager (None while there is none).
        self.kernel_manager = kernel_manager
        self.clock = clock
        self.lifetime = lifetime
        self.log = logger or log
        self._expected: dict[str, list[expected.Expectation]] = {}
        #: Where each kernel's file is, and the session its clients send from.
        self._files: dict[str, tuple[str, str]] = {}

    def expect(self, kernel_id: str, cell_id: str, code: str) -> bool:
        """Expect the ``%%ci`` cell ``cell_id`` with this code on this kernel.

        False when the kernel is not a local kernel of this server (a server-side executor
        could not be recognised in it; nothing is written).
        """
        where = self._locate(kernel_id)
        if where is None:
            return False
        now = self.clock()
        kept = [
            e for e in self._expected.get(kernel_id, []) if e.expires > now and e.cell_id != cell_id
        ]
        kept.append(
            expected.Expectation(
                id=secrets.token_hex(8),
                cell_id=cell_id,
                digest=expected.code_digest(code),
                expires=now + self.lifetime,
            )
        )
        self._expected[kernel_id] = kept
        return self._write(kernel_id)

    def fulfilled(self, kernel_id: str, cell_id: str) -> None:
        """A run was asked for the cell's handoff: it is no longer expected."""
        entries = self._expected.get(kernel_id)
        if not entries:
            return
        now = self.clock()
        kept = [e for e in entries if e.cell_id != cell_id and e.expires > now]
        if len(kept) != len(entries):
            self._expected[kernel_id] = kept
            self._write(kernel_id)

    def forget(self, kernel_id: str) -> None:
        """The kernel restarted or shut down: nothing it was sent earlier is expected."""
        if kernel_id in self._expected:
            self._expected[kernel_id] = []
            self._write(kernel_id)
        self._expected.pop(kernel_id, None)
        self._files.pop(kernel_id, None)

    def close(self) -> None:
        """Remove every file this server wrote."""
        for kernel_id in list(self._expected):
            self.forget(kernel_id)

    def _locate(self, kernel_id: str) -> tuple[str, str] | None:
        if kernel_id in self._files:
            return self._files[kernel_id]
        manager = self.kernel_manager()
        if manager is None or kernel_id not in manager:
            return None
        kernel = manager.get_kernel(kernel_id)
        connection_file = getattr(kernel, "connection_file", "")
        session = getattr(getattr(kernel, "session", None), "session", "")
        if not connection_file or not isinstance(session, str) or not session:
            return None
        where = (expected.path_for(str(connection_file)), session)
        self._files[kernel_id] = where
        return where

    def _write(self, kernel_id: str) -> bool:
        path, session = self._files[kernel_id]
        entries = self._expected.get(kernel_id, [])
        try:
            expected.write(path, session, entries)
        except OSError as err:
            self.log.warning("jupyter-ci: could not write %s: %s", path, err)
            return False
        if not entries:
            self._expected.pop(kernel_id, None)
        return True
