"""The agent loop: generate → insert → run → read back → fix, written once.

It acts only through a :class:`~jupyter_ci.agent.workspace.Workspace` and a
:class:`~jupyter_ci.models.base.Model`, and ends in exactly one of done, failed or stopped, with
a reason. ``max_attempts`` counts every try of a cell, ``max_steps`` counts generated cells, the
token and cost caps cover the whole run.

The loop is the only producer of a run's facts (ARCHITECTURE.md, "The run record"): it emits a
protocol event (``jupyter_ci/schema/protocol.schema.json``) for every change to a generated
cell's source (the streamed code once complete, a fix, the user's edit in review, the model's
other proposal after a Reject), every rejection (as the user's message), every execution and
how it ended, and the outcome with the answer and the status line. Whoever records or shows a
run reads these events and rebuilds nothing.

The loop's own steps are here (:meth:`AgentRun.run`, a fix in place, running a cell until it is
fixed, the end); :class:`AgentRun` builds on the run's state, events and one try of a cell
(:mod:`.run_base`), the model's side (:mod:`.generate`) and the user's (:mod:`.review`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeGuard

from ..errors import (
    BadCodeBlock,
    BadNotebookFile,
    BudgetExceeded,
    ConfigError,
    Disconnected,
    InternalError,
    JupyterCIError,
    KernelDied,
    ModelError,
    NotebookUnavailable,
    StoppedByUser,
)
from ..execution.status import CellStatus
from .context import describe_variable
from .digest import Digest, strip_ansi
from .extract import fenced
from .fix_context import ADVICE, answer_as_code, keeps_failed_line, same_code, split_advice
from .generate import _prose
from .inspect_first import inspection_code, loaded_names, named_files, named_frames
from .messages import text_of
from .outcome import RunOutcome
from .own_fix import (
    OwnFix,
    answer_names,
    assigned_back,
    fixes_itself,
    numeric_frames,
    own_fix,
    positionals,
    spellings,
)
from .packages import missing_package
from .prompts import render
from .request import Approver, EventCallback, ReviewDecision, RunRequest
from .retries import (
    KEEP_UNCHANGED,
    KEPT_LINE,
    KEPT_WRONG_NOTICE,
    LOOKS_WRONG,
    NO_CODE,
    REPEATED,
    Retrying,
    Tried,
    repeated_try,
)
from .run_base import ABANDONED, DIGEST_CHARS, NO_STREAM, _Finish, _Rejected
from .states import RunState
from .suspicious import Concern, may_be_right, output_concerns, placeholders, printed
from .tracebacks import cell_line
from .workspace import Execution

#: After Stop, the kernel is interrupted again every this many seconds while the cell still
#: runs (an interrupt that reached the kernel before the cell's code, or code that catches
#: KeyboardInterrupt), at most :data:`STOP_INTERRUPTS` times in all; a cell still running after
#: that (or a request the kernel dropped: an interrupt that lands before the cell's code starts
#: can end ipykernel's handling of it with no reply) is left, and the run ends stopped.
STOP_INTERRUPT_EVERY = 2.0
STOP_INTERRUPTS = 5
#: How long reading what a failure is about may take (seconds): a fix is asked for without it
#: after this (see :mod:`jupyter_ci.agent.fix_context`).
FIX_CONTEXT_TIMEOUT = 15.0


#: The notice when a fix repeats the code that just failed (it is not run); the bench counts them.
SAME_CODE_NOTICE = "The model proposed the code that just failed again; it was not run"
#: The notice when a fix repeats an earlier try of the cell than the last (not run either;
#: the bench counts them with those above).
EARLIER_TRY_NOTICE = "The model proposed an earlier try's code again"
#: The notice when a fix's reply has no code: nothing to run, an attempt used, asked again.
NO_FIX_NOTICE = "The model replied without code for the failing cell"
#: The notice when a fix keeps the code that failed unchanged up to the line that raised (it
#: is not run: it would fail there the same way); the bench counts them apart from repeats.
KEPT_LINE_NOTICE = "The model's fix keeps the line that failed unchanged; it was not run"
#: The notice of a fix jupyter-ci writes itself (``own_fixes``), followed by what it changed.
OWN_FIX_NOTICE = "Fixed without asking the model"
#: What that notice adds, after what it changed: an own fix is not the model's try.
OWN_FIX_FREE = "no attempt used"
#: What those notices add when the model is asked once more, without using an attempt.
ONCE_MORE = "asked once more, without using an attempt"
#: The notice when the fixes of a result that looked wrong failed until ``max_attempts``: the
#: version of the cell that ran is put back and run again (never a failing cell where one ran).
KEPT_NOTICE = (
    "The fixes of a result that looked wrong failed; the cell is back to its version that ran"
)

#: End reasons after which nothing more is asked of the kernel: it or the tab is gone.
_KERNEL_OR_TAB_GONE = frozenset({"kernel_died", "notebook_unavailable"})


def runnable(
    fixed: str | None, source: str, tries: Sequence[Tried] = (), failed_at: int | None = None
) -> TypeGuard[str]:
    """Whether a reply's code ``fixed`` may be run in place of ``source``: it has some, and it
    is not ``source`` again (which would fail the same way), nor ``source`` unchanged up to the
    line that raised (``failed_at``, when ``source`` failed there), nor the code of one of the
    cell's earlier ``tries`` (it failed, or its result looked wrong); see :func:`not_run`."""
    return (
        fixed is not None
        and not same_code(fixed, source)
        and not keeps_failed_line(fixed, source, failed_at)
        and repeated_try(fixed, tries) is None
    )


