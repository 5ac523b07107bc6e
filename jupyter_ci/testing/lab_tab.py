"""A Python stand-in for a JupyterLab tab with jupyter-ci: the browser's side of the websocket.

:class:`ScriptedTab` connects to a running Jupyter server's ``/jupyter-ci/ws``, says hello, keeps
an in-memory notebook per path, and answers the server's calls the way the labextension does:
cells are inserted, edited and read by id; ``run_cell`` executes in the notebook's real kernel
(through a kernel client the test supplies), reports ``started`` when the kernel begins the cell,
and returns the raw reply status with the outputs (the server classifies how the cell ended, as it
does for the labextension); ``evaluate`` sends a silent request with the expression. The
outputs are built by the one normaliser (:class:`~jupyter_ci.execution.outputs.NotebookOutputs`),
as every workspace builds them. A call id seen before is answered with the same result, never done
twice (the server resends unanswered calls after a reconnect).

Tests and benchmarks drive the server with it without a browser:

    tab = ScriptedTab(server_url, token, kernel_client_for=connect)
    await tab.connect()
    tab.open_notebook("a.ipynb", kernel_id, cells=[...])
    reply = await tab.request({"request": "start_run", ...})
    finished = await tab.wait_for_event(lambda e: e["type"] == "finished")
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import nbformat

from ..execution.outputs import NotebookOutputs
from ..vocabulary import constant

#: As the labextension: how long a request's reply may lag its idle status (seconds).
REPLY_GRACE = float(constant("ReplyGraceSeconds"))

#: Makes an (async, started) jupyter_client kernel client for a kernel id.
KernelClientFactory = Callable[[str], Awaitable[Any]]


@dataclass
class TabNotebook:
    """A notebook as the tab holds it: its kernel and its cells (nbformat-like dicts)."""

    path: str
    kernel_id: str
    cells: list[dict[str, Any]] = field(default_factory=list)
    #: Builds the cells' outputs from kernel messages (display ids span the notebook's cells).
    outputs: NotebookOutputs = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # nbclient reads cells by attribute: nbformat nodes (dicts too), in this very list.
        self.cells[:] = [_node(cell) for cell in self.cells]
        self.outputs = NotebookOutputs(nbformat.NotebookNode(cells=self.cells))  # type: ignore[no-untyped-call]

    def index(self, cell_id: str) -> int:
        """The position of a cell; ``KeyError`` if there is none with that id."""
        for position, cell in enumerate(self.cells):
            if cell["id"] == cell_id:
                return position
        raise KeyError(cell_id)

    def cell(self, cell_id: str) -> dict[str, Any]:
        """The cell with this id."""
        return self.cells[self.index(cell_id)]

    def sources(self) -> list[str]:
        """The cells' sources, in order."""
        return [str(cell["source"]) for cell in self.cells]


def code_cell(source: str, cell_id: str | None = None, **metadata: Any) -> dict[str, Any]:
    """A code cell (an nbformat node, which is a dict) for :meth:`ScriptedTab.open_notebook`."""
    return _node(
        {
            "id": cell_id or uuid.uuid4().hex[:12],
            "cell_type": "code",
            "source": source,
            "outputs": [],
            "execution_count": None,
            "metadata": dict(metadata),
        }
    )


def _node(cell: dict[str, Any]) -> dict[str, Any]:
    if isinstance(cell, nbformat.NotebookNode):
        return cell
    node: dict[str, Any] = nbformat.from_dict(cell)  # type: ignore[no-untyped-call]
    return node


