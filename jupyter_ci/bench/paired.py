"""Paired arms: measure a lever by re-running only the tasks it can change.

A lever that acts only after a cell failed or its result looked suspicious (the options marked
``after_failure`` in :mod:`jupyter_ci.options`: ``max_attempts``, the fix temperatures, fresh
fixes, checking results) changes nothing in a task where no cell failed and nothing looked
suspicious: with a deterministic model (temperature 0) that task runs exactly as before. So a
paired arm (``jupyter ci bench ... --paired-with OUT``) takes the records of those tasks from the
earlier run ``OUT`` unchanged and re-runs only the others, then reports whole-set figures.

The rule (:func:`rerun_reason`): a task is re-run when in ``OUT``

- it has no record, or its record has no tries (a bench older than the tries' record);
- the run ended for a reason outside the loop (``model_error``, ``kernel_error``,
  ``kernel_died``, ``internal_error``, ``other``): what it would have done is not known;
- any try of a cell did not end ``ok`` (an error, a timeout...): the loop asked for a fix;
- no cell ran (a final answer about the data that no cell computed looks suspicious);
- its final answer (the answers read from it, and its text), or the final outputs of a
  generated cell, look suspicious (:mod:`jupyter_ci.agent.suspicious`: NaN, inf, an empty
  frame, an error printed and swallowed, an answer that cannot be right as written or is not
  written in the request's format).

Every other task is carried over. This is narrower than "the first attempt was not correct":
a first attempt that was wrong while no cell failed and nothing looked suspicious runs the same
with any of these levers, so running it again would only cost time.

A paired arm is valid only when everything that writes a first attempt is the same as in
``OUT`` (:func:`pairing_problems`): the model, the temperature, every option not marked
``after_failure`` (``seed`` too, unless both runs are at temperature 0, whose first attempts
are greedy; an inspecting first cell, ``inspect_data``, changes the first attempt: measure
it with a full arm), the tasks, and the prompts the first attempts are written from (their
hashes are in ``bench.json``). A difference there is refused; what cannot be checked (a run
without those hashes, another jupyter-ci version) is warned about, in the report too.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .._version import __version__
from ..agent.prompts import template
from ..agent.suspicious import answer_concerns, output_concerns
from ..options import OPTIONS
from .runner import TaskRunner, build_prompt, generated_outputs, read_results, request_text
from .tasks import Task

#: The rule, as the report and ``summary.json`` say it.
RULE = (
    "re-run when in OUT a cell failed, no cell ran, the answer or an output looked suspicious, "
    "or the run ended outside the loop (model or kernel error); the others are carried over"
)

#: Run end reasons that say nothing of what the loop would have done.
OUTSIDE_REASONS = frozenset(
    {"model_error", "kernel_error", "kernel_died", "internal_error", "other"}
)

#: The prompts a first attempt is written from (the bench's request, and the loop's prompts
#: before any failure: the system prompt, the request, what follows a cell that ran).
FIRST_ATTEMPT_PROMPTS = ("system", "request", "cell_succeeded")


def prompt_hashes() -> dict[str, str]:
    """SHA-256 (first 16 hex digits) of each prompt that writes first attempts."""
    texts = {name: template(name) for name in FIRST_ATTEMPT_PROMPTS}
    texts["bench"] = request_text()
    return {
        name: hashlib.sha256(text.encode("utf-8")).hexdigest()[:16] for name, text in texts.items()
    }


def fingerprint() -> dict[str, Any]:
    """What ``bench.json`` records for later paired arms: the version and the prompts' hashes."""
    return {"version": __version__, "prompts": prompt_hashes()}


def rerun_reason(record: Mapping[str, Any] | None, base: Path, request: str = "") -> str | None:
    """Why a task must run again in a paired arm (None: carry its record over); see the rule.

    ``base`` is OUT (where the record's notebook is), ``request`` the task's request (its
    answer format's placeholders)."""
    if record is None:
        return "no record in OUT"
    reason = str(record.get("reason") or "")
    if reason in OUTSIDE_REASONS:
        return f"the run ended with {reason}"
    tries = record.get("tries")
    if not isinstance(tries, list):
        return "its record in OUT has no tries"
    failed = [t for t in tries if isinstance(t, Mapping) and t.get("status") != "ok"]
    if failed:
        return f"a cell ended {failed[0].get('status')}"
    if not tries:
        return "no cell ran"
    answers = record.get("answers") or {}
    line = " ".join(f"@{name}[{value}]" for name, value in answers.items())
    notebook = record.get("notebook")
    outputs = generated_outputs(base / str(notebook)) if notebook else []
    concerns = answer_concerns(line, request) + answer_concerns(
        str(record.get("answer") or ""), request
    )
    concerns += [c for cell in outputs for c in output_concerns(cell, request)]
    if concerns:
        return "suspicious: " + concerns[0].describe()
    return None


