"""How a cell's execution ended: the one place that decides it.

Each workspace gathers the raw facts of an execution (the kernel's reply status, the error's
name, whether jupyter-ci interrupted the cell at its timeout or because the run was asked to
stop, and what became of the kernel) and :func:`classify` turns them into a :class:`CellStatus`.
The agent loop reads only that status. The JupyterLab tab reports the raw reply; the server
classifies it here, like the other workspaces.
"""

from __future__ import annotations

from enum import Enum


class CellStatus(str, Enum):
    """How a cell's execution ended (the schema's ``CellStatus``, with the label of each)."""

    OK = "ok"
    #: The cell raised; its error output is among the outputs.
    ERROR = "error"
    #: jupyter-ci interrupted it when it ran past the run's timeout.
    TIMED_OUT = "timed_out"
    #: jupyter-ci interrupted it because the run was asked to stop.
    INTERRUPTED = "interrupted"
    #: An interrupt jupyter-ci did not send (the kernel's interrupt button) ended it, or the
    #: kernel skipped it: the user stopped it.
    ABORTED = "aborted"
    KERNEL_DIED = "kernel_died"
    KERNEL_SHUTDOWN = "kernel_shutdown"
    KERNEL_RESTARTED = "kernel_restarted"

    @property
    def stopped(self) -> bool:
        """Whether the cell was stopped on purpose (by jupyter-ci's Stop or by the user)."""
        return self in (CellStatus.INTERRUPTED, CellStatus.ABORTED)

    @property
    def kernel_gone(self) -> bool:
        """Whether the kernel died, was shut down or restarted while the cell ran."""
        return self in _KERNEL_GONE


class KernelFate(str, Enum):
    """What became of the kernel during an execution."""

    ALIVE = "alive"
    DIED = "died"
    SHUTDOWN = "shutdown"
    RESTARTED = "restarted"


_KERNEL_GONE = frozenset(
    {CellStatus.KERNEL_DIED, CellStatus.KERNEL_SHUTDOWN, CellStatus.KERNEL_RESTARTED}
)
_BY_FATE = {
    KernelFate.DIED: CellStatus.KERNEL_DIED,
    KernelFate.SHUTDOWN: CellStatus.KERNEL_SHUTDOWN,
    KernelFate.RESTARTED: CellStatus.KERNEL_RESTARTED,
}

#: The exception a kernel interrupt raises in a Python kernel.
INTERRUPT_ERROR = "KeyboardInterrupt"


def classify(
    reply_status: str | None,
    error_name: str | None = None,
    *,
    timed_out: bool = False,
    interrupted: bool = False,
    kernel: KernelFate = KernelFate.ALIVE,
) -> CellStatus:
    """How an execution ended, from its raw facts.

    ``reply_status`` is the kernel's ``execute_reply`` status (``ok``, ``error``, ``aborted``;
    None when no reply came for the request); ``error_name`` the ``ename`` of its error, if any;
    ``timed_out`` whether jupyter-ci interrupted it at the timeout; ``interrupted`` whether
    jupyter-ci interrupted the kernel during it because the run was asked to stop; ``kernel``
    what became of the kernel meanwhile.
    """
    if kernel is not KernelFate.ALIVE:
        return _BY_FATE[kernel]
    if timed_out:
        return CellStatus.TIMED_OUT
    if reply_status is None or reply_status == "aborted":
        # No reply for our request (another execution of the cell took its place), or the
        # kernel skipped it.
        return CellStatus.ABORTED
    if error_name == INTERRUPT_ERROR:
        return CellStatus.INTERRUPTED if interrupted else CellStatus.ABORTED
    if reply_status == "error" or error_name:
        return CellStatus.ERROR
    return CellStatus.OK
