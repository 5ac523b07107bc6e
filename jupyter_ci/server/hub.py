"""The browser tabs connected to the server, and where each message goes.

A tab names itself with a ``client_id`` in its ``hello`` (kept across reconnects of that tab) and
the notebooks it has open. The first hello of a client id gets a secret, and a later hello of the
same id must show it: another connection cannot take a tab's place (and its runs' calls). The hub
delivers:

- calls of a run only to the tab that owns it;
- run events to the owner and to every tab with the run's notebook open (another tab on the same
  notebook shows that a run is in progress there);
- the list of runs (``RunsNotice``) to every tab, each run's request (its start) only to its owner
  and the tabs with its notebook open.

A client id stays bound to its secret (and its user) while the server holds a run of it (its
runs' calls and events go by that id): it is never forgotten then, and another connection cannot
take the id without the secret. Hellos are bounded: a few per connection (the connection is closed
beyond), and new client ids at most :data:`NEW_CLIENTS_PER_MINUTE` a minute per user.

Sending never blocks: a connection queues the message (tornado's ``write_message``) or drops it
when closed. A tab that reconnects asks for what it missed (``replay``).
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

#: Characters of a run's request shown in the run list (the whole request is the owner's).
PROMPT_SHOWN = 300
#: Client ids whose secret the hub remembers; beyond, the least recently seen of those that hold
#: no run and are not connected are forgotten.
KNOWN_CLIENTS = 10_000
#: Hellos one connection may say (a tab says one, and one more as a new client if its id was
#: taken); the connection is closed beyond.
HELLOS_PER_CONNECTION = 4
#: New client ids one user may introduce in a minute (a tab keeps its id across reloads).
NEW_CLIENTS_PER_MINUTE = 60
#: New client ids all users together may introduce in a minute (a shared token's connections
#: without a login cookie are each a new anonymous user to Jupyter).
NEW_CLIENTS_PER_MINUTE_ALL = 600


class ClientTaken(Exception):
    """A hello for a client id that is not this connection's to take."""


