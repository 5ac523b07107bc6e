"""The browser tabs connected to the server, and where each message goes.

A tab names itself with a ``client_id`` in its ``hello`` (kept across reconnects of that tab) and
the notebooks it has open. The hub delivers:

- calls of a run only to the tab that owns it;
- run events to the owner and to every tab with the run's notebook open (another tab on the same
  notebook shows that a run is in progress there);
- the list of runs (``RunsNotice``) to every tab.

Sending never blocks: a connection queues the message (tornado's ``write_message``) or drops it
when closed. A tab that reconnects asks for what it missed (``replay``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol


class Connection(Protocol):
    """One websocket connection, as the hub sees it."""

    def send(self, message: dict[str, Any]) -> None:
        """Queue ``message`` for the tab (dropped if the connection is closed)."""
        ...


@dataclass
class _Client:
    connection: Connection
    notebook_paths: set[str] = field(default_factory=set)


class Hub:
    """Connected tabs by ``client_id``, with the notebooks each has open."""

    def __init__(self) -> None:
        self._clients: dict[str, _Client] = {}
        self._ids: dict[int, str] = {}
        #: Called with a client id when its tab connects again (or for the first time).
        self.on_connected: Callable[[str], None] | None = None
        #: Called with a client id when its tab's connection closes.
        self.on_disconnected: Callable[[str], None] | None = None

    # --- connections ---------------------------------------------------------------------

    def hello(self, connection: Connection, client_id: str, notebook_paths: Iterable[str]) -> None:
        """Bind ``connection`` to ``client_id`` (replacing an older connection of that tab)."""
        previous = self._ids.get(id(connection))
        if previous is not None and previous != client_id:
            self._forget(connection)
        self._clients[client_id] = _Client(connection, set(notebook_paths))
        self._ids[id(connection)] = client_id
        if self.on_connected is not None:
            self.on_connected(client_id)

    def client_of(self, connection: Connection) -> str | None:
        """The client id a connection said hello as (None before its hello)."""
        return self._ids.get(id(connection))

    def subscribe(self, connection: Connection, notebook_paths: Iterable[str]) -> None:
        """The notebooks the connection's tab has open now."""
        client_id = self._ids.get(id(connection))
        if client_id is not None and client_id in self._clients:
            self._clients[client_id].notebook_paths = set(notebook_paths)

    def closed(self, connection: Connection) -> None:
        """The connection closed; its tab counts as disconnected unless it reconnected already."""
        client_id = self._forget(connection)
        if client_id is not None and self.on_disconnected is not None:
            self.on_disconnected(client_id)

    def _forget(self, connection: Connection) -> str | None:
        client_id = self._ids.pop(id(connection), None)
        client = self._clients.get(client_id) if client_id is not None else None
        if client is None or client.connection is not connection:
            return None  # a newer connection of the same tab took over
        del self._clients[client_id]  # type: ignore[arg-type]
        return client_id

    def is_connected(self, client_id: str) -> bool:
        """Whether the tab has a live connection."""
        return client_id in self._clients

    # --- sending -------------------------------------------------------------------------

    def send(self, client_id: str, message: dict[str, Any]) -> bool:
        """Send to one tab; False if it is not connected."""
        client = self._clients.get(client_id)
        if client is None:
            return False
        client.connection.send(message)
        return True

    def publish(self, notebook_path: str, owner: str, message: dict[str, Any]) -> None:
        """Send a run's event to its owner and to every tab with its notebook open."""
        for client_id, client in list(self._clients.items()):
            if client_id == owner or notebook_path in client.notebook_paths:
                client.connection.send(message)

    def broadcast(self, message: dict[str, Any]) -> None:
        """Send to every connected tab."""
        for client in list(self._clients.values()):
            client.connection.send(message)

    def rename(self, old_path: str, new_path: str) -> None:
        """A notebook was renamed: tabs that had it open have it under its new path."""
        for client in self._clients.values():
            if old_path in client.notebook_paths:
                client.notebook_paths.discard(old_path)
                client.notebook_paths.add(new_path)
