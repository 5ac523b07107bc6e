"""The notebooks an MCP client names: each path to its hands, live or headless.

Every tool call names its notebook by path; nothing here holds a "current notebook". A path
is checked (under the server's root, a notebook) and resolved at each call:

- **live**, when a JupyterLab tab has the notebook open: the call is a run of the run manager
  (:meth:`~jupyter_ci.server.runs.RunManager.start_driven`) acted out through that tab, so the
  cells appear and run where the user watches, and review mode, Stop and the panel apply;
- **headless** otherwise: the file through the contents manager and the server's kernel for it
  (:mod:`.headless`), the run recorded in the notebook's conversation all the same.

It also remembers, per agent, what the agent wrote: the cells it inserted with the source it
last gave them (an agent may delete only its own cells, unchanged since), the cell it added last
(``execute`` goes after it), and the latest call on each cell (``wait_cell``).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from jupyter_core.utils import ensure_async

from ..agent.files import Snapshot
from ..agent.loop import Approver, EventCallback, RunRequest
from ..agent.states import RunState
from ..agent.workspace import Variable, Workspace
from ..errors import ServerStopping
from ..models.base import Model
from ..server.recording import RunRecorder
from ..server.store.records import source_hash
from ..settings import Settings
from .activity import McpRun
from .headless import FileState, FileWorkspace, KernelPool, NotebookFile
from .recording import Recording
from .results import KernelState, ToolFailure
from .saving import TabSaves

log = logging.getLogger("jupyter_ci.mcp")

#: Notebook files ``list_notebooks`` lists at most, and how deep it looks under the root.
MAX_LISTED = 500
MAX_DEPTH = 6
#: Folders it never looks into.
SKIPPED_DIRS = frozenset({"node_modules", "__pycache__", "site-packages", ".ipynb_checkpoints"})
#: Calls remembered for ``wait_cell`` (the oldest are forgotten first).
KEPT_CALLS = 500
#: Seconds the server's stop waits for headless runs to end, then for their records.
CLOSE_TIMEOUT = 15.0

Steps = Callable[[McpRun], Awaitable[None]]


@dataclass
class Backend:
    """What the MCP layer needs of a Jupyter server (the running one, or local managers)."""

    contents: Any
    sessions: Any
    kernels: Any
    root_dir: str
    #: The server's own (trusted) settings.
    settings: Callable[[], Settings]
    #: Records runs in the notebooks' conversations (None: not recorded).
    recorder: RunRecorder | None = None
    #: The run manager and the hub of the JupyterLab tabs (None without a server: all headless).
    manager: Any = None
    hub: Any = None
    #: A request's settings (its ``options`` and ``user_options`` over the server's, as a
    #: ``start_run`` request's) and a model for them (``ask``).
    resolve: Callable[[Mapping[str, Any]], Settings] | None = None
    make_model: Callable[[Settings], Model] | None = None


class Notebooks:
    """Resolves notebook paths and starts the runs of tool calls."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.pool = KernelPool(backend.sessions, backend.kernels, backend.contents)
        self._calls: OrderedDict[tuple[str, str], McpRun] = OrderedDict()
        #: (path, cell id) → (agent, hash of the source it last gave the cell).
        self._authored: dict[tuple[str, str], tuple[str, str]] = {}
        #: (agent session, path) → the cell that session added last.
        self._last_added: dict[tuple[str, str], str] = {}
        #: path → the kernel's files after the latest call's cell (the next call's "before").
        self._files: dict[str, Snapshot] = {}
        self._files_state: dict[str, FileState] = {}
        self._tasks: set[asyncio.Future[Any]] = set()
        self._headless: dict[asyncio.Future[None], McpRun] = {}
        self._writers: set[asyncio.Future[None]] = set()
        self._saves = TabSaves(backend.manager)

    # --- paths ----------------------------------------------------------------------------

    def path_of(self, raw: str) -> str:
        """The notebook's path under the root, from what the agent gave: an absolute path
        inside the root is made relative; ``..`` never leaves it."""
        text = raw.strip().replace("\\", "/")
        if not text:
            raise ToolFailure("Give the notebook's path (list_notebooks lists them).")
        root = os.path.realpath(self.backend.root_dir) if self.backend.root_dir else ""
        if root and os.path.isabs(text) and not text.startswith("//"):
            real = os.path.realpath(text)
            if real == root or real.startswith(root + os.sep):
                text = os.path.relpath(real, root).replace(os.sep, "/")
        parts = [part for part in text.split("/") if part not in ("", ".")]
        if not parts or ".." in parts:
            raise ToolFailure(
                f"{raw!r} is outside the server's root folder; give a path under it "
                "(list_notebooks lists the notebooks)."
            )
        return "/".join(parts)

    def file(self, path: str) -> NotebookFile:
        """The notebook's file (one lock per path for its writes)."""
        return NotebookFile(
            self.backend.contents, path, self._files_state.setdefault(path, FileState())
        )

    def tab_for(self, path: str) -> str | None:
        """A JupyterLab tab that has the notebook open now (None: headless)."""
        hub = self.backend.hub
        if hub is None or self.backend.manager is None:
            return None
        viewers: list[str] = hub.viewers(path)
        return viewers[-1] if viewers else None

    def workspace(self, path: str) -> FileWorkspace:
        """The headless workspace of the notebook (a new one per call)."""
        return FileWorkspace(self.file(path), self.pool)

    # --- kernels ----------------------------------------------------------------------------

    async def kernel_state(self, path: str) -> KernelState | None:
        """The notebook's kernel (None when no session has one)."""
        kernel_id = await self.pool.kernel_of(path)
        if kernel_id is None:
            return None
        name, state = self.pool.state(kernel_id)
        return KernelState(name=name, state=state)

    async def listing(self) -> tuple[list[tuple[str, bool, KernelState | None]], bool]:
        """Every notebook: those open in JupyterLab and the files under the root (at most
        :data:`MAX_LISTED`), each with whether a tab has it open and its kernel."""
        hub = self.backend.hub
        opened: set[str] = hub.open_paths() if hub is not None else set()
        files, truncated = await asyncio.to_thread(
            _notebook_files, self.backend.root_dir, MAX_LISTED
        )
        kernels: dict[str, KernelState] = {}
        for session in await ensure_async(self.backend.sessions.list_sessions()):
            kernel = session.get("kernel") or {}
            if session.get("path") and kernel.get("id"):
                name, state = self.pool.state(str(kernel["id"]))
                kernels[str(session["path"])] = KernelState(name=name, state=state)
        paths = sorted(set(files) | opened, key=lambda p: (p not in opened, p))
        return [(path, path in opened, kernels.get(path)) for path in paths], truncated

    # --- what each agent wrote ----------------------------------------------------------------

    def authored(self, path: str, cell_id: str, agent: str, source: str) -> None:
        """The agent gave the cell this source (it inserted or edited it)."""
        self._authored[(path, cell_id)] = (agent, source_hash(source))

    def author_of(self, path: str, cell_id: str) -> tuple[str, str] | None:
        """The agent that inserted the cell and the hash of the source it last gave it."""
        return self._authored.get((path, cell_id))

    def forget_cell(self, path: str, cell_id: str) -> None:
        """The cell is gone."""
        self._authored.pop((path, cell_id), None)

    def added(self, session: str, path: str, cell_id: str) -> None:
        """The session's agent added the cell last (``execute`` goes after it next)."""
        self._last_added[(session, path)] = cell_id

    def last_added(self, session: str, path: str) -> str | None:
        """The cell the session's agent added last in the notebook, if any."""
        return self._last_added.get((session, path))

    def call_on(self, path: str, cell_id: str) -> McpRun | None:
        """The latest call that ran (or runs) the cell."""
        return self._calls.get((path, cell_id))

    def remember_call(self, path: str, cell_id: str, run: McpRun) -> None:
        """The call runs the cell (``wait_cell`` finds it)."""
        key = (path, cell_id)
        self._calls.pop(key, None)
        self._calls[key] = run
        while len(self._calls) > KEPT_CALLS:
            self._calls.popitem(last=False)

    def stop_calls(self, path: str) -> bool:
        """Stop the calls whose cells run in the notebook now (the agent's interrupt): their
        cells end ``interrupted``; returns whether there was any."""
        running = [
            run
            for (at, _), run in self._calls.items()
            if at == path and not run.done.done() and run.machine.state is RunState.EXECUTING
        ]
        for run in running:
            if run.stop_hook is not None:
                task = asyncio.ensure_future(run.stop_hook())
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            else:
                run.stop("user")
        return bool(running)

    async def interrupt(self, path: str) -> bool:
        """Interrupt the notebook's kernel as its interrupt button does; False when it has
        none."""
        kernel_id = await self.pool.kernel_of(path)
        if kernel_id is None:
            return False
        await ensure_async(self.backend.kernels.interrupt_kernel(kernel_id))
        return True

    async def restart(self, path: str) -> str:
        """Restart the notebook's kernel (start one when it has none); what was done."""
        kernel_id = await self.pool.kernel_of(path)
        if kernel_id is None:
            notebook = await self.file(path).load() if self.tab_for(path) is None else None
            spec = (notebook.get("metadata", {}).get("kernelspec") or {}) if notebook else {}
            await self.pool.ensure_kernel(path, spec.get("name"))
            return f"{path} had no kernel: started one."
        await self.pool.restart(kernel_id)
        return f"Restarted the kernel of {path}: its variables are gone."

    async def variables(self, path: str) -> list[Variable]:
        """The kernel's variables ([] when no kernel runs for the notebook)."""
        kernel_id = await self.pool.kernel_of(path)
        if kernel_id is None:
            return []
        busy = [
            run.cell_id
            for (at, _), run in self._calls.items()
            if at == path and not run.done.done() and run.machine.state is RunState.EXECUTING
        ]
        tab = self.tab_for(path)
        if busy or (tab is None and (await self.pool.runner(kernel_id)).busy):
            which = f"cell {busy[0]}" if busy and busy[0] else "a cell"
            raise ToolFailure(
                f"The kernel of {path} is busy running {which}; its variables can be read once "
                "it ends (wait_cell), or interrupt it.",
                code="kernel_busy",
            )
        if tab is not None:
            with self.backend.manager.probes.workspace(tab, path) as workspace:
                return list(await workspace.inspect_variables())
        return await (await self.pool.runner(kernel_id)).inspect_variables()

    # --- the runs of calls ------------------------------------------------------------------

    def settings(self, *, mode: str | None = None, timeout: float = 0.0) -> Settings:
        """The settings of a call's run: the server's, with the call's timeout (0: the cell is
        never interrupted for it) and one attempt (the agent does its own fixing)."""
        base = self.backend.settings()
        return replace(
            base,
            mode=mode or base.mode,
            timeout=timeout,
            max_attempts=1,
            max_steps=1,
            share_outputs=True,
        )

    async def start(
        self, path: str, agent: str, prompt: str, settings: Settings, steps: Steps
    ) -> McpRun:
        """Start the call's run: through the tab that has the notebook open, else headless.

        Live, it is a run of the run manager (the kernel's lane: after the run in progress);
        headless, it starts at once (the kernel workspace serialises the kernel's requests).
        """

        def keep(snapshot: Snapshot) -> None:
            self._files[path] = snapshot

        async def files_known(run: McpRun) -> None:
            run.files_before = self._files.get(path)
            run.keep_files = keep
            await steps(run)

        tab = self.tab_for(path)
        if tab is not None:
            return await self._start_live(tab, path, agent, prompt, settings, files_known)
        return await self._start_headless(path, agent, prompt, settings, files_known)

    async def _start_live(
        self, tab: str, path: str, agent: str, prompt: str, settings: Settings, steps: Steps
    ) -> McpRun:
        kernel_id = await self.pool.kernel_of(path)
        if kernel_id is None:
            raise ToolFailure(
                f"{path} is open in JupyterLab without a kernel; select a kernel for it there "
                "(Kernel > Change Kernel), then call again."
            )

        manager = self.backend.manager

        async def persist() -> None:
            # Without real-time collaboration too, what the agent did is soon on disk.
            self._saves.changed(tab, path)

        with manager.probes.workspace(tab, path) as probe:
            options = await probe.run_options()
        if self.backend.resolve is not None:
            # Review mode and the like are the user's (their JupyterLab settings win).
            mode = self.backend.resolve({"user_options": {"mode": options.get("mode")}}).mode
            settings = replace(settings, mode=mode)

        def drive(
            request: RunRequest,
            workspace: Any,
            run_id: str,
            on_event: EventCallback,
            approve: Approver,
        ) -> McpRun:
            run = McpRun(
                request, workspace, agent=agent, run_id=run_id, on_event=on_event, approve=approve
            )
            run.steps = steps
            run.persist = persist
            run.turn = lambda: manager.take_turn(run_id)
            run.stop_hook = lambda: manager.stop(tab, run_id)
            return run

        managed = await manager.start_driven(tab, path, kernel_id, prompt, settings, drive)
        run: McpRun = managed.agent
        return run

    async def _start_headless(
        self, path: str, agent: str, prompt: str, settings: Settings, steps: Steps
    ) -> McpRun:
        workspace: Workspace = self.workspace(path)
        recording = Recording(self.backend.recorder, path, prompt, settings)
        run = McpRun(RunRequest(prompt, settings), workspace, agent=agent, on_event=recording.event)
        recording.begin(run.run_id)
        if recording.writer is not None:
            self._writers.add(recording.writer)
            recording.writer.add_done_callback(self._writers.discard)
        run.steps = steps
        task = asyncio.ensure_future(self._run_headless(run, recording))
        self._headless[task] = run
        task.add_done_callback(lambda done: self._headless.pop(done, None))
        return run

    async def _run_headless(self, run: McpRun, recording: Recording) -> None:
        try:
            await run.run()
        finally:
            await recording.end()

    async def close(self) -> None:
        """Stop the headless runs (recorded as stopped by the server's stop), let their records
        be written, and release the kernels' channels."""
        for run in self._headless.values():
            run.stop("server_shutdown", ServerStopping())
        for tasks in (set(self._headless), self._tasks):
            if tasks:
                _, late = await asyncio.wait(tasks, timeout=CLOSE_TIMEOUT)
                for task in late:
                    task.cancel()
        if self._writers:
            await asyncio.wait(self._writers, timeout=CLOSE_TIMEOUT)
        writing = {s.writing for s in self._files_state.values() if s.writing is not None}
        if writing:
            await asyncio.wait(writing, timeout=CLOSE_TIMEOUT)  # outputs not written yet
        await self._saves.close()
        self.pool.close()


def _notebook_files(root: str, limit: int) -> tuple[list[str], bool]:
    """The notebook files under ``root`` (hidden folders and caches skipped), relative, at most
    ``limit``; and whether there were more."""
    found: list[str] = []
    if not root or not os.path.isdir(root):
        return found, False
    for folder, dirs, files in os.walk(root):
        relative = os.path.relpath(folder, root)
        depth = 0 if relative == "." else relative.count(os.sep) + 1
        dirs[:] = sorted(
            d for d in dirs if not d.startswith(".") and d not in SKIPPED_DIRS and depth < MAX_DEPTH
        )
        for name in sorted(files):
            if name.endswith(".ipynb") and not name.startswith("."):
                path = name if relative == "." else f"{relative}/{name}".replace(os.sep, "/")
                if len(found) >= limit:
                    return found, True
                found.append(path)
    return found, False