class CallRefused(Exception):
    """Raised by a call handler to answer with a ``CallFailure`` of this code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class ScriptedTab:
    """One tab: a websocket to the server, notebooks, and a kernel client per kernel."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        kernel_client_for: KernelClientFactory | None = None,
        client_id: str | None = None,
        instant: bool = False,
        keep_tokens: bool = True,
        cookie: str | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/") + "/"
        self.token = token
        #: A login cookie sent with the token: the server then knows the same user on every
        #: connection (without one, each token-authenticated connection is a new anonymous user).
        self.cookie = cookie
        self.kernel_client_for = kernel_client_for
        #: Answer run_cell and evaluate at once, without a kernel (for benchmarks of
        #: the server's own cost): every cell "succeeds" with no output.
        self.instant = instant
        #: False: token events are not kept in :attr:`received` (long benchmarks).
        self.keep_tokens = keep_tokens
        self._count = 0
        self.client_id = client_id or f"tab-{uuid.uuid4().hex}"
        #: What the server gave this client id at its first hello (shown again on reconnect).
        self.client_secret: str | None = None
        #: Whether the next hello is this tab's first (a page that just loaded, as after a
        #: reload: it knows none of its runs' calls and cells).
        self.page_start = True
        self.notebooks: dict[str, TabNotebook] = {}
        #: Everything the server sent, in order.
        self.received: list[dict[str, Any]] = []
        #: Every call the tab answered (by call id), with how many times it was sent.
        self.calls_seen: dict[str, int] = {}
        #: False: calls are recorded but not answered (a hung tab).
        self.answering = True
        #: Ids of the cells whose run_cell the kernel has begun (reported ``started``).
        self.started_cells: list[str] = []
        #: The user's run options the tab reports (``run_options``: its JupyterLab settings).
        self.user_options: dict[str, Any] = {}
        #: How many times each notebook was saved (``save``), by path.
        self.saves: dict[str, int] = {}
        #: The sources each cell had before an undoable replacement (its undo history), by id.
        self.undo: dict[str, list[str]] = {}
        #: The ``show_outputs`` calls answered (after a reload, a running cell as the server
        #: heard it).
        self.shown_outputs: list[dict[str, Any]] = []
        self._results: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._kernels: dict[str, Any] = {}
        self._readers: dict[str, asyncio.Task[None]] = {}
        self._executions: dict[str, _Execution] = {}
        self._socket: Any = None
        self._pump: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()
        self._requests = 0
        self._tasks: set[asyncio.Future[Any]] = set()
        self._closed = False
        #: The close code and reason of the latest connection the server closed (None before).
        self.close_code: int | None = None
        self.close_reason: str | None = None

    # --- connection ------------------------------------------------------------------------

    @property
    def ws_url(self) -> str:
        """The server's jupyter-ci websocket URL."""
        scheme = "wss" if self.base_url.startswith("https") else "ws"
        return scheme + self.base_url[self.base_url.index(":") :] + "jupyter-ci/ws"

    async def connect(self, *, hello: bool = True) -> dict[str, Any] | None:
        """Open the websocket (and say hello, returning the server's reply)."""
        from tornado.httpclient import HTTPRequest
        from tornado.websocket import websocket_connect

        headers = {"Authorization": f"token {self.token}"}
        if self.cookie:
            headers["Cookie"] = self.cookie
        request = HTTPRequest(self.ws_url, headers=headers)
        self._socket = await websocket_connect(request)
        stream = getattr(self._socket, "stream", None)
        if stream is not None:
            stream.set_nodelay(True)  # as browsers do for websockets
        self._pump = asyncio.ensure_future(self._read())
        if not hello:
            return None
        message: dict[str, Any] = {
            "request": "hello",
            "client_id": self.client_id,
            "protocol_version": 1,
            "notebook_paths": list(self.notebooks),
        }
        if self.client_secret is not None:
            message["client_secret"] = self.client_secret  # as the labextension does
        if self.page_start:
            message["page_start"] = True
        reply = await self.request(message)
        if reply.get("ok"):
            self.page_start = False
        if reply.get("ok") and isinstance(reply.get("client_secret"), str):
            self.client_secret = reply["client_secret"]
        return reply

    async def disconnect(self) -> None:
        """Close the websocket (the tab goes away, or loses its network)."""
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        if self._pump is not None:
            await asyncio.gather(self._pump, return_exceptions=True)
            self._pump = None

    async def close(self) -> None:
        """Disconnect and stop the kernel clients."""
        self._closed = True
        await self.disconnect()
        for task in list(self._tasks):
            task.cancel()
        for reader in self._readers.values():
            reader.cancel()
        await asyncio.gather(*self._readers.values(), *self._tasks, return_exceptions=True)
        for client in self._kernels.values():
            client.stop_channels()
        self._kernels.clear()

    def send(self, message: Mapping[str, Any]) -> None:
        """Send a raw message to the server."""
        if self._socket is None:
            raise RuntimeError("the tab is not connected")
        self._socket.write_message(json.dumps(message))

    def send_raw(self, text: str) -> None:
        """Send text as it is (for tests of malformed messages)."""
        if self._socket is None:
            raise RuntimeError("the tab is not connected")
        self._socket.write_message(text)

    async def wait_until(self, condition: Callable[[], bool], timeout: float = 60) -> None:
        """Wait until ``condition()`` holds (checked as the tab receives or does something)."""
        deadline = time.monotonic() + timeout
        while not condition():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"the condition did not hold within {timeout} s")
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), min(remaining, 0.1))
            except asyncio.TimeoutError:
                continue

    async def request(self, message: Mapping[str, Any], timeout: float = 60) -> dict[str, Any]:
        """Send a client request with a fresh ``request_id`` and await its RequestReply."""
        self._requests += 1
        request_id = f"{self.client_id}-q{self._requests}"
        self.send({**message, "request_id": request_id})
        return await self.wait_for(lambda m: m.get("reply_to") == request_id, timeout)

    # --- what the server sent ----------------------------------------------------------------

    async def wait_for(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 60, start: int = 0
    ) -> dict[str, Any]:
        """The first received message (from index ``start``) matching ``predicate``."""
        deadline = time.monotonic() + timeout
        while True:
            # Only messages not looked at yet: a long run sends thousands.
            while start < len(self.received):
                message = self.received[start]
                start += 1
                if predicate(message):
                    return message
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no matching message within {timeout} s")
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except asyncio.TimeoutError:
                continue

    async def wait_for_event(
        self,
        predicate: Callable[[dict[str, Any]], bool],
        run_id: str | None = None,
        timeout: float = 60,
    ) -> dict[str, Any]:
        """The first run event (of ``run_id``, if given) matching ``predicate``."""
        return await self.wait_for(
            lambda m: (
                "seq" in m
                and "type" in m
                and (run_id is None or m.get("run_id") == run_id)
                and predicate(m)
            ),
            timeout,
        )

    def events(self, run_id: str) -> list[dict[str, Any]]:
        """The run events received for ``run_id``, in order."""
        return [m for m in self.received if "seq" in m and m.get("run_id") == run_id]

    # --- notebooks ---------------------------------------------------------------------------

    def open_notebook(
        self, path: str, kernel_id: str, cells: list[dict[str, Any]] | None = None
    ) -> TabNotebook:
        """Open a notebook in the tab (tell the server with :meth:`subscribe` if connected)."""
        notebook = TabNotebook(path, kernel_id, list(cells or []))
        self.notebooks[path] = notebook
        return notebook

    async def run_user_cell(self, path: str, source: str) -> dict[str, Any]:
        """Append a code cell to the notebook and run it, as the user would; its result."""
        notebook = self.notebooks[path]
        cell = code_cell(source)
        notebook.cells.append(cell)
        notebook.outputs.cell_inserted(len(notebook.cells) - 1)
        return await self._run_cell(notebook, str(cell["id"]), None)

    async def subscribe(self) -> dict[str, Any]:
        """Tell the server which notebooks the tab has open."""
        return await self.request({"request": "subscribe", "notebook_paths": list(self.notebooks)})

    # --- internals: reading and answering ------------------------------------------------

    async def _read(self) -> None:
        socket = self._socket
        while socket is not None:
            text = await socket.read_message()
            if text is None:
                self.close_code = socket.close_code
                self.close_reason = socket.close_reason
                self._changed.set()
                break
            message = json.loads(text)
            if not self.keep_tokens and message.get("type") == "token":
                continue
            self.received.append(message)
            self._changed.set()
            if "method" in message and "call_id" in message:
                self._spawn(self._answer(message))

    @staticmethod
    def _restore(notebook: TabNotebook, call: dict[str, Any]) -> list[str]:
        """Put back the run's cells the notebook lacks, as the labextension does."""
        restored: list[str] = []
        previous: str | None = None
        for cell in call["cells"]:
            cell_id = str(cell["cell_id"])
            if any(c["id"] == cell_id for c in notebook.cells):
                if cell_id == call.get("streaming_cell_id"):
                    notebook.cell(cell_id)["source"] = str(cell["source"])
                previous = cell_id
                continue
            after = cell.get("after_id")
            known = {c["id"] for c in notebook.cells}
            if after is not None and after in known:
                position = notebook.index(str(after)) + 1
            elif previous is not None and previous in known:
                position = notebook.index(previous) + 1
            else:
                position = 0 if after is None else len(notebook.cells)
            node = code_cell(str(cell["source"]), cell_id, **dict(cell.get("metadata") or {}))
            notebook.cells.insert(position, node)
            notebook.outputs.cell_inserted(position)
            restored.append(cell_id)
            previous = cell_id
        return restored

    def _spawn(self, coroutine: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, call: dict[str, Any]) -> None:
        call_id = str(call["call_id"])
        self.calls_seen[call_id] = self.calls_seen.get(call_id, 0) + 1
        if not self.answering:
            return
        known = self._results.get(call_id)
        if known is None:
            known = asyncio.ensure_future(self._do(call))
            self._results[call_id] = known
            self._tasks.add(known)
            known.add_done_callback(self._tasks.discard)
        result = await known
        if self._socket is not None:
            self.send(result)

    async def _do(self, call: dict[str, Any]) -> dict[str, Any]:
        call_id = str(call["call_id"])
        try:
            notebook = self.notebooks.get(str(call["notebook_path"]))
            if notebook is None:
                raise CallRefused("notebook_not_open", f"{call['notebook_path']} is not open")
            result = await self._method(notebook, call)
        except CallRefused as refused:
            error = {"code": refused.code, "message": refused.message}
            return {"call_id": call_id, "ok": False, "error": error}
        except KeyError as missing:
            error = {"code": "cell_not_found", "message": f"no cell {missing.args[0]}"}
            return {"call_id": call_id, "ok": False, "error": error}
        return {"call_id": call_id, "ok": True, **result}

    async def _method(self, notebook: TabNotebook, call: dict[str, Any]) -> dict[str, Any]:
        method = call["method"]
        if method == "read_cells":
            if call.get("outputs") is False:  # sources and ids: as the browser, no outputs
                return {"cells": [_without_outputs(cell) for cell in notebook.cells]}
            return {"cells": [dict(cell) for cell in notebook.cells]}
        if method == "insert_cell":
            after = call.get("after_id")
            position = 0 if after is None else notebook.index(str(after)) + 1
            cell = code_cell(str(call.get("source", "")), **dict(call.get("metadata") or {}))
            if call.get("cell_type", "code") != "code":
                cell = _node(
                    {
                        "id": cell["id"],
                        "cell_type": call["cell_type"],
                        "source": cell["source"],
                        "metadata": cell["metadata"],
                    }
                )
            notebook.cells.insert(position, cell)
            notebook.outputs.cell_inserted(position)
            return {"cell_id": cell["id"]}
        if method == "append_source":
            notebook.cell(str(call["cell_id"]))["source"] += str(call["text"])
            return {}
        if method == "restore_cells":
            return {"restored": self._restore(notebook, call)}
        if method == "show_outputs":
            cell = notebook.cell(str(call["cell_id"]))
            cell["outputs"] = list(call["outputs"])
            cell["execution_count"] = call["execution_count"]
            self.shown_outputs.append(dict(call))
            return {}
        if method == "delete_cell":
            position = notebook.index(str(call["cell_id"]))
            del notebook.cells[position]
            notebook.outputs.cell_deleted(position)
            return {}
        if method == "replace_source":
            cell = notebook.cell(str(call["cell_id"]))
            if call.get("undoable"):
                self.undo.setdefault(str(call["cell_id"]), []).append(str(cell["source"]))
            cell["source"] = str(call["source"])
            return {}
        if method == "run_options":
            return {"options": dict(self.user_options)}
        if method == "save":
            self.saves[notebook.path] = self.saves.get(notebook.path, 0) + 1
            return {}
        if method == "run_cell" and self.instant:
            notebook.cell(str(call["cell_id"]))
            self._count += 1
            now = time.time()
            self.send({"call_id": call["call_id"], "progress": "started", "started_at": now})
            return {
                "reply_status": "ok",
                "outputs": [],
                "execution_count": self._count,
                "started_at": now,
            }
        if method == "evaluate" and self.instant:
            return {"text": "[]"}
        if method == "run_cell":
            return await self._run_cell(
                notebook,
                str(call["cell_id"]),
                str(call["call_id"]),
                call.get("expression"),
                run_id=str(call["run_id"]),
            )
        if method == "evaluate":
            return await self._inspect(notebook, str(call["expression"]))
        if method == "interrupt":
            raise CallRefused("unsupported", "the scripted tab cannot interrupt a kernel")
        raise CallRefused("unknown_method", f"unknown method {method!r}")

    async def _kernel(self, kernel_id: str) -> Any:
        client = self._kernels.get(kernel_id)
        if client is None:
            if self.kernel_client_for is None:
                raise CallRefused("kernel_unavailable", "the scripted tab has no kernel client")
            client = await self.kernel_client_for(kernel_id)
            if self._closed:
                client.stop_channels()
                raise CallRefused("notebook_closed", "the tab is closing")
            self._kernels[kernel_id] = client
            self._readers[kernel_id] = asyncio.ensure_future(self._read_kernel(client))
        return client

    async def _read_kernel(self, client: Any) -> None:
        """Hand every iopub and shell message to the execution of its request."""

        async def iopub() -> None:
            while True:
                msg = await client.get_iopub_msg()
                execution = self._executions.get(msg["parent_header"].get("msg_id", ""))
                if execution is not None:
                    execution.take(msg)
                    self._changed.set()

        async def shell() -> None:
            while True:
                msg = await client.get_shell_msg()
                execution = self._executions.get(msg["parent_header"].get("msg_id", ""))
                if execution is not None:
                    execution.reply = dict(msg.get("content") or {})
                    self._changed.set()

        await asyncio.gather(iopub(), shell())

    async def _execute(
        self,
        kernel_id: str,
        execution: _Execution,
        code: str,
        *,
        silent: bool = False,
        own: bool = True,
        run_id: str | None = None,
        user_expressions: dict[str, str] | None = None,
    ) -> _Execution:
        """Send an execute request (as the labextension does) and wait until it is done.

        ``on_started`` of ``execution`` is called once the kernel begins it. ``own``: one of
        jupyter-ci's executions, marked as the labextension marks them
        (``metadata.jupyter_ci_resume``: the kernel never holds it back), with the ``run_id``
        whose cell it runs (``metadata.jupyter_ci_run``: ``%%ci`` starts no run in it).
        """
        client = await self._kernel(kernel_id)
        content = {
            "code": code,
            "silent": silent,
            "store_history": not silent,
            "user_expressions": user_expressions or {},
            "allow_stdin": False,
            "stop_on_error": False,
        }
        metadata: dict[str, Any] = {constant("ResumeMetadataKey"): True} if own else {}
        if run_id is not None:
            metadata[constant("RunMetadataKey")] = run_id
        message = client.session.msg("execute_request", content, metadata=metadata)
        client.shell_channel.send(message)
        msg_id = message["header"]["msg_id"]
        execution.msg_id = msg_id
        self._executions[msg_id] = execution
        try:
            announced = False
            while not execution.done:
                reader = self._readers[kernel_id]
                if reader.done():  # say what stopped the kernel's messages, rather than hang
                    failure = None if reader.cancelled() else reader.exception()
                    raise CallRefused("kernel_unavailable", f"the tab stopped reading: {failure!r}")
                if execution.started_at is not None and not announced:
                    announced = True
                    execution.on_started(execution.started_at)
                self._changed.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), 0.05)
        finally:
            self._executions.pop(msg_id, None)
        return execution

    async def _run_cell(
        self,
        notebook: TabNotebook,
        cell_id: str,
        call_id: str | None,
        expression: str | None = None,
        *,
        run_id: str | None = None,
    ) -> dict[str, Any]:
        cell = notebook.cell(cell_id)
        cell["outputs"] = []
        cell["execution_count"] = None
        notebook.outputs.begin(notebook.index(cell_id))

        def started(at: float) -> None:
            if call_id is None:
                return
            self.started_cells.append(cell_id)
            self._changed.set()
            self.send(
                {
                    "call_id": call_id,
                    "progress": "started",
                    "started_at": at,
                    "msg_id": execution.msg_id,
                }
            )

        execution = _Execution(notebook, cell_id, started)
        # A call's execution is jupyter-ci's own; run_user_cell's is the user's.
        await self._execute(
            notebook.kernel_id,
            execution,
            str(cell["source"]),
            own=call_id is not None,
            run_id=run_id,
            user_expressions={"v": expression} if expression else None,
        )
        # As the browser: the outputs the kernel's messages made, nothing made from the reply.
        outputs = notebook.outputs.finish(cell["outputs"])
        reply_status = (execution.reply or {}).get("status")
        result = {
            # As the labextension does: the kernel's reply as it came; the server classifies.
            "reply_status": "aborted" if reply_status == "abort" else reply_status,
            "outputs": outputs,
            "execution_count": cell["execution_count"],
            "started_at": execution.started_at,
        }
        text = _expression_text(execution.reply) if expression else None
        if text is not None:
            result["text"] = text
        return result

    async def _inspect(self, notebook: TabNotebook, expression: str) -> dict[str, Any]:
        # As the labextension's inspection: silent, not marked as jupyter-ci's own.
        execution = await self._execute(
            notebook.kernel_id,
            _Execution(),
            "",
            silent=True,
            own=False,
            user_expressions={"v": expression},
        )
        return {"text": _expression_text(execution.reply) or ""}


