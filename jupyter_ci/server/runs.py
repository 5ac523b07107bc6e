"""The run manager: runs of the agent loop in the server, one at a time per kernel.

A run starts from a tab's ``start_run`` (the panel, or a claimed ``%%ci`` handoff) and belongs to
that tab: its calls go only there (:mod:`jupyter_ci.server.lab.calls`). Per kernel there is one
lane: the active run and, behind it, ``%%ci`` requests queued in order (Run All with two ``%%ci``
cells); a panel request while the lane is busy is refused, naming the active run so the panel can
offer Stop.

The manager also:

- resolves each request's settings over the server's own (the request, the kernel's ``%ci``
  session settings and the user's JupyterLab settings are untrusted layers: they may pick among
  configured models, never a new ``api_base``);
- keeps every event of a run in memory for replay after a reconnect, sends it to the owner and
  to tabs that have the notebook open, and records it (not tokens) in the conversation store:
  the run's record is what its loop emitted, and nothing else;
- stops a run whose tab stays away longer than the grace period, or whose kernel restarts or
  shuts down, or when the server stops, recording why.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..agent.instructions import server_instructions
from ..agent.loop import AgentRun, Approver, EventCallback, ReviewDecision, RunOutcome, RunRequest
from ..agent.states import RunState
from ..errors import (
    ConfigError,
    Disconnected,
    JupyterCIError,
    KernelDied,
    ServerStopping,
    StoppedByUser,
)
from ..execution.status import KernelFate
from ..models.base import Model
from ..models.scrub import scrub
from ..settings import Settings
from .attachments import describe_all
from .lab.calls import CallChannel
from .lab.workspace import LabWorkspace
from .probes import Probes, preview, previous_cells
from .recording import History, RunRecorder
from .run_types import Kernels, ModelFactory, Publisher, RunRefused, SettingsResolver, StartResult
from .store import ConversationStore

log = logging.getLogger("jupyter_ci.server")

#: Makes a run that something other than the loop drives (see RunManager.start_driven): from
#: its request, its Lab workspace, its run id, its event callback and its approver.
RunFactory = Callable[[RunRequest, LabWorkspace, str, EventCallback, Approver], AgentRun]

#: The longest request a run takes (a model's context holds far less; a longer one is a mistake).
MAX_PROMPT_CHARS = 100_000
#: Events (other than tokens) kept in memory per run for replay.
MAX_KEPT_EVENTS = 20_000
#: Finished runs kept in memory for replay.
KEPT_FINISHED_RUNS = 50
#: Handoff requests remembered (each is accepted once; a %%ci cell runs far fewer times).
MAX_KEPT_NONCES = 100_000


@dataclass
class ManagedRun:
    """One run the manager holds: its loop, its workspace, its channel and its events."""

    run_id: str
    owner: str
    notebook_path: str
    kernel_id: str
    origin: str
    prompt: str
    anchor_cell_id: str | None
    settings: Settings
    agent: AgentRun
    workspace: LabWorkspace
    channel: CallChannel
    conversation_id: str | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    reviews: dict[str, asyncio.Future[ReviewDecision]] = field(default_factory=dict)
    task: asyncio.Task[RunOutcome] | None = None
    outcome: RunOutcome | None = None
    grace_timer: asyncio.TimerHandle | None = None
    writes: asyncio.Queue[dict[str, Any] | None] = field(default_factory=asyncio.Queue)
    writer: asyncio.Task[None] | None = None
    #: A driven run waiting for its kernel's turn (see RunManager.take_turn).
    turn: asyncio.Future[None] | None = None
    created: float = field(default_factory=time.time)
    #: The sequence number of the latest event (tokens included).
    seq: int = 0

    @property
    def state(self) -> RunState:
        """Where the run is."""
        return self.agent.machine.state

    def info(self, position: int) -> dict[str, Any]:
        """The run's RunInfo."""
        agent = {"agent": self.agent.agent} if self.agent.agent is not None else {}
        return {
            **agent,
            "run_id": self.run_id,
            "notebook_path": self.notebook_path,
            "kernel_id": self.kernel_id,
            "owner": self.owner,
            "origin": self.origin,
            "state": self.state.value,
            "prompt": self.prompt,
            "anchor_cell_id": self.anchor_cell_id,
            "position": position,
            "last_seq": self.seq,
        }