class HelloRefused(Exception):
    """A hello the hub will not take now: too many of them (``code``, a sentence, a hint).

    ``close`` says whether the connection must be closed (it said too many hellos)."""

    def __init__(self, code: str, message: str, hint: str, *, close: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.hint = hint
        self.close = close


class Connection(Protocol):
    """One websocket connection, as the hub sees it (``user``: who authenticated it)."""

    user: str

    def send(self, message: dict[str, Any]) -> None:
        """Queue ``message`` for the tab (dropped if the connection is closed)."""
        ...

    def close(self, reason: str) -> None:
        """Close the connection, saying why."""
        ...


#: The key of every user's new client ids together.
_ALL = "\0all"


@dataclass
class _Identity:
    secret: str
    user: str


@dataclass
class _Client:
    connection: Connection
    notebook_paths: set[str] = field(default_factory=set)


class Hub:
    """Connected tabs by ``client_id``, with the notebooks each has open."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clients: dict[str, _Client] = {}
        self._ids: dict[int, str] = {}
        self._identities: OrderedDict[str, _Identity] = OrderedDict()
        self._hellos: dict[int, int] = {}
        self._new: dict[str, deque[float]] = {}
        self._clock = clock
        #: Whether the server holds a run of a client id (its identity is kept then).
        self.holds: Callable[[str], bool] = lambda client_id: False
        #: Called with a client id when its tab connects again (or for the first time), and
        #: whether it is a page's first hello (a reloaded page holds none of its runs' cells).
        self.on_connected: Callable[[str, bool], None] | None = None
        #: Called with a client id when its tab's connection closes.
        self.on_disconnected: Callable[[str], None] | None = None

    # --- connections ---------------------------------------------------------------------

    def hello(
        self,
        connection: Connection,
        client_id: str,
        notebook_paths: Iterable[str],
        secret: str | None = None,
        *,
        page_start: bool = False,
    ) -> str:
        """Bind ``connection`` to ``client_id`` (replacing an older connection of that tab);
        returns the client id's secret.

        A client id seen before is taken only with its ``secret``: :class:`ClientTaken` if
        not. :class:`HelloRefused` when the connection said too many
        hellos, its user introduced too many new client ids lately, or the server holds as many
        as it can.
        """
        user = getattr(connection, "user", "") or ""
        said = self._hellos.get(id(connection), 0) + 1
        self._hellos[id(connection)] = said
        if said > HELLOS_PER_CONNECTION:
            raise HelloRefused(
                "too_many_hellos",
                f"A connection may say hello at most {HELLOS_PER_CONNECTION} times.",
                "Reload the page.",
                close=True,
            )
        known = self._identities.get(client_id)
        if known is None:
            self._admit(user)
            known = _Identity(secrets.token_urlsafe(24), user)
            self._identities[client_id] = known
        elif secret is None or not secrets.compare_digest(secret, known.secret):
            raise ClientTaken(client_id)
        self._identities.move_to_end(client_id)
        previous = self._ids.get(id(connection))
        if previous is not None and previous != client_id:
            self._forget(connection)
        self._clients[client_id] = _Client(connection, set(notebook_paths))
        self._ids[id(connection)] = client_id
        if self.on_connected is not None:
            self.on_connected(client_id, page_start)
        return known.secret

    def _admit(self, user: str) -> None:
        """Make room for a new client id of ``user``, or refuse it (:class:`HelloRefused`)."""
        now = self._clock()
        recent = self._new.setdefault(user, deque())
        everyone = self._new.setdefault(_ALL, deque())
        for times in (recent, everyone):
            while times and now - times[0] > 60:
                times.popleft()
        for times, limit, whose in (
            (recent, NEW_CLIENTS_PER_MINUTE, "per user"),
            (everyone, NEW_CLIENTS_PER_MINUTE_ALL, "for all users"),
        ):
            if len(times) >= limit:
                raise HelloRefused(
                    "too_many_clients",
                    f"Too many new jupyter-ci tabs: at most {limit} a minute {whose}.",
                    "Wait a minute, then reload the page.",
                )
        if len(self._identities) >= KNOWN_CLIENTS and not self._forget_one():
            raise HelloRefused(
                "too_many_clients",
                "The server holds as many jupyter-ci tabs as it can, each with a run.",
                "Close tabs you no longer use, or wait for their runs to end.",
            )
        recent.append(now)
        everyone.append(now)
        for idle in [name for name, times in self._new.items() if not times]:
            del self._new[idle]

    def _forget_one(self) -> bool:
        """Forget the least recently seen client id that holds no run and is not connected."""
        for client_id in self._identities:
            if client_id not in self._clients and not self.holds(client_id):
                del self._identities[client_id]
                return True
        return False

    def user_of(self, client_id: str) -> str | None:
        """The user a client id belongs to (None if unknown)."""
        known = self._identities.get(client_id)
        return known.user if known is not None else None

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
        self._hellos.pop(id(connection), None)
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

    def sees(self, client_id: str, notebook_path: str) -> bool:
        """Whether the tab has the notebook open now."""
        client = self._clients.get(client_id)
        return client is not None and notebook_path in client.notebook_paths

    def viewers(self, notebook_path: str) -> list[str]:
        """The tabs that have the notebook open now (in the order they first said hello)."""
        return [
            client_id
            for client_id, client in self._clients.items()
            if notebook_path in client.notebook_paths
        ]

    def open_paths(self) -> set[str]:
        """Every notebook some tab has open now."""
        return {path for client in self._clients.values() for path in client.notebook_paths}

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

    def announce(self, runs: list[dict[str, Any]]) -> None:
        """Send the run list to every tab, each as :meth:`runs_for` that tab."""
        for client_id, client in list(self._clients.items()):
            client.connection.send({"notice": "runs", "runs": self.runs_for(client_id, runs)})

    def runs_for(self, client_id: str, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The run list as a tab sees it: a run's request (its start) only for its owner and tabs
        with its notebook open."""
        client = self._clients.get(client_id)
        paths: set[str] = client.notebook_paths if client is not None else set()
        return [
            _shown(info, info.get("owner") == client_id or info.get("notebook_path") in paths)
            for info in runs
        ]

    def rename(self, old_path: str, new_path: str) -> None:
        """A notebook was renamed: tabs that had it open have it under its new path."""
        for client in self._clients.values():
            if old_path in client.notebook_paths:
                client.notebook_paths.discard(old_path)
                client.notebook_paths.add(new_path)


def _shown(info: Mapping[str, Any], with_prompt: bool) -> dict[str, Any]:
    prompt = str(info.get("prompt", ""))
    return {**info, "prompt": prompt[:PROMPT_SHOWN] if with_prompt else ""}