def _expression_text(reply: dict[str, Any] | None) -> str | None:
    """The text/plain value of the request's user expression; None when it was not evaluated
    or raised (kernels evaluate them only after code that ended well)."""
    value = ((reply or {}).get("user_expressions") or {}).get("v") or {}
    if value.get("status") != "ok":
        return None
    return str((value.get("data") or {}).get("text/plain", ""))


class _Execution:
    """One execute request of the tab: when the kernel began it, its reply, its outputs."""

    def __init__(
        self,
        notebook: TabNotebook | None = None,
        cell_id: str | None = None,
        on_started: Callable[[float], None] | None = None,
    ) -> None:
        self.notebook = notebook
        self.cell_id = cell_id
        self.on_started = on_started or (lambda at: None)
        #: The msg_id of the execute request (set once it is sent).
        self.msg_id = ""
        self.started_at: float | None = None
        self.reply: dict[str, Any] | None = None
        self.idle = False
        self.idle_at: float | None = None

    @property
    def done(self) -> bool:
        """Whether both the reply and the ``idle`` status came, or the kernel went idle and no
        reply came within ``ReplyGraceSeconds`` (as the labextension: an interrupt that lands
        outside the cell's code ends the request without one)."""
        if not self.idle:
            return False
        if self.reply is not None:
            return True
        return self.idle_at is not None and time.monotonic() - self.idle_at >= REPLY_GRACE

    def take(self, msg: dict[str, Any]) -> None:
        """One iopub message of the request: the start, the end, or an output of the cell."""
        msg_type = msg["msg_type"]
        state = (msg.get("content") or {}).get("execution_state")
        if self.started_at is None and (msg_type == "execute_input" or state == "busy"):
            self.started_at = time.time()
        if state == "idle":
            self.idle = True
            self.idle_at = time.monotonic()
        elif self.notebook is not None and self.cell_id is not None:
            with contextlib.suppress(KeyError):  # the cell was deleted meanwhile
                index = self.notebook.index(self.cell_id)
                self.notebook.outputs.feed(msg, index)


def _without_outputs(cell: Mapping[str, Any]) -> dict[str, Any]:
    """A cell as a read without outputs has it."""
    return {key: value for key, value in cell.items() if key != "outputs"}