class RunManager:
    """Starts, queues, stops and reports the runs of one Jupyter server."""

    def __init__(
        self,
        *,
        publisher: Publisher,
        kernels: Kernels,
        resolve: SettingsResolver,
        make_model: ModelFactory,
        store: ConversationStore | None = None,
        grace: float = 30.0,
        secrets: Callable[[], Sequence[str]] = list,
        logger: logging.Logger | None = None,
        root_dir: str = "",
    ) -> None:
        self.publisher = publisher
        self.kernels = kernels
        self.resolve = resolve
        self.make_model = make_model
        #: The conversation store's side of the runs (its ``store`` is set once opened).
        self.recorder = RunRecorder(store, logger or log)
        self.grace = grace
        self.secrets = secrets
        self.log = logger or log
        #: The server's root directory (attached files are read below it).
        self.root_dir = root_dir
        self._lanes: dict[str, list[ManagedRun]] = {}
        #: Driven runs not in a lane: they do not need the kernel (yet).
        self._free: list[ManagedRun] = []
        self._runs: dict[str, ManagedRun] = {}
        self._finished: list[str] = []
        #: Handoff nonces accepted: the tab that claimed each, and what its request led to.
        self._nonces: dict[str, tuple[str, asyncio.Future[StartResult]]] = {}
        #: The nonce each %%ci execute request (kernel id and msg_id) handed off with.
        self._handoff_requests: dict[str, str] = {}
        #: Notices said in each conversation since the server started (the store has the rest).
        self._said: dict[str, set[str]] = {}
        #: Reads of tabs' notebooks outside any run (previews, re-run checks).
        self.probes = Probes(publisher.send)
        self._closing = False

    # --- queries -------------------------------------------------------------------------

    def runs(self) -> list[dict[str, Any]]:
        """RunInfo of every active or queued run."""
        infos: list[dict[str, Any]] = []
        for lane in self._lanes.values():
            infos.extend(run.info(position) for position, run in enumerate(lane))
        infos.extend(run.info(0) for run in self._free)
        return infos

    def holds(self, client_id: str) -> bool:
        """Whether a run held in memory (active, queued or kept for replay) is the tab's."""
        return any(run.owner == client_id for run in self._runs.values())

    def get(self, run_id: str) -> ManagedRun | None:
        """A run held in memory (active, queued or recently finished)."""
        return self._runs.get(run_id)

    # --- requests ------------------------------------------------------------------------

    async def start(self, client_id: str, request: Mapping[str, Any]) -> StartResult:
        """Start (or queue) a run for a ``start_run`` request.

        A ``%%ci`` (origin ``magic``) whose own earlier request's cells are still there starts
        no run (the result says so), unless asked again (see :func:`.probes.previous_cells`).
        Raises :class:`RunRefused` with what to do when the request cannot run.

        A handoff nonce is taken once: another tab sending it is refused; the tab that took it
        gets the same answer again (its connection dropped before the reply reached it).
        """
        if self._closing:
            raise RunRefused("server_shutdown", "The server is shutting down.")
        if len(str(request["prompt"])) > MAX_PROMPT_CHARS:
            raise RunRefused(
                "prompt_too_long",
                f"The request is {len(str(request['prompt'])):,} characters long; jupyter-ci "
                f"takes at most {MAX_PROMPT_CHARS:,}.",
                hint="Attach the data as a file, or put it in a variable, and ask about it.",
            )
        kernel_id = str(request["kernel_id"])
        notebook_path = str(request["notebook_path"])
        origin = str(request.get("origin") or "panel")
        if not self.kernels.has(kernel_id):
            raise RunRefused(
                "kernel_unavailable",
                "The notebook's kernel is not running on this server.",
                hint="Start or select a kernel for the notebook, then ask again.",
            )
        nonce = request.get("handoff_nonce")
        handed = request.get("handoff_request_id")
        if nonce and handed:
            # One handoff per %%ci execute request: another nonce under the same request was
            # made by other code in the kernel (ARCHITECTURE.md, Invariants).
            key = f"{kernel_id}\n{handed}"
            first = self._handoff_requests.setdefault(key, str(nonce))
            _trim(self._handoff_requests, MAX_KEPT_NONCES)
            if first != nonce:
                raise RunRefused(
                    "handoff_claimed",
                    "That %%ci request has already handed off once.",
                    hint="Run the %%ci cell again to make a new request.",
                )
        if nonce and nonce in self._nonces:
            owner, outcome = self._nonces[nonce]
            if owner != client_id:
                raise RunRefused(
                    "handoff_claimed",
                    "This %%ci request was already taken by a jupyter-ci tab.",
                    hint="Run the %%ci cell again to make a new request.",
                )
            # The same tab again: its connection dropped before the reply reached it.
            return await asyncio.shield(outcome)
        if not nonce:
            return await self._start(client_id, request, kernel_id, notebook_path, origin)
        outcome = asyncio.get_running_loop().create_future()
        self._nonces[nonce] = (client_id, outcome)
        try:
            result = await self._start(client_id, request, kernel_id, notebook_path, origin)
        except RunRefused as refused:
            outcome.set_exception(refused)
            outcome.exception()  # retrieved: only a retry of the same tab needs it
            raise
        except BaseException:
            # Not an answer the tab should get again: a retry is a new request.
            del self._nonces[nonce]
            outcome.cancel()
            raise
        outcome.set_result(result)
        return result

    async def _start(
        self,
        client_id: str,
        request: Mapping[str, Any],
        kernel_id: str,
        notebook_path: str,
        origin: str,
    ) -> StartResult:
        lane = self._lanes.setdefault(kernel_id, [])
        if lane and origin == "panel":
            active = lane[0]
            raise RunRefused(
                "kernel_busy",
                "jupyter-ci is already working in this kernel.",
                hint="Wait for it to finish, or stop it first.",
                run_id=active.run_id,
            )
        settings, model = self._settings_and_model(request)
        note = ""
        replaces: dict[str, str] = {}
        anchor = request.get("anchor_cell_id")
        if origin == "magic" and isinstance(anchor, str) and anchor:
            # This %%ci's own request, never a panel request placed after the same cell.
            busy = next(
                (
                    r
                    for r in lane
                    if r.origin == "magic"
                    and r.notebook_path == notebook_path
                    and r.anchor_cell_id == anchor
                ),
                None,
            )
            if busy is not None:
                # Run All again while this %%ci's request waits (for a review, say): its cells
                # are not the previous answer to replace, they are still being written. The
                # cell follows that run again (its status, and the cells after it wait for it).
                return StartResult(
                    busy.run_id,
                    lane.index(busy),
                    note="This %%ci's request is still going: following it, not asking again. "
                    "Stop it to ask again.",
                )
            regenerate = bool(request.get("regenerate"))
            rerun = await previous_cells(
                self.probes, self.recorder, client_id, notebook_path, anchor, regenerate
            )
            if not rerun.generate:
                return StartResult(None, note=rerun.note, status_line=rerun.status_line)
            note, replaces = rerun.note, rerun.replaces
        run = await self._create(client_id, request, settings, model, origin, replaces)
        lane.append(run)
        position = len(lane) - 1
        self.log.info(
            "jupyter-ci: run %s for %s (%s, model %s)%s",
            run.run_id,
            notebook_path,
            origin,
            settings.model,
            f", queued at {position}" if position else "",
        )
        if position == 0:
            self._launch(run)
        self._announce()
        return StartResult(run.run_id, position, note)

    async def stop(self, client_id: str, run_id: str) -> None:
        """Stop a run: abort the model stream, interrupt the kernel.

        The tab that started or claimed it may, and so may another tab of the same user with
        the run's notebook open (the check is the user and the notebook, not the tab).
        """
        run = self._runs.get(run_id)
        user = self.publisher.user_of(client_id)
        if (
            run is not None
            and run.owner != client_id
            and user is not None
            and user == self.publisher.user_of(run.owner)
            and self.publisher.sees(client_id, run.notebook_path)
        ):
            self.log.info("jupyter-ci: run %s stopped from another tab of its user", run_id)
        else:
            run = self._owned(client_id, run_id)
        self._stop(run, "user", StoppedByUser())

    def review(self, client_id: str, run_id: str, cell_id: str, answer: ReviewDecision) -> None:
        """The user's answer to a cell awaiting approval, from the tab that owns the run."""
        run = self._owned(client_id, run_id)
        future = run.reviews.get(cell_id)
        if future is None or future.done():
            raise RunRefused(
                "not_awaiting_review",
                "That cell is not waiting for a review.",
                hint="It may have been answered already, or the run ended.",
            )
        future.set_result(answer)

    async def replay(self, client_id: str, run_id: str, after_seq: int) -> list[dict[str, Any]]:
        """The run's events after ``after_seq``: held in memory, else as the store has them.

        A held run is replayed to its owner and to tabs with its notebook open (they are sent
        its events anyway). A run the server no longer holds (an earlier server process ran
        it) is replayed from its record, which says how it ended, as the conversation's
        history does.
        """
        run = self._runs.get(run_id)
        if run is not None:
            if run.owner != client_id and not self.publisher.sees(client_id, run.notebook_path):
                raise _not_yours()
            return [event for event in run.events if event["seq"] > after_seq]
        stored = await self.recorder.stored_events(run_id)
        if not stored:
            raise RunRefused(
                "unknown_run",
                "That run is not known to the server.",
                hint="Its record may have been cleared with the conversation.",
            )
        return [event for event in stored if int(event.get("seq", 0)) > after_seq]

    def _owned(self, client_id: str, run_id: str) -> ManagedRun:
        """The run, if the tab started or claimed it; a refusal otherwise."""
        run = self._runs.get(run_id)
        if run is None:
            raise RunRefused("unknown_run", "There is no such run on this server.")
        if run.owner != client_id:
            raise _not_yours()
        return run

    def deliver(self, client_id: str, reply: Mapping[str, Any]) -> bool:
        """Hand a call reply from a tab to the run (or the re-run check) that made the call."""
        for run in self._runs.values():
            if run.owner == client_id and run.channel.deliver(reply):
                return True
        return self.probes.deliver(client_id, reply)

    # --- what happens around the runs ------------------------------------------------------

    def client_connected(self, client_id: str, page_start: bool = False) -> None:
        """A tab (re)connected: its runs stop waiting and get their unanswered calls again.

        ``page_start``: it is a new page of the same tab (a reload), which holds none of the
        cells the run wrote that were not saved: it first puts them back (``restore_cells``,
        which the tab does before the run's other calls), and a ``run_cell`` the previous page
        received is not sent again (see :meth:`CallChannel.resend`).
        """
        for run in self._runs.values():
            if run.owner != client_id or run.state.terminal:
                continue
            if run.grace_timer is not None:
                run.grace_timer.cancel()
                run.grace_timer = None
            skip: set[str] = set()
            if page_start:
                params = run.workspace.restore_params()
                if params["cells"]:
                    restore = run.channel.send("restore_cells", params)
                    restore.add_done_callback(self._restored(run))
                    skip.add(run.channel.last_call_id)
            run.channel.resend(page_start=page_start, skip=skip)

    def _restored(self, run: ManagedRun) -> Callable[[asyncio.Future[dict[str, Any]]], None]:
        def done(future: asyncio.Future[dict[str, Any]]) -> None:
            if future.cancelled():
                return
            error = future.exception()
            if error is not None:
                self.log.warning("jupyter-ci: run %s: cells not restored: %s", run.run_id, error)
            else:
                restored = future.result().get("restored")
                self.log.info(
                    "jupyter-ci: run %s: the reloaded tab restored %s", run.run_id, restored
                )

        return done

    def client_disconnected(self, client_id: str) -> None:
        """A tab went away: its runs wait ``grace`` seconds for it, then stop."""
        loop = asyncio.get_running_loop()
        for run in self._runs.values():
            if run.owner != client_id or run.state.terminal or run.grace_timer is not None:
                continue
            run.grace_timer = loop.call_later(self.grace, self._grace_over, run)

    def _grace_over(self, run: ManagedRun) -> None:
        run.grace_timer = None
        if self.publisher.is_connected(run.owner) or run.state.terminal:
            return
        error = Disconnected(self.grace)
        self.log.info("jupyter-ci: run %s stopped: its tab did not come back", run.run_id)
        run.workspace.lost(error)
        run.channel.close(error)
        self._stop(run, "disconnected", error)

    def kernel_ended(self, kernel_id: str, fate: KernelFate) -> None:
        """The kernel was restarted or shut down (asked through the server): its runs stop with
        that as their reason, and a cell running now ends so (cells are never replayed)."""
        reason = "kernel_shutdown" if fate is KernelFate.SHUTDOWN else "kernel_restarted"
        detail = (
            "The kernel was shut down." if fate is KernelFate.SHUTDOWN else "The kernel restarted."
        )
        for run in list(self._lanes.get(kernel_id, [])):
            error = KernelDied(detail)
            run.workspace.lost(error, fate)
            run.channel.fail_pending(error)
            self._stop(run, reason, error)

    def notebook_renamed(self, old_path: str, new_path: str) -> None:
        """A notebook moved: its runs' calls name the new path from now on."""
        for run in self._runs.values():
            if run.notebook_path == old_path:
                run.notebook_path = new_path
                run.channel.notebook_path = new_path

    async def close(self) -> None:
        """Stop every run (the server is stopping) and wait for them to end."""
        self._closing = True
        tasks: list[asyncio.Future[Any]] = []
        for run in list(self._runs.values()):
            if not run.state.terminal:
                self._stop(run, "server_shutdown", ServerStopping())
            if run.task is not None:
                tasks.append(run.task)
            if run.writer is not None:
                tasks.append(run.writer)
        if tasks:
            await asyncio.wait(tasks, timeout=10)

    # --- internals -----------------------------------------------------------------------

    async def start_driven(
        self,
        client_id: str,
        notebook_path: str,
        kernel_id: str,
        prompt: str,
        settings: Settings,
        drive: RunFactory,
        origin: str = "mcp",
    ) -> ManagedRun:
        """Start a run that something other than the loop drives: an outside agent's tool call
        (origin ``mcp``), acted out through the tab ``client_id``, which has the notebook open.

        ``drive`` makes the run as the loop's is made (its request, the Lab workspace whose
        calls go to that tab, its run id, the event callback, the approver). It starts at once
        (inserting or editing a cell needs no kernel); before it runs a cell it takes the
        kernel's turn (:meth:`take_turn`: behind the active run, never refused, as a %%ci is
        not). Its events are recorded and shown like any run's; Stop and review as for any run.
        """
        if self._closing:
            raise RunRefused("server_shutdown", "The server is shutting down.")
        if not self.kernels.has(kernel_id):
            raise RunRefused(
                "kernel_unavailable",
                "The notebook's kernel is not running on this server.",
                hint="Start or select a kernel for the notebook, then ask again.",
            )
        request = {"notebook_path": notebook_path, "kernel_id": kernel_id, "prompt": prompt}
        run = await self._create(client_id, request, settings, None, origin, {}, drive=drive)
        self._free.append(run)
        self._launch(run)
        self._announce()
        return run

    async def take_turn(self, run_id: str) -> None:
        """A driven run is about to use its kernel: it joins the kernel's lane and this returns
        once it is the kernel's active run (one run at a time per kernel). Raises the run's
        stop when it is stopped while it waits."""
        run = self._runs[run_id]
        if run in self._free:
            self._free.remove(run)
        lane = self._lanes.setdefault(run.kernel_id, [])
        if run not in lane:
            lane.append(run)
        self._announce()
        if lane[0] is run:
            return
        run.turn = asyncio.get_running_loop().create_future()
        try:
            await run.turn
        finally:
            run.turn = None

    async def _create(
        self,
        client_id: str,
        request: Mapping[str, Any],
        settings: Settings,
        model: Model | None,
        origin: str,
        replaces: Mapping[str, str],
        *,
        drive: RunFactory | None = None,
    ) -> ManagedRun:
        run_id = uuid.uuid4().hex
        notebook_path = str(request["notebook_path"])
        kernel_id = str(request["kernel_id"])
        prompt = str(request["prompt"])
        anchor = request.get("anchor_cell_id")
        # A driven run (an outside agent's call) asks no model: no history; its record starts
        # off the call's path, in its writer (see _record_driven).
        if drive is not None:
            history = History(None, [], frozenset())
        else:
            history = await self.recorder.history(notebook_path)
        conversation_id = history.conversation_id
        # A %%ci's cells carry it as their origin; its re-run replaces its earlier cells.
        run_request = replace(
            self._run_request(request, settings, history),
            origin_cell_id=anchor if origin == "magic" and isinstance(anchor, str) else None,
            replaces=dict(replaces),
        )
        channel = CallChannel(
            run_id, notebook_path, lambda message: self.publisher.send(client_id, message)
        )
        workspace = LabWorkspace(
            channel,
            interrupt_kernel=lambda: self.kernels.interrupt(kernel_id),
            kernel_alive=lambda: self.kernels.has(kernel_id),
        )
        holder: list[ManagedRun] = []

        def on_event(event: dict[str, Any]) -> None:
            self._on_event(holder[0], event)

        def approve(cell_id: str, source: str, diff: str) -> Awaitable[ReviewDecision]:
            return self._approve(holder[0], cell_id)

        if drive is not None:
            agent = drive(run_request, workspace, run_id, on_event, approve)
        else:
            assert model is not None
            agent = AgentRun(
                run_request,
                workspace,
                model,
                run_id=run_id,
                on_event=on_event,
                approve=approve,
                use_tools=settings.tool_calling == "on",
            )
        run = ManagedRun(
            run_id,
            client_id,
            notebook_path,
            kernel_id,
            origin,
            prompt,
            anchor if isinstance(anchor, str) else None,
            settings,
            agent,
            workspace,
            channel,
            conversation_id,
        )
        holder.append(run)
        self._runs[run_id] = run
        if drive is not None:
            run.writer = asyncio.ensure_future(self._record_driven(run))
            return run
        run.writer = asyncio.ensure_future(self.recorder.write(run_id, conversation_id, run.writes))
        await self.recorder.started(
            conversation_id, run_id, prompt, settings.public_dict(), run.anchor_cell_id, origin
        )
        return run

    async def _record_driven(self, run: ManagedRun) -> None:
        """A driven run's record: its conversation, its start, then its events in order."""
        run.conversation_id = await self.recorder.conversation_id(run.notebook_path)
        await self.recorder.started(
            run.conversation_id,
            run.run_id,
            run.prompt,
            run.settings.public_dict(),
            run.anchor_cell_id,
            run.origin,
        )
        await self.recorder.write(run.run_id, run.conversation_id, run.writes)

    def _run_request(
        self, request: Mapping[str, Any], settings: Settings, history: History
    ) -> RunRequest:
        """The loop's request from a ``start_run`` or ``preview`` message."""
        anchor = request.get("anchor_cell_id")
        fix = request.get("fix_cell_id")
        attached = [str(path) for path in request.get("attachments") or []]
        attached_cells = tuple(str(cell_id) for cell_id in request.get("attached_cell_ids") or [])
        return RunRequest(
            str(request["prompt"]),
            settings,
            anchor_id=anchor if isinstance(anchor, str) else None,
            history=history.turns,
            fix_cell_id=fix if isinstance(fix, str) and fix else None,
            attachments=(
                describe_all(self.root_dir, attached, samples=settings.share_outputs)
                if attached
                else ""
            ),
            attached_cells=attached_cells,
            said=history.said | self._said.get(history.conversation_id or "", set()),
            instructions=server_instructions(
                settings.instructions, self.root_dir, str(request["notebook_path"])
            ),
        )

    async def preview(self, client_id: str, request: Mapping[str, Any]) -> dict[str, Any]:
        """Exactly what a request would send to the model first (see :func:`.probes.preview`)."""
        if not self.kernels.has(str(request["kernel_id"])):
            raise RunRefused(
                "kernel_unavailable", "The notebook's kernel is not running on this server."
            )
        settings, model = self._settings_and_model(request)
        history = await self.recorder.history(str(request["notebook_path"]))
        run_request = self._run_request(request, settings, history)
        return await preview(self.probes, client_id, request, run_request, settings, model)

    def _settings_and_model(self, request: Mapping[str, Any]) -> tuple[Settings, Model]:
        """A request's settings over the server's, and the model they name (or a refusal)."""
        try:
            settings = self.resolve(request)
            if not settings.model:
                raise ConfigError.no_model()
            return settings, self.make_model(settings)
        except JupyterCIError as err:
            raise RunRefused.of(err) from None

    def _launch(self, run: ManagedRun) -> None:
        run.task = asyncio.ensure_future(self._run(run))

    async def _run(self, run: ManagedRun) -> RunOutcome:
        # Heard by the server too, so that a page reloaded while a cell runs loses nothing.
        run.workspace.watch = self.kernels.watch(run.kernel_id)
        try:
            outcome = await run.agent.run()
        finally:
            if run.workspace.watch is not None:
                run.workspace.watch.close()
            run.channel.close()
            for future in run.reviews.values():
                if not future.done():
                    future.cancel()
        run.outcome = outcome
        await self._finish(run, outcome)
        return outcome

    async def _finish(self, run: ManagedRun, outcome: RunOutcome) -> None:
        if run in self._free:
            self._free.remove(run)
        lane = self._lanes.get(run.kernel_id, [])
        if run in lane:
            lane.remove(run)
        if not lane:
            self._lanes.pop(run.kernel_id, None)
        run.writes.put_nowait(None)
        self._finished.append(run.run_id)
        while len(self._finished) > KEPT_FINISHED_RUNS:
            self._runs.pop(self._finished.pop(0), None)
        self.log.info("jupyter-ci: run %s ended: %s", run.run_id, outcome.status_line())
        if lane and lane[0].task is None:
            self._launch(lane[0])
        elif lane and lane[0].turn is not None and not lane[0].turn.done():
            lane[0].turn.set_result(None)  # a driven run waiting for the kernel: its turn
        self._announce()

    def _stop(self, run: ManagedRun, reason: str, error: JupyterCIError) -> None:
        if run.state.terminal:
            return
        run.agent.stop(reason, error)
        for future in run.reviews.values():
            if not future.done():
                future.set_exception(StoppedByUser())
        if run.turn is not None and not run.turn.done():
            run.turn.set_exception(StoppedByUser())
        if run.task is None:
            # Queued: it ends at once (stopped) without touching the notebook.
            self._launch(run)

    async def _approve(self, run: ManagedRun, cell_id: str) -> ReviewDecision:
        future: asyncio.Future[ReviewDecision] = asyncio.get_running_loop().create_future()
        run.reviews[cell_id] = future
        try:
            return await future
        finally:
            run.reviews.pop(cell_id, None)

    def _on_event(self, run: ManagedRun, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind in ("message", "finished"):
            event = self._scrubbed(event)
        run.seq = int(event["seq"])
        if kind != "token" and len(run.events) < MAX_KEPT_EVENTS:
            # Tokens are not kept for replay: the cells hold the code they streamed, and the
            # model's prose arrives whole in its message event.
            run.events.append(event)
        self.publisher.publish(run.notebook_path, run.owner, event)
        if kind != "token":
            run.writes.put_nowait(event)
        if kind == "cell_updated":
            run.workspace.settled(str(event.get("cell_id")))
        if kind == "message" and event.get("role") == "notice" and run.conversation_id:
            # Known at once to the notebook's next run, before the store has it.
            self._said.setdefault(run.conversation_id, set()).add(str(event.get("text")))
        if kind == "state":
            self._announce()

    def _scrubbed(self, event: dict[str, Any]) -> dict[str, Any]:
        secrets = list(self.secrets())
        clean = dict(event)
        if isinstance(clean.get("text"), str):
            clean["text"] = scrub(clean["text"], secrets)
        error = clean.get("error")
        if isinstance(error, dict):
            clean["error"] = {
                key: scrub(value, secrets) if isinstance(value, str) else value
                for key, value in error.items()
            }
        return clean

    def _announce(self) -> None:
        self.publisher.announce(self.runs())


def _trim(kept: dict[str, Any], limit: int) -> None:
    """Forget the oldest entries of ``kept`` beyond ``limit``."""
    while len(kept) > limit:
        del kept[next(iter(kept))]


def _not_yours() -> RunRefused:
    return RunRefused(
        "not_your_run",
        "That run belongs to another browser tab.",
        hint="Stop or answer it in the tab that started it.",
    )
