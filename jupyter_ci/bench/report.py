"""Summary figures of a bench run, and the report printed at its end.

Figures over the task records: accuracy (correct / n), the same for the first attempt alone
(see :mod:`.runner`), the tasks the loop rescued (first attempt wrong, final answer right) and
lost (first attempt right, final answer wrong), the fixes that repeated the failed code and
those without code, the tasks whose final answer looked suspicious (NaN, inf, empty, a
placeholder: see :mod:`jupyter_ci.agent.suspicious`), attempts per task (mean), generated cells
per task (mean), prompt and completion tokens (median and total), wall seconds per task (median,
p90 and total), failures by category, and accuracy by level. A paired arm's summary also says
how many tasks were re-run and carried over (see :mod:`.paired`). Medians are
:func:`statistics.median`; p90 is the nearest-rank percentile (the smallest value with at least
90% of the values at or below it).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from .runner import CATEGORIES


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of ``values`` (0 for none)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return float(ordered[rank - 1])


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else 0.0


def summarize(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The summary figures of ``records`` (one per task)."""
    n = len(records)
    correct = sum(1 for record in records if record["correct"])
    prompt = [int(record["prompt_tokens"]) for record in records]
    completion = [int(record["completion_tokens"]) for record in records]
    seconds = [float(record["seconds"]) for record in records]
    failures = dict.fromkeys(CATEGORIES, 0)
    for record in records:
        category = record.get("category")
        if category:
            failures[category] = failures.get(category, 0) + 1
    levels: dict[str, dict[str, int]] = {}
    for record in records:
        level = levels.setdefault(str(record.get("level") or "-"), {"n": 0, "correct": 0})
        level["n"] += 1
        level["correct"] += int(bool(record["correct"]))
    first = sum(1 for record in records if _first_correct(record))
    # Records from before the first attempt's record have none: neither rescued nor lost.
    known = [r for r in records if r.get("first_attempt")]
    rescued = sum(1 for r in known if r["correct"] and not _first_correct(r))
    lost = sum(1 for r in known if _first_correct(r) and not r["correct"])
    # Records from before the field have none (older results.jsonl resumed or carried over).
    odd = sum(1 for r in records if (r.get("suspicious") or {}).get("answer"))
    return {
        "n": n,
        "correct": correct,
        "accuracy": round(correct / n, 4) if n else 0.0,
        "first_attempt_correct": first,
        "first_attempt_accuracy": round(first / n, 4) if n else 0.0,
        "rescued": rescued,
        "lost": lost,
        "suspicious_answers": odd,
        "attempts_mean": round(sum(r["attempts"] for r in records) / n, 3) if n else 0.0,
        "cells_mean": round(sum(r["cells"] for r in records) / n, 3) if n else 0.0,
        # Records from before the field have none (older results.jsonl resumed).
        "repeated_fixes": sum(int(record.get("repeated_fixes") or 0) for record in records),
        "repeated_earlier": sum(int(r.get("repeated_earlier") or 0) for r in records),
        "fixes_without_code": sum(int(r.get("fixes_without_code") or 0) for r in records),
        "kept_failed_line": sum(int(r.get("kept_failed_line") or 0) for r in records),
        "asked_once_more": sum(int(r.get("asked_once_more") or 0) for r in records),
        "own_fixes": sum(int(r.get("own_fixes") or 0) for r in records),
        "looked_again": sum(int(record.get("looked_again") or 0) for record in records),
        "prompt_tokens": {"median": _median(prompt), "total": sum(prompt)},
        "completion_tokens": {"median": _median(completion), "total": sum(completion)},
        "tokens_estimated": any(record.get("tokens_estimated") for record in records),
        "seconds": {
            "median": round(_median(seconds), 3),
            "p90": round(percentile(seconds, 0.9), 3),
            "total": round(sum(seconds), 3),
        },
        "failures": failures,
        "by_level": levels,
    }


def _first_correct(record: dict[str, Any]) -> bool:
    return bool((record.get("first_attempt") or {}).get("correct"))


def render_report(summary: dict[str, Any]) -> str:
    """The report text printed at the end of a bench run."""
    n = summary["n"]
    percent = f" ({100 * summary['accuracy']:.1f}%)" if n else ""
    prompt, completion, seconds = (
        summary["prompt_tokens"],
        summary["completion_tokens"],
        summary["seconds"],
    )
    estimated = " (estimated)" if summary.get("tokens_estimated") else ""
    failures = ", ".join(f"{name} {count}" for name, count in summary["failures"].items())
    levels = ", ".join(
        f"{level} {figures['correct']}/{figures['n']}"
        for level, figures in sorted(summary["by_level"].items())
    )
    lines = [
        f"accuracy: {summary['correct']}/{n} correct{percent}",
        f"first attempt only (a one-shot estimate): {summary['first_attempt_correct']}/{n} correct",
        f"rescued by the loop (first attempt wrong, final right): {summary.get('rescued', 0)};"
        f" lost (first attempt right, final wrong): {summary.get('lost', 0)}",
        "suspicious final answers (NaN, inf, empty, a placeholder):"
        f" {summary.get('suspicious_answers', 0)}",
        f"attempts per task: mean {summary['attempts_mean']:.2f}"
        f" (cells per task: mean {summary['cells_mean']:.2f});"
        f" fixes that repeated the failed code (not run): {summary.get('repeated_fixes', 0)}"
        f" (an earlier try's: {summary.get('repeated_earlier', 0)}),"
        f" without code: {summary.get('fixes_without_code', 0)},"
        f" that kept the line that failed (not run): {summary.get('kept_failed_line', 0)}"
        f" (asked once more, without an attempt: {summary.get('asked_once_more', 0)});"
        f" fixes jupyter-ci wrote itself: {summary.get('own_fixes', 0)};"
        f" results that looked wrong, looked at again: {summary.get('looked_again', 0)}",
        f"prompt tokens{estimated}: median {prompt['median']:,.0f}, total {prompt['total']:,}",
        f"completion tokens{estimated}: median {completion['median']:,.0f},"
        f" total {completion['total']:,}",
        f"wall time per task: median {seconds['median']:.1f} s, p90 {seconds['p90']:.1f} s"
        f" (total {seconds['total']:.1f} s)",
        f"failures: {failures}",
    ]
    if levels:
        lines.append(f"by level: {levels}")
    paired = summary.get("paired")
    if paired:
        lines.append(
            f"paired with {paired['with']}: {paired['rerun']} tasks re-run,"
            f" {paired['carried']} carried over ({paired['rule']})"
        )
        differ = paired.get("first_tries_differ")
        if differ:
            lines.append(
                f"paired arm warning: the first try of {differ} re-run task(s) differs from"
                " OUT's (the model varied at the same prompt): their difference is not only"
                " the lever's"
            )
        lines.extend(f"paired arm warning: {warning}" for warning in paired["warnings"])
    return "\n".join(lines)
