"""One asyncio event loop on a daemon thread, shared by whatever in the process needs one.

The server runs model calls there (:mod:`jupyter_ci.models.threaded`: litellm's CPU work must not
stall the server's loop), and ``%%ci`` runs its agent loop there
(:mod:`jupyter_ci.workspaces.inkernel`: the kernel's own loop is busy on the main thread). One
loop serves the whole process rather than one per use: litellm caches its HTTP clients per event
loop.
"""

from __future__ import annotations

import asyncio
import threading


class BackgroundLoop:
    """An asyncio event loop running forever on a daemon thread."""

    _lock = threading.Lock()
    _instance: BackgroundLoop | None = None

    def __init__(self, name: str = "jupyter-ci-loop") -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._main, name=name, daemon=True)
        self.thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    @classmethod
    def shared(cls) -> BackgroundLoop:
        """The process's background loop (started on first use, again if its thread died)."""
        with cls._lock:
            if cls._instance is None or not cls._instance.thread.is_alive():
                cls._instance = cls()
            return cls._instance
