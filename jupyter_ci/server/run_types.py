"""What the run manager deals in: its refusals, its answers, and what it needs of the server."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import JupyterCIError
from ..models.base import Model
from ..settings import Settings
from .lab.iopub import IOPubWatch


class RunRefused(JupyterCIError):
    """A client request the manager refuses; ``run_id`` names the run in the way, if any."""

    def __init__(
        self, code: str, message: str, *, hint: str = "", run_id: str | None = None
    ) -> None:
        super().__init__(message, hint=hint)
        self.refusal_code = code
        self.run_id = run_id

    @classmethod
    def of(cls, err: JupyterCIError) -> RunRefused:
        """A refusal saying what ``err`` says, with its code."""
        return cls(str(err.to_dict()["code"]), err.message, hint=err.hint)

    def to_dict(self) -> dict[str, Any]:
        """The ErrorInfo of the refusal."""
        return {"code": self.refusal_code, "message": self.message, "hint": self.hint}


class Publisher(Protocol):
    """Where the manager's messages go (the :class:`~jupyter_ci.server.hub.Hub`)."""

    def send(self, client_id: str, message: dict[str, Any]) -> bool:
        """Send to one tab; False if it is not connected."""
        ...

    def publish(self, notebook_path: str, owner: str, message: dict[str, Any]) -> None:
        """Send a run event to its owner and the tabs with its notebook open."""
        ...

    def announce(self, runs: list[dict[str, Any]]) -> None:
        """Send the run list to every tab (each sees the requests of its own notebooks only)."""
        ...

    def sees(self, client_id: str, notebook_path: str) -> bool:
        """Whether the tab has the notebook open now."""
        ...

    def is_connected(self, client_id: str) -> bool:
        """Whether the tab is connected now."""
        ...

    def user_of(self, client_id: str) -> str | None:
        """The user a tab belongs to (None if unknown)."""
        ...


class Kernels(Protocol):
    """What the manager needs of the server's kernels."""

    def has(self, kernel_id: str) -> bool:
        """Whether the server runs this kernel."""
        ...

    async def interrupt(self, kernel_id: str) -> None:
        """Interrupt the kernel (as its interrupt button does)."""
        ...

    def watch(self, kernel_id: str) -> IOPubWatch | None:
        """Listen to the kernel's output channel (None where the server cannot)."""
        ...


@dataclass(frozen=True)
class StartResult:
    """What a ``start_run`` request led to: a run (and its queue position), or only a note.

    ``run_id`` is None when no run was needed: a ``%%ci`` whose generated cells are still in the
    notebook is not sent to the model again. It is the run already going when the same ``%%ci``
    runs again meanwhile (Run All while its cell waits for review).
    """

    run_id: str | None
    position: int = 0
    note: str = ""
    #: Without a run: the status line of the ``%%ci``'s last run, which still stands.
    status_line: str = ""


#: Makes the model of a run from its settings (the server's key goes in here, never out).
ModelFactory = Callable[[Settings], Model]
#: Resolves a request's settings over the server's (raises ConfigError when not allowed).
SettingsResolver = Callable[[Mapping[str, Any]], Settings]
