"""How a run asks again after a cell failed or its result looked wrong: the levers.

- ``fix_temperatures``: each fix is sampled at its own temperature (the first fix, the second,
  ...; the last one repeats). At temperature 0 a prompt that is nearly the same as the last one
  gets nearly the same code, which already failed. Only with ``temperature`` set: at a
  provider's default temperature replies vary already, and reasoning models take no other.
- ``fresh_fixes``: a fix is asked for afresh, from what the cell was asked from (the request,
  or the step before it) plus a short account of this cell's tries (:func:`account`: how each
  try ended and what it returned, cut to a few hundred characters; a try that raised without its
  code), instead of the whole conversation with every failed try in it.
- ``check_results``: a cell that ended well but whose result looks wrong
  (:mod:`.suspicious`) is shown to the model with what looks wrong, within ``max_attempts``; the
  model may fix it, or keep it (the same code, or no code), though it is offered to keep it only
  when the result may be right as it is (a NaN may be; an answer in the wrong format never is:
  :func:`~.suspicious.may_be_right`). A final answer that looks wrong gets one more look, while
  a step is left, and is asked for code: so does one about a data file the request names when
  none of the model's cells ran (answered from the file's preview or the look at the data,
  never computed).

One ask after each failure costs no attempt: a fix that could not run (the failed code again,
or no code), or a result kept that cannot be right as written, is asked for once more with the
same prompt at the next fix's temperature (:meth:`Retrying._ask_once_more`), wherever another
reply can differ; the next such reply uses up an attempt (a result kept a second time too:
:meth:`Retrying._kept_wrong`). An answer written outside the request's format is told the
request's own answer names (:func:`~.suspicious.format_reminder`).

All three are on by default: on the bench's dev set they rescued the most questions and all
but ended repeated fixes (README, "What the loop does when a cell fails"). Each is written once
here, for every workspace; :meth:`AgentRun._run_until_fixed
<jupyter_ci.agent.loop.AgentRun._run_until_fixed>` uses them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..options import temperature_schedule
from ..vocabulary import constant
from .digest import head_tail
from .extract import fenced
from .fix_context import same_code
from .inspect_first import named_files
from .own_fix import renames_columns, respelled
from .prompts import render
from .review import Reviewing
from .run_base import NO_STREAM
from .suspicious import (
    Concern,
    answer_concerns,
    describe_concerns,
    format_reminder,
    output_concerns,
    unanswered,
)
from .workspace import Execution

#: Characters of a try's code, and of what it returned, in a fresh fix's account.
ACCOUNT_CODE_CHARS = 1500
ACCOUNT_RESULT_CHARS = 600
#: How a fresh fix's account tells a fix that repeated the failed code.
REPEATED = "not run, it would fail the same way"
#: How it tells a fix that kept the code that failed unchanged up to the line that raised.
KEPT_LINE = "Not run: it keeps the line that raised the error unchanged, so it would fail there"
#: How it tells a fix whose reply had no code.
NO_CODE = "no code in the reply, nothing was run"
#: How it tells a result kept that cannot be right as written.
KEPT_WRONG = "kept unchanged, though its result cannot be right as written"
#: The notice when the model keeps such a result (no code, or the same code, in reply to a look
#: again that did not offer to keep it): asked once more, then it uses up an attempt.
KEPT_WRONG_NOTICE = "The model kept a result that cannot be right as written"
#: The notice when a result looks wrong and the model is asked to look again (the bench counts).
LOOK_AGAIN_NOTICE = "The result looks wrong"
#: The reason of the fixing state then (the panel's step says a result, not an error).
LOOKS_WRONG: str = constant("LooksWrongReason")
#: The notice when a model's fix is held to a spelling jupyter-ci corrected before in the cell.
RESPELLED_NOTICE = "Kept jupyter-ci's spelling in the model's fix"
#: What a prompt adds when the model may keep a result that looks wrong (it may be right).
KEEP_UNCHANGED = " If the last try's result is right as it is, reply with its code unchanged."


@dataclass(frozen=True)
class Tried:
    """One try of a cell that did not work: its code, how it ended, what it returned (no code:
    nothing was run, the ending says why: ``REPEATED``, ``NO_CODE`` or ``KEPT_WRONG``; a
    ``REPEATED`` one repeated the code of try ``again``)."""

    code: str
    ending: str
    returned: str
    again: int = 0
    #: Whether the account shows the code (:func:`account`).
    shown: bool = False


def repeated_try(code: str, tries: Sequence[Tried]) -> int | None:
    """The number (from 1) of the try in ``tries`` whose code ``code`` is again, if any: it
    failed, or its result looked wrong, and in the same kernel it would do so again."""
    for number, tried in enumerate(tries, 1):
        if tried.code and same_code(code, tried.code):
            return number
    return None


def account(tries: Sequence[Tried]) -> str:
    """The tries as a fresh fix tells them: how each one ended and what it returned, cut short;
    the code only of a try that is ``shown``. A try that raised is told by its error, whose
    traceback names the line that raised, not by its code: shown the code that failed, a small
    model wrote it back unchanged (the dev set's 247 and 56, at temperatures 0.6 and 0.9 with
    other seeds), so the fix is written from the request, as the prompt asks. A try whose result
    looked wrong is shown: its outputs mean nothing without it, and the model may keep it."""
    parts = []
    for number, tried in enumerate(tries, 1):
        if not tried.code:  # nothing ran: an earlier try's code again, or no code
            again = f"the code of try {tried.again} again, unchanged ({tried.ending})"
            parts.append(f"Try {number}: {again if tried.again else tried.ending}")
            continue
        returned, _ = head_tail(tried.returned.strip(), ACCOUNT_RESULT_CHARS)
        if not tried.shown:
            parts.append(f"Try {number}: {tried.ending}:\n{returned}")
            continue
        code, _ = head_tail(tried.code.strip(), ACCOUNT_CODE_CHARS)
        parts.append(f"Try {number}:\n{fenced(code)}\n{tried.ending}:\n{returned}")
    return "\n\n".join(parts)


class Retrying(Reviewing):
    """The levers of asking again, for :class:`~jupyter_ci.agent.loop.AgentRun`."""

    def _fix_temperature(self, attempt: int) -> float | None:
        """The temperature of the fix written after attempt ``attempt`` (None: the model's;
        always so without a ``temperature`` set, see ``fix_temperatures``)."""
        schedule = temperature_schedule(self.settings.fix_temperatures)
        if not schedule or self.settings.temperature < 0:
            return None
        return schedule[min(attempt, len(schedule)) - 1]

    def _may_ask_once_more(self, attempt: int) -> bool:
        """Whether a reply after attempt ``attempt`` that cannot be used (a fix that repeats
        the failed code or has none; a result kept that cannot be right as written) is asked for
        once more without using an attempt: only where another reply to the same prompt may
        differ, that is unless the next fix's temperature (its own, else ``temperature``) is 0
        (a provider's default temperature may differ)."""
        if self.settings.temperature < 0:
            return True
        warmer = self._fix_temperature(attempt + 1)
        return (self.settings.temperature if warmer is None else warmer) > 0

    async def _ask_once_more(self, messages: list[dict[str, Any]], attempt: int) -> str | None:
        """Ask again instead of the reply that cannot be used (the last of ``messages``): the
        same prompt, at the next fix's temperature (:meth:`_may_ask_once_more`); returns the new
        reply's code, which replaces that reply in ``messages``."""
        messages.pop()
        reply, code, _ = await self._generate(
            messages, stream_after=NO_STREAM, temperature=self._fix_temperature(attempt + 1)
        )
        messages.append({"role": "assistant", "content": reply.text or code or ""})
        return self._spelled(code)

    async def _kept_wrong(
        self,
        messages: list[dict[str, Any]],
        base: Sequence[dict[str, Any]],
        tries: list[Tried],
        concerns: Sequence[Concern],
        attempt: int,
    ) -> str | None:
        """The model kept a result that cannot be right as written, though asked once more (or
        where another reply could not differ): that uses up attempt ``attempt``, as a fix that
        repeats the failed code does, and it is asked again, told so; returns the new code."""
        self.emit(
            "message",
            role="notice",
            text=f"{KEPT_WRONG_NOTICE} (attempt {attempt}/{self.settings.max_attempts}).",
        )
        tries.append(Tried("", KEPT_WRONG, ""))
        prompt = render(
            "kept_wrong",
            attempt=attempt,
            max_attempts=self.settings.max_attempts,
            concerns=self._describe(concerns),
        )
        told = {"role": "user", "content": prompt}
        return await self._ask_again(messages, base, tries, told, attempt)

    def _spelled(self, code: str | None) -> str | None:
        """A model's fix held to the column spellings jupyter-ci's own fixes corrected in this
        cell (:attr:`spellings`): a small model's next fix often writes the name as it first
        did, undoing the own fix and failing the same way. Not a fix that renames the columns
        (strips them, reads them stripped): the names it writes may be right after that."""
        if not code or not self.spellings or renames_columns(code):
            return code  # a fix that renames the columns spells them its own way
        again = respelled(code, self.spellings)
        if again is None:
            return code
        self.emit("message", role="notice", text=f"{RESPELLED_NOTICE}: {again.said}.")
        return again.code

    def _concerns(self, execution: Execution, attempt: int) -> list[Concern]:
        """What looks wrong in a cell that ended well ([] when ``check_results`` is off, or no
        attempt is left to fix it)."""
        if not self.settings.check_results or attempt >= self.settings.max_attempts:
            return []
        return output_concerns(execution.outputs, self.request.prompt)

    async def _answer_concerns(
        self, text: str, *, ran: bool, outputs: Sequence[str]
    ) -> list[Concern]:
        """What looks wrong in a final answer ([] when ``check_results`` is off); ``ran``:
        whether a cell of the run ran (an answer about a data file no cell read is one);
        ``outputs``: the texts its cells printed (none in the request's format is one)."""
        if not self.settings.check_results:
            return []
        found = answer_concerns(text, self.request.prompt)
        missing = unanswered([text, *outputs], self.request.prompt)
        if missing is not None:
            found.append(missing)
        if not ran:
            await self.files.start()
            named = named_files(self.request.prompt, self.files.listed)
            if named:
                found.append(Concern("unrun", named[0]))
        return found

    def _describe(self, concerns: Sequence[Concern]) -> str:
        """The concerns for the model: their evidence only when outputs may be shared; then the
        request's answer names when an answer is not written in its format."""
        described = describe_concerns(concerns, evidence=self.settings.share_outputs)
        reminder = format_reminder(concerns, self.request.prompt)
        return f"{described}\n{reminder}" if reminder else described

    def _look_again_notice(self, concerns: Sequence[Concern], attempt: int | None) -> None:
        """Say that a result looks wrong and the model is asked to look again."""
        what = "; ".join(dict.fromkeys(c.describe(evidence=False) for c in concerns))
        where = f" (attempt {attempt}/{self.settings.max_attempts})" if attempt else ""
        self.emit(
            "message",
            role="notice",
            text=f"{LOOK_AGAIN_NOTICE}: {what}. The model is asked to look again{where}.",
        )

    async def _ask_again(
        self,
        messages: list[dict[str, Any]],
        base: Sequence[dict[str, Any]],
        tries: Sequence[Tried],
        prompt: dict[str, Any],
        attempt: int,
        *,
        context: str = "",
        keep: bool = False,
    ) -> str | None:
        """Ask for the cell's next version after attempt ``attempt`` and return its code (None
        when the reply has none). ``prompt`` is the message that tells the latest try; with
        ``fresh_fixes`` the conversation starts again from ``base`` with the account of
        ``tries`` instead (``context``: what is there, read from the kernel; ``keep``: the
        model may keep the last try's result)."""
        if self.settings.fresh_fixes:
            fresh = render(
                "fix_fresh",
                tries=len(tries),
                max_attempts=self.settings.max_attempts,
                account=self.conversation.wrap(account(tries)),
                context=context,
                keep=KEEP_UNCHANGED if keep else "",
            )
            messages[:] = [*base, {"role": "user", "content": fresh}]
        else:
            messages.append(prompt)
        reply, code, _ = await self._generate(
            messages, stream_after=NO_STREAM, temperature=self._fix_temperature(attempt)
        )
        messages.append({"role": "assistant", "content": reply.text or code or ""})
        return self._spelled(code)