def not_run(
    fixed: str | None, source: str, tries: Sequence[Tried] = (), failed_at: int | None = None
) -> str:
    """The notice for a reply whose code is not :func:`runnable`."""
    if fixed is None:
        return NO_FIX_NOTICE
    if same_code(fixed, source):
        return SAME_CODE_NOTICE
    number = repeated_try(fixed, tries)
    if number is not None:
        return f"{EARLIER_TRY_NOTICE} (try {number}, which did not work); it was not run"
    return KEPT_LINE_NOTICE if keeps_failed_line(fixed, source, failed_at) else SAME_CODE_NOTICE


def failed_line(execution: Execution) -> int | None:
    """The line of the cell that raised, from its error's traceback (None without one)."""
    error = execution.error or {}
    pieces = error.get("traceback")
    if not isinstance(pieces, list):
        return None
    return cell_line([strip_ansi(str(piece)) for piece in pieces])


class AgentRun(Retrying):
    """One run of the loop. Create it, ``await run()``; ``stop()`` ends it from outside.

    Built in layers, one module each: :class:`~jupyter_ci.agent.run_base.RunBase` (the run's
    state, events and one try of a cell), :class:`~jupyter_ci.agent.generate.Generating` (the
    model), :class:`~jupyter_ci.agent.review.Reviewing` (the user); the loop itself is here.
    """

    # --- control ------------------------------------------------------------------------------

    def stop(self, reason: str = "user", error: JupyterCIError | None = None) -> None:
        """Stop the run: abort the model stream and interrupt the kernel if a cell is running.

        ``reason`` is what was asked, and the stopped run's reason: ``user`` (Stop, an
        interrupt), ``disconnected``, ``kernel_restarted``, ``kernel_shutdown`` or
        ``server_shutdown``. A run stopped before it started ends at once when :meth:`run` is
        called. ``error`` says what happened (default: stopped by the user).
        """
        if self.machine.terminal or self._stopping:
            return
        self._stopping = True
        self._stop_reason = reason
        self._stop_error = error
        self.calls.cancel()
        if self._executing:
            self._interrupt_task = asyncio.ensure_future(self._interrupt_until_stopped())

    async def _interrupt_until_stopped(self) -> None:
        """Interrupt the running cell, again while it keeps running (see STOP_INTERRUPT_EVERY)."""
        for _ in range(STOP_INTERRUPTS):
            await self.workspace.interrupt()
            await asyncio.sleep(STOP_INTERRUPT_EVERY)
            if not self._executing:
                return
        if self._cell_task is not None:
            self._cell_task.cancel()  # stop waiting: the run ends stopped (see _execute)

    # --- the loop -----------------------------------------------------------------------------

    async def run(self) -> RunOutcome:
        """Run to the end; never raises for the run's own failures (they are in the outcome)."""
        return await self.guarded(self._steps)

    async def guarded(self, steps: Callable[[], Awaitable[None]]) -> RunOutcome:
        """Do the run's ``steps`` and end the run as they end: a ``_Finish`` says how, an
        error ends it failed or stopped with its reason (a bug of ours is reported, never
        hidden). The one place a run's end is decided from what happened; never raises for the
        run's own failures. ``steps`` end by raising ``_Finish``."""
        self._started = time.monotonic()
        try:
            if self._stopping:
                raise StoppedByUser()
            await steps()
            raise InternalError("The run's steps ended without saying how the run ended.")
        except _Finish as finish:
            return await self._end(finish.state, finish.reason, finish.error, finish.answer)
        except asyncio.CancelledError:
            if not self._stopping:
                raise
            return await self._end_stopped("")
        except StoppedByUser as err:
            return await self._end_stopped("", err)
        except KernelDied as err:
            if self._stopping:
                return await self._end_stopped("", err)
            return await self._end(RunState.FAILED, "kernel_died", err, "")
        except Disconnected as err:
            return await self._end(RunState.STOPPED, "disconnected", err, "")
        except (NotebookUnavailable, BadNotebookFile) as err:
            return await self._end(RunState.FAILED, "notebook_unavailable", err, "")
        except BudgetExceeded as err:
            return await self._end(RunState.FAILED, "budget_exceeded", err, "")
        except ModelError as err:
            return await self._end(RunState.FAILED, "model_error", err, "")
        except ConfigError as err:
            return await self._end(RunState.FAILED, "config_error", err, "")
        except BadCodeBlock as err:
            return await self._end(RunState.FAILED, "bad_code_block", err, "")
        except Exception as exc:  # a bug of ours: reported, never hidden
            error = InternalError(f"{type(exc).__name__}: {exc}")
            return await self._end(RunState.FAILED, "internal_error", error, "")

    async def _steps(self) -> None:
        """The loop: generate, insert, run, read back, fix; until an answer or a cap."""
        self._check_mode()
        self._move(RunState.GENERATING)
        if self.request.fix_cell_id is not None:
            answer = await self._fix(self.request.fix_cell_id)
            raise _Finish(RunState.DONE, "fixed", answer=answer)
        messages = await self.conversation.opening(self.workspace, self.request.anchor_id)
        after_id = await self._insertion_point()
        step = 0
        inspected = await self._inspect_first(after_id, messages)
        if inspected is not None:
            step, after_id = 1, inspected
        #: The steps before the model's first cell (the look at the data is jupyter-ci's).
        ours = step
        looked_again = False
        temperature: float | None = None
        #: What the model's cells printed (an answer in the request's format may be there).
        outputs: list[str] = []
        while True:
            reply, code, cell_id = await self._generate(
                messages, stream_after=after_id, temperature=temperature
            )
            messages.append({"role": "assistant", "content": reply.text or code or ""})
            temperature = None
            if code is None:
                concerns = await self._answer_concerns(reply.text, ran=step > ours, outputs=outputs)
                if concerns and not looked_again and step < self.settings.max_steps:
                    # One more look at an answer that cannot be right as written.
                    looked_again = True
                    if reply.text.strip():
                        self.emit("message", role="assistant", text=reply.text.strip())
                    self._look_again_notice(concerns, None)
                    told = render("answer_suspicious", concerns=self._describe(concerns))
                    messages.append({"role": "user", "content": told})
                    temperature = self._fix_temperature(1)
                    continue
                raise self._answered(reply, "answered")
            step += 1
            if cell_id is None:
                cell_id = await self._insert(after_id, code, step)
            after_id = cell_id
            if self.settings.mode == "insert":
                raise _Finish(RunState.DONE, "inserted")
            execution, digest = await self._run_until_fixed(cell_id, code, messages)
            outputs.extend(printed(execution.outputs))
            if step >= self.settings.max_steps:
                raise _Finish(RunState.DONE, "max_steps")
            messages.append(
                self.conversation.user_message(
                    render(
                        "cell_succeeded",
                        step=step,
                        max_steps=self.settings.max_steps,
                        digest=self.conversation.wrap(digest.text),
                    ),
                    digest,
                )
            )
            self._move(RunState.GENERATING)

    def _check_mode(self) -> None:
        if self.settings.mode == "review" and self.approve is None:
            raise ConfigError(
                "Review mode needs a frontend to approve cells (the JupyterLab panel).",
                hint="Use --mode auto or --no-run here.",
                option="mode",
            )

    async def _insertion_point(self) -> str | None:
        if self.request.anchor_id is not None:
            return self.request.anchor_id
        cells = await self.workspace.read_cells(outputs=False)
        return cells[-1].id if cells else None

    async def opening_messages(self) -> list[dict[str, Any]]:
        """The messages of the run's first model call (what a preview shows the user)."""
        if self.request.fix_cell_id is not None:
            messages, _ = await self.conversation.fix_opening(
                self.workspace, self.request.fix_cell_id, self._digest
            )
            return messages
        return await self.conversation.opening(self.workspace, self.request.anchor_id)

    async def _fix(self, cell_id: str) -> str:
        """Fix one existing cell in place: the model sees its code and outputs, the fix
        replaces its source (the diff is shown) and it runs, within ``max_attempts``.

        Returns the model's prose, if it wrote any.
        """
        messages, target = await self.conversation.fix_opening(
            self.workspace, cell_id, self._digest
        )
        # The user's own run failed; the fix is this run's first try of the cell (attempt 1 of
        # max_attempts), and every later count follows from it.
        self._attempt = 0
        self._move(RunState.FIXING)
        reply, fixed, _ = await self._generate(messages, stream_after=NO_STREAM)
        messages.append({"role": "assistant", "content": reply.text or fixed or ""})
        if fixed is None:
            raise BadCodeBlock("The model answered without a fix for the cell.", reply.text)
        self.cells.adopt(cell_id)
        self._users_code = target.source
        await self.cells.rewrite(cell_id, target.source, fixed, 1, cause="fix")
        if self.settings.mode != "insert":
            await self._run_until_fixed(cell_id, fixed, messages)
        return _prose(reply.text)

    async def _run_until_fixed(
        self, cell_id: str, code: str, messages: list[dict[str, Any]]
    ) -> tuple[Execution, Digest]:
        """Run the cell; on failure ask for fixes until it succeeds or attempts run out.

        ``messages`` ends with the model's reply that wrote the cell; what comes before it is
        what the cell was asked from (a fresh fix starts again from there, see :mod:`.retries`).
        """
        attempt = 1
        source = code
        rejections = 0
        installed: set[str] = set()
        approved = False
        base = list(messages[:-1])
        tries: list[Tried] = []
        #: Every version of the cell that ran in this call (an own fix never runs one again).
        versions: set[str] = set()
        #: The last version of the cell that ran without an error (its result looked wrong).
        ran_well: str | None = None
        self.spellings = {}
        while True:
            ran = False
            if self.settings.mode == "review" and not approved:
                try:
                    source, ran = await self._review(cell_id, source, attempt)
                except _Rejected as rejected:
                    rejections += 1
                    source = await self._propose_instead(
                        cell_id, source, messages, rejections, attempt, rejected.comment
                    )
                    continue
            approved = False
            if ran:
                execution, digest = await self._taken_from_notebook(cell_id, attempt)
            else:
                execution, digest = await self._execute(cell_id, attempt)
            versions.add(source)
            if execution.status is CellStatus.OK:
                answered = self._own_result_fix(execution, source, digest, attempt)
                if answered is not None and answered[0].code not in versions:
                    # Costs no attempt, at the last one too (the answer's values stand).
                    await self._own_fixed(cell_id, source, *answered, messages, attempt)
                    source = answered[0].code
                    continue
                concerns = self._concerns(execution, attempt)
                if not concerns:
                    return execution, digest
                ran_well = source
                fixed = await self._look_again(
                    messages, base, tries, source, digest, concerns, attempt
                )
                while not runnable(fixed, source):
                    # The model keeps the result: it stands if it may be right, or when no
                    # attempt would be left to run another version.
                    if may_be_right(concerns) or attempt + 1 >= self.settings.max_attempts:
                        return execution, digest
                    attempt += 1
                    fixed = await self._kept_wrong(messages, base, tries, concerns, attempt)
                attempt += 1
                await self.cells.rewrite(cell_id, source, fixed, attempt, cause="fix")
                source = fixed
                continue
            missing = missing_package(execution)
            if missing is not None and missing not in installed:
                await self._install(missing, cell_id)
                installed.add(missing)
                approved = True  # the same code again, now that the package is there
                continue
            last = attempt >= self.settings.max_attempts
            if last and not self._may_fix_itself(execution):
                return await self._back_to(cell_id, source, ran_well, execution)
            timed_out = execution.status is CellStatus.TIMED_OUT
            # Read while the state is still the attempt's: an own fix is no new attempt.
            context, own = await self._what_is_there(execution, source)
            template = "cell_timed_out" if timed_out else "cell_failed"
            extra = {"seconds": f"{self.settings.timeout:g}"} if timed_out else {}
            prompt = render(
                template,
                attempt=attempt,
                max_attempts=self.settings.max_attempts,
                digest=self.conversation.wrap(digest.text),
                context=context,
                **extra,
            )
            told = self.conversation.user_message(prompt, digest)
            if own is not None and own.code not in versions:
                # jupyter-ci's own fix, certain from the kernel's facts (it always changes the
                # code): no model call, and no attempt, as for a missing package. Never code
                # that ran already: two fixes that undo each other end here.
                await self._own_fixed(cell_id, source, own, told, messages, attempt)
                self.spellings.update(own.respelled)
                source = own.code
                continue
            if last:
                return await self._back_to(cell_id, source, ran_well, execution)
            self._move(RunState.FIXING)
            ending = (
                f"It was still running after {self.settings.timeout:g} seconds and was interrupted"
                if timed_out
                else "It failed"
            )
            tries.append(Tried(source, ending, digest.text))
            failed_at = failed_line(execution)
            fixed = await self._ask_again(messages, base, tries, told, attempt, context=context)
            if not runnable(fixed, source, tries, failed_at) and self._may_ask_once_more(attempt):
                # Once per failure, a reply that could not be run costs no attempt.
                notice = not_run(fixed, source, tries, failed_at)
                self.emit("message", role="notice", text=f"{notice}; {ONCE_MORE}.")
                fixed = await self._ask_once_more(messages, attempt)
            while not runnable(fixed, source, tries, failed_at):
                # Nothing is run, and it costs an attempt.
                notice = not_run(fixed, source, tries, failed_at)
                number = repeated_try(fixed, tries) if fixed is not None else None
                kept_line = notice == KEPT_LINE_NOTICE
                line = source.splitlines()[(failed_at or 1) - 1].strip() if kept_line else ""
                attempt += 1
                self._reach(cell_id, attempt)  # used up, though nothing ran: it counts
                if kept_line:  # its code is told, so that a fresh fix sees what not to keep
                    tries.append(Tried(fixed or "", KEPT_LINE, f"line {failed_at}: {line}"))
                else:
                    tries.append(Tried("", NO_CODE if fixed is None else REPEATED, "", number or 0))
                self.emit(
                    "message",
                    role="notice",
                    text=f"{notice} (attempt {attempt}/{self.settings.max_attempts}).",
                )
                if attempt >= self.settings.max_attempts:
                    return await self._back_to(cell_id, source, ran_well, execution)
                counted = {"attempt": attempt, "max_attempts": self.settings.max_attempts}
                if fixed is None:
                    again = render("fix_without_code", **counted)
                elif same_code(fixed, source):
                    again = render("fix_identical", which="the code that just failed", **counted)
                elif kept_line:
                    which = (
                        f"the code that just failed up to its line {failed_at}, which raised "
                        f"the error (`{line}`)"
                    )
                    again = render("fix_identical", which=which, **counted)
                else:
                    which = f"the code of try {number}, which did not work"
                    again = render("fix_identical", which=which, **counted)
                told = {"role": "user", "content": again}
                fixed = await self._ask_again(messages, base, tries, told, attempt, context=context)
            attempt += 1
            await self.cells.rewrite(cell_id, source, fixed, attempt, cause="fix")
            source = fixed

    async def _own_fixed(
        self,
        cell_id: str,
        source: str,
        own: OwnFix,
        told: dict[str, Any],
        messages: list[dict[str, Any]],
        attempt: int,
    ) -> None:
        """Write jupyter-ci's own fix into the cell, with its notice. ``told`` (what the model
        would have been told instead) and the new code go into the conversation as the model's
        turn, so that it holds the cell as it is: the long conversation's next fix, and the
        next step once the cell ran, read it (a fresh fix starts again from the request)."""
        self.emit("message", role="notice", text=f"{OWN_FIX_NOTICE}: {own.said} ({OWN_FIX_FREE}).")
        messages += [told, {"role": "assistant", "content": fenced(own.code)}]
        await self.cells.rewrite(cell_id, source, own.code, attempt, cause="own_fix")

    def _own_result_fix(
        self, execution: Execution, code: str, digest: Digest, attempt: int
    ) -> tuple[OwnFix, dict[str, Any]] | None:
        """jupyter-ci's own fix of a cell that ran (``own_fixes``) and what the model would have
        been told instead; None when there is none. Where pandas warned that an in-place
        change of a column did nothing, the change assigned back
        (:func:`.own_fix.assigned_back`); else, where the cell printed its answer with a value
        where the request's format has a name, the answer printed with the format's names
        (:func:`.own_fix.answer_names`)."""
        if not self.settings.own_fixes:
            return None
        concerns = output_concerns(execution.outputs, self.request.prompt)
        noop = [concern for concern in concerns if concern.kind == "noop"]
        names = list(placeholders(self.request.prompt))
        form = [concern for concern in concerns if concern.kind == "format"] if names else []
        if noop and (own := assigned_back(code)) is not None:
            told = noop
        elif form and (own := answer_names(code, names)) is not None:
            told = form
        else:
            return None
        prompt = render(
            "cell_suspicious",
            attempt=attempt,
            max_attempts=self.settings.max_attempts,
            concerns=self._describe(told),
            digest=self.conversation.wrap(digest.text),
            keep="",
        )
        return own, self.conversation.user_message(prompt, digest)

    async def _back_to(
        self, cell_id: str, source: str, ran_well: str | None, failed: Execution
    ) -> tuple[Execution, Digest]:
        """Attempts are out and the cell fails (``failed``): the run fails, unless a version of
        the cell ran (``ran_well``, whose result looked wrong): that one is put back and run
        again, and the run goes on from it, as when the model keeps a result."""
        if ran_well is None:
            raise _Finish(RunState.FAILED, "max_attempts", self._error_of(failed))
        self.emit("message", role="notice", text=f"{KEPT_NOTICE}.")
        attempt = self.settings.max_attempts
        await self.cells.rewrite(cell_id, source, ran_well, attempt, cause="kept")
        execution, digest = await self._execute(cell_id, attempt, counted=False)
        if execution.status is not CellStatus.OK:  # it ran before; the kernel's state differs
            raise _Finish(RunState.FAILED, "max_attempts", self._error_of(execution))
        return execution, digest

    async def _look_again(
        self,
        messages: list[dict[str, Any]],
        base: list[dict[str, Any]],
        tries: list[Tried],
        source: str,
        digest: Digest,
        concerns: list[Concern],
        attempt: int,
    ) -> str | None:
        """The cell ended well but its result looks wrong: tell the model what, and return its
        new code (None, or the same code, when it keeps the result)."""
        self._move(RunState.FIXING, LOOKS_WRONG)
        self._look_again_notice(concerns, attempt + 1)
        described = self._describe(concerns)
        tries.append(Tried(source, "It ran, but its result looks wrong", described, shown=True))
        keep = may_be_right(concerns)
        prompt = render(
            "cell_suspicious",
            attempt=attempt,
            max_attempts=self.settings.max_attempts,
            concerns=described,
            digest=self.conversation.wrap(digest.text),
            keep=KEEP_UNCHANGED if keep else "",
        )
        message = self.conversation.user_message(prompt, digest)
        fixed = await self._ask_again(messages, base, tries, message, attempt, keep=keep)
        if not runnable(fixed, source) and not keep and self._may_ask_once_more(attempt):
            # Kept as it is, a result that cannot be right as written (an answer in another
            # format): asked once more, as a failed cell's fix that could not run is.
            self.emit("message", role="notice", text=f"{KEPT_WRONG_NOTICE}; {ONCE_MORE}.")
            fixed = await self._ask_once_more(messages, attempt)
        return fixed

    async def _inspect_first(
        self, after_id: str | None, messages: list[dict[str, Any]]
    ) -> str | None:
        """With ``inspect_data``: add and run a cell that looks at the data the request names
        (see :mod:`.inspect_first`), and tell the model what it showed; returns the cell's id
        (None when there is nothing to look at, or the run may not add it: review or insert
        mode, a fix of a cell, a single step)."""
        settings = self.settings
        if (
            not settings.inspect_data
            or settings.mode != "auto"
            or settings.max_steps < 2
            or self.request.fix_cell_id is not None
        ):
            return None
        await self.files.start()  # the folder as it is before the run's first cell
        variables = await self.workspace.inspect_variables()
        files = named_files(self.request.prompt, self.files.listed)
        frames: list[str] = []
        if settings.share_outputs:  # without rows, a frame's look adds nothing to its listing
            frames = named_frames(self.request.prompt, variables, await self.workspace.read_cells())
        if not files and not frames:
            return None
        taken = [variable.name for variable in variables]
        code = inspection_code(files, frames, rows=settings.share_outputs, taken=taken)
        cell_id = await self._insert(after_id, code, 1)
        _, digest = await self._execute(cell_id, 1)
        names = loaded_names(code)
        now = {v.name: v for v in await self.workspace.inspect_variables()}
        defined = [name for name in names if name in now and now[name].columns is not None]
        made = ""
        if not settings.share_outputs and defined:
            # The outputs are withheld; the frames' shapes, columns and types are not.
            shown = "\n".join(describe_variable(now[name]) for name in defined)
            made = "\nThe data frames it looked at:\n" + self.conversation.wrap(shown)
        told = render(
            "data_inspected",
            step=1,
            max_steps=settings.max_steps,
            frames=", ".join(f"`{name}`" for name in defined) or "none (see its error)",
            digest=self.conversation.wrap(digest.text),
            variables=made,
        )
        self.conversation.add_look(messages, "\n\n" + told, digest)
        self._move(RunState.GENERATING)
        return cell_id

    def _may_fix_itself(self, execution: Execution) -> bool:
        """Whether jupyter-ci may have its own fix for the cell's error (``own_fixes``)."""
        error = execution.error if execution.status is CellStatus.ERROR else None
        return self.settings.own_fixes and error is not None and fixes_itself(error.get("ename"))

    async def _what_is_there(self, execution: Execution, code: str) -> tuple[str, OwnFix | None]:
        """What the cell's error is about, read from the kernel (the frame's real columns, the
        names defined, the files...), as a paragraph of the fix prompt ('' when nothing fits),
        and jupyter-ci's own fix of the cell (with ``own_fixes``; None when it has none)."""
        error = execution.error
        if execution.status is not CellStatus.ERROR or error is None:
            return "", None
        ename, evalue = str(error.get("ename", "")), str(error.get("evalue", ""))
        await self.files.settle()  # one request of the run in the kernel at a time
        try:
            lines = await asyncio.wait_for(
                self.workspace.fix_context(ename, evalue, code), FIX_CONTEXT_TIMEOUT
            )
        except (JupyterCIError, asyncio.TimeoutError):
            lines = []
        lines, pairs = spellings(lines)
        lines, positional = positionals(lines)
        lines, numeric = numeric_frames(lines)
        own = None
        if self.settings.own_fixes:
            named = named_files(self.request.prompt, self.files.listed)
            own = own_fix(code, ename, evalue, pairs, positional, named, numeric)
        facts, advice = split_advice(lines)
        if ename == "SyntaxError" and answer_as_code(code):
            advice.append(ADVICE["answer_as_code"])
        parts = list(advice)
        if facts:
            wrapped = self.conversation.wrap("\n".join(facts))
            parts.insert(0, "What is there now, read from the kernel:\n" + wrapped)
        return ("\n\n" + "\n".join(parts) if parts else ""), own

    # --- the end ------------------------------------------------------------------------------

    async def _end_stopped(self, answer: str, error: JupyterCIError | None = None) -> RunOutcome:
        """End as asked: stopped, with the reason and error :meth:`stop` was given."""
        error = self._stop_error or error or StoppedByUser()
        return await self._end(RunState.STOPPED, self._stop_reason, error, answer)

    async def _end(
        self, state: RunState, reason: str, error: JupyterCIError | None, answer: str
    ) -> RunOutcome:
        if self._interrupt_task is not None and not self._interrupt_task.done():
            self._interrupt_task.cancel()  # no cell runs any more: no further interrupts
        # The last cell's files are part of the record, unless the kernel or the tab is gone.
        await self.files.settle(drop=state is RunState.STOPPED or reason in _KERNEL_OR_TAB_GONE)
        # A proposal for the user's cell that was never accepted does not stay in it.
        users_code_back = await self._give_back(reason)
        if self.machine.state is RunState.QUEUED and state is RunState.DONE:
            self._move(RunState.GENERATING)
        outcome = RunOutcome(
            self.run_id,
            state,
            reason,
            error,
            list(self.cells.ids),
            self.attempts,
            self.calls.usage,
            time.monotonic() - self._started,
            answer,
            list(self.notices),
            users_code_back,
            agent=self.agent,
        )
        text = outcome.status_line()
        self.machine.advance(state, reason)
        self.emit("state", state=state.value, reason=reason, text=text)
        self.emit(
            "finished",
            state=state.value,
            reason=reason,
            error=error.to_dict() if error is not None else None,
            summary=outcome.summary(),
            answer=answer,
            text=text,
        )
        return outcome


__all__ = [
    "ABANDONED",
    "DIGEST_CHARS",
    "AgentRun",
    "Approver",
    "EventCallback",
    "ReviewDecision",
    "RunOutcome",
    "RunRequest",
    "text_of",
]