def _differences(base: Mapping[str, Any], here: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """Options whose values differ between two ``bench.json`` settings (a setting an older run
    does not record had its default there: the option did not exist yet)."""
    found = []
    for option in OPTIONS:
        if option.name not in here:
            continue  # not public: never recorded
        before = base.get(option.name, option.default)
        if before != here[option.name]:
            found.append((option.name, before, here[option.name]))
    return found


def pairing_problems(
    base_config: Mapping[str, Any], config: Mapping[str, Any]
) -> tuple[list[str], list[str]]:
    """Why a paired arm with ``config`` against a run with ``base_config`` (their ``bench.json``)
    would not be valid (errors), and what could not be checked (warnings)."""
    errors: list[str] = []
    warnings: list[str] = []
    after_failure = {option.name for option in OPTIONS if option.after_failure}
    base_settings = base_config.get("settings") or {}
    if base_settings.get("temperature") == 0 == config["settings"].get("temperature"):
        after_failure.add("seed")  # first attempts at temperature 0 are greedy: a seed is idle
    for name, before, now in _differences(base_settings, config["settings"]):
        if name not in after_failure:
            errors.append(
                f"--{name.replace('_', '-')} is {now!r} here but {before!r} in OUT: it can change "
                "first attempts, so only a full arm measures it"
            )
    if base_config.get("tasks") != config.get("tasks"):
        warnings.append(
            f"OUT's tasks came from {base_config.get('tasks')}, these from {config.get('tasks')}"
        )
    base_print = base_config.get("fingerprint") or {}
    prompts = base_print.get("prompts")
    if not isinstance(prompts, Mapping):
        warnings.append(
            "OUT does not record the hashes of its prompts: the paired arm is valid only if the "
            "prompts that write first attempts (system, request, cell_succeeded, the bench's "
            "request) are the same"
        )
    else:
        changed = [
            name
            for name, digest in config["fingerprint"]["prompts"].items()
            if prompts.get(name) != digest
        ]
        if changed:
            errors.append(
                "the prompts that write first attempts changed since OUT ("
                + ", ".join(changed)
                + ")"
            )
    version = base_print.get("version")
    if version is not None and version != config["fingerprint"]["version"]:
        warnings.append(f"OUT ran jupyter-ci {version}, this is {config['fingerprint']['version']}")
    return errors, warnings


class Pairing:
    """A paired arm against the run in ``base``: which tasks run, which records carry over."""

    def __init__(self, base: Path, tasks: Sequence[Task]) -> None:
        self.base = base
        records = read_results(base / "results.jsonl")
        #: The first try's code in OUT of each task that runs again (None: no cell ran there).
        self.first_tries: dict[str, str | None] = {}
        self.reasons: dict[str, str] = {}
        self.carried: dict[str, dict[str, Any]] = {}
        for task in tasks:
            record = records.get(task.key)
            reason = rerun_reason(record, base, build_prompt(task))
            if reason is None and record is not None:
                self.carried[task.key] = {**record, "paired": "carried"}
            else:
                self.reasons[task.key] = reason or "no record in OUT"
                self.first_tries[task.key] = first_try(record)

    @classmethod
    def load_config(cls, base: Path) -> dict[str, Any]:
        """OUT's ``bench.json``; ``ValueError`` saying what is missing when it is no bench run."""
        if not (base / "results.jsonl").is_file() or not (base / "bench.json").is_file():
            raise ValueError(
                f"{base} is not a bench run (it needs results.jsonl and bench.json): give "
                "--paired-with the --out directory of an earlier bench"
            )
        try:
            config = json.loads((base / "bench.json").read_text(encoding="utf-8"))
        except ValueError as err:
            raise ValueError(f"{base / 'bench.json'} is not valid JSON: {err}") from None
        if not isinstance(config, dict):
            raise ValueError(f"{base / 'bench.json'} does not hold a bench's configuration")
        return config

    def carry_notebooks(self, out_dir: Path) -> None:
        """Copy the carried tasks' notebooks from OUT, so the arm's directory is whole."""
        for record in self.carried.values():
            notebook = record.get("notebook")
            source = self.base / str(notebook) if notebook else None
            if source is not None and source.is_file():
                target = out_dir / str(notebook)
                target.parent.mkdir(parents=True, exist_ok=True)
                if not target.exists():
                    shutil.copy2(source, target)

    def runner(self, run: TaskRunner) -> TaskRunner:
        """``run``, with each record marked as re-run and why."""

        async def rerun(task: Task, settings: Any, out_dir: Path) -> dict[str, Any]:
            record = await run(task, settings, out_dir)
            before, now = self.first_tries.get(task.key), first_try(record)
            return {
                **record,
                "paired": "rerun",
                "rerun_reason": self.reasons.get(task.key, ""),
                # With the model deterministic and the lever acting after a failure only, the
                # first try is OUT's; where it is not, the task's difference is not the lever's.
                "first_try_as_in_out": None if before is None or now is None else before == now,
            }

        return rerun

    def summary(
        self, warnings: Sequence[str], records: Sequence[Mapping[str, Any]] = ()
    ) -> dict[str, Any]:
        """The ``paired`` entry of ``summary.json`` (with the arm's ``records``: how many of the
        re-run tasks' first tries differ from OUT's)."""
        return {
            "with": str(self.base),
            "rule": RULE,
            "rerun": len(self.reasons),
            "carried": len(self.carried),
            "first_tries_differ": sum(1 for r in records if r.get("first_try_as_in_out") is False),
            "warnings": list(warnings),
        }


def first_try(record: Mapping[str, Any] | None) -> str | None:
    """The code of a record's first try, stripped (None: no cell ran, or no record)."""
    tries = (record or {}).get("tries")
    if not isinstance(tries, list) or not tries or not isinstance(tries[0], Mapping):
        return None
    return str(tries[0].get("code") or "").strip()
