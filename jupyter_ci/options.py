"""The one table of jupyter-ci's options.

Every way of setting an option reads this table: the server's traits (``c.JupyterCI.max_attempts``),
the magic's options and the CLI's flags (``--max-attempts``), the JupyterLab settings registry,
and the function that merges them (:mod:`jupyter_ci.settings`). An option added here is added
everywhere.

This module imports nothing beyond the standard library: ``%load_ext jupyter_ci`` reads it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MODES = ("auto", "review", "insert")
TOOL_CALLING = ("auto", "on", "off")
VISION = ("auto", "on", "off")


@dataclass(frozen=True)
class Option:
    """One configurable option: its name, type, default, help text, and where it may be set."""

    name: str
    kind: type  # str, int, float or bool
    default: Any
    help: str
    choices: tuple[str, ...] | None = None
    minimum: float | None = None
    # False for options only the server's own configuration may set (endpoints, key names, paths).
    per_request: bool = True
    # A short flag for the magic and the CLI, e.g. "-m".
    short: str | None = None
    # Whether the value may be named in a log line or sent to the browser.
    public: bool = True
    # Whether the option acts only once a cell failed or its result looked suspicious: first
    # attempts are the same whatever its value (the bench's paired arms may vary it).
    after_failure: bool = False
    # A further check of a converted value: a sentence saying what is wrong, or None.
    check: Callable[[Any], str | None] | None = None

    @property
    def flag(self) -> str:
        """The long command-line flag of this option (``max_attempts`` → ``--max-attempts``)."""
        return "--" + self.name.replace("_", "-")

    @property
    def env_var(self) -> str:
        """The environment variable that supplies this option's default (``JUPYTER_CI_MODEL``)."""
        return "JUPYTER_CI_" + self.name.upper()

    def coerce(self, value: Any) -> Any:
        """Convert ``value`` (a string from a command line or any JSON value) to this option's type.

        Raises ``ValueError`` with a sentence that names the option and what it accepts.
        """
        converter: Callable[[Any], Any] = _CONVERTERS[self.kind]
        try:
            converted = converter(value)
        except (TypeError, ValueError):
            raise ValueError(
                f"{self.flag} expects {_KIND_NAMES[self.kind]}, got {value!r}"
            ) from None
        if self.choices is not None and converted not in self.choices:
            raise ValueError(f"{self.flag} must be one of {', '.join(self.choices)}; got {value!r}")
        if self.minimum is not None and converted < self.minimum:
            raise ValueError(f"{self.flag} must be at least {self.minimum:g}; got {value!r}")
        problem = self.check(converted) if self.check is not None else None
        if problem is not None:
            raise ValueError(f"{self.flag} {problem}; got {value!r}")
        return converted


def temperature_schedule(text: str) -> tuple[float, ...]:
    """The temperatures of ``fix_temperatures`` ("0.6, 0.9" → (0.6, 0.9)); () when empty.

    Raises ``ValueError`` when a part is not a number from 0 to 2.
    """
    parts = [part.strip() for part in text.split(",")] if text.strip() else []
    values = tuple(float(part) for part in parts)
    if any(not 0 <= value <= 2 for value in values):
        raise ValueError(text)
    return values


def _check_schedule(value: Any) -> str | None:
    try:
        temperature_schedule(value)
    except ValueError:
        return "expects temperatures from 0 to 2, separated by commas (0.6,0.9)"
    return None


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in {"1", "true", "yes", "on"}:
        return True
    if isinstance(value, str) and value.strip().lower() in {"0", "false", "no", "off"}:
        return False
    raise ValueError(value)


def _to_int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, float) and not value.is_integer():
        raise ValueError(value)
    return int(value)


def _to_float(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError(value)
    number = float(value)
    if not math.isfinite(number):
        # nan and inf parse as floats, and nan passes any "at least" check.
        raise ValueError(value)
    return number


def _to_str(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(value)
    return value.strip()


_CONVERTERS: dict[type, Callable[[Any], Any]] = {
    bool: _to_bool,
    int: _to_int,
    float: _to_float,
    str: _to_str,
}
_KIND_NAMES = {
    bool: "true or false",
    int: "a whole number",
    float: "a finite number",
    str: "a string",
}


OPTIONS: tuple[Option, ...] = (
    Option(
        "model",
        str,
        "",
        "The model, as a litellm model string: openai/gpt-4o-mini, anthropic/claude-sonnet-4-5, "
        "ollama/qwen2.5-coder, or openai/NAME with api_base for any OpenAI-compatible server. "
        "Empty means not configured.",
        short="-m",
    ),
    Option(
        "models",
        str,
        "",
        "Further models users may pick (comma-separated litellm model strings), besides `model`.",
        per_request=False,
    ),
    Option(
        "api_base",
        str,
        "",
        "Base URL of an OpenAI-compatible endpoint (vLLM, llama.cpp server, Ollama's /v1, a "
        "LiteLLM proxy). Empty means the provider's own endpoint. A request or a kernel cannot "
        "point the server's key at an endpoint its configuration did not name.",
        public=False,
    ),
    Option(
        "api_key_env",
        str,
        "JUPYTER_CI_API_KEY",
        "Name of the environment variable holding the key for `model`. When it is unset, litellm "
        "falls back to the provider's usual variable (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...). "
        "This variable is removed from the environment of kernels the server starts.",
        per_request=False,
    ),
    Option(
        "mode",
        str,
        "auto",
        "auto: insert generated cells and run them; review: insert, wait for your approval, then "
        "run; insert: insert only, never run.",
        choices=MODES,
    ),
    Option(
        "max_attempts",
        int,
        3,
        "Tries of one cell, the first included (1 = run once, never fix).",
        minimum=1,
        after_failure=True,
    ),
    Option(
        "max_steps",
        int,
        5,
        "Cells one request may generate (fixes are attempts, not steps).",
        minimum=1,
    ),
    Option(
        "timeout",
        float,
        120.0,
        "Seconds one generated cell may run before the kernel is interrupted (0 = no limit). "
        "Counted from when the kernel starts the cell, not from when it was queued.",
        minimum=0,
    ),
    Option(
        "context_tokens",
        int,
        8000,
        "Most tokens one request to the model may carry as its prompt (notebook, variables, "
        "request), nearest cells first.",
        minimum=256,
    ),
    Option(
        "max_tokens_per_run",
        int,
        200_000,
        "Most tokens (prompt + completion, summed over all model calls) one run may use; the run "
        "stops cleanly at the cap (0 = no cap).",
        minimum=0,
    ),
    Option(
        "max_cost_per_run",
        float,
        1.0,
        "Most money (USD) one run may spend; the run stops cleanly at the cap (0 = no cap). When "
        "the model's price is unknown, this cap cannot be enforced and the token cap applies.",
        minimum=0,
    ),
    Option(
        "temperature",
        float,
        -1.0,
        "Sampling temperature sent to the model (0 = as deterministic as the model allows); "
        "negative means the provider's default.",
        minimum=-1,
    ),
    Option(
        "seed",
        int,
        -1,
        "Sampling seed of a run's first request to the model, so that a run gets the same replies "
        "again where the provider honours it (llama.cpp, Ollama; OpenAI on a best-effort "
        "basis); each later request of the run is sent the next number, so that a prompt asked "
        "again gets another sample. Negative sends none. Providers that take no seed are sent "
        "none.",
        minimum=-1,
    ),
    Option(
        "fix_temperatures",
        str,
        "0.6,0.9",
        "Sampling temperatures of the fixes of a failed cell, comma-separated: the first fix, "
        "the second, ... (the last one repeats). A reply at temperature 0 to nearly the same "
        "prompt is nearly the same code; a warmer one tries something else. Used only when "
        "`temperature` is set: at a provider's default temperature replies vary already, and "
        "some models (reasoning ones) accept no other. Empty: fixes use `temperature`.",
        after_failure=True,
        check=_check_schedule,
    ),
    Option(
        "fresh_fixes",
        bool,
        True,
        "Ask for each fix afresh: the request with a short account of the failed tries (how "
        "each ended: a try that raised by its error and the line that raised, not its code), "
        "instead of the whole conversation with every failed try.",
        after_failure=True,
    ),
    Option(
        "check_results",
        bool,
        True,
        "Treat a result that looks wrong although nothing raised (NaN, inf, an empty data "
        "frame, an error printed by an except clause, a change pandas says did nothing, an "
        "answer the request's format cannot hold or that leaves items out as '...') as a "
        "failure: the model is told what looks wrong and may fix the cell, within "
        "max_attempts; a final answer that looks wrong (or none in the request's format) gets "
        "one more look.",
        after_failure=True,
    ),
    Option(
        "own_fixes",
        bool,
        True,
        "Let jupyter-ci fix a failed cell itself, without asking the model, where the kernel "
        "leaves one fix that keeps what the cell means: a column's name written without the "
        "spaces the frame's name has, or the missing one in another case or punctuation, or "
        "an integer looked up in a Series whose index holds labels, read as a position "
        "(s.iloc[0] for s[0], as before pandas 3) (a KeyError); a path close to the one data "
        "file the request names, written as the request names it (a FileNotFoundError); or a "
        "missing import of pd, np, plt, sns or stats (a NameError). And a cell that ran but "
        "printed its answer another way than the request's format (@Nigeria[2010] for "
        "@country[...] @year[...]), when the cell sets a variable of each of the format's "
        "names (or of all but one, and the line printed one other value): printed with those "
        "names; and a cell that ran while pandas warned that an in-place change of a column did "
        "nothing (df[col].fillna(v, inplace=True) under pandas 3): the change assigned back, "
        "df[col] = df[col].fillna(v). The fix uses no attempt "
        "(the attempts count the model's tries) and is said in a notice.",
        after_failure=True,
    ),
    Option(
        "inspect_data",
        bool,
        False,
        "When the request names a data file in the kernel's folder (or a data frame whose rows "
        "no cell shows), first add and run a labelled cell that loads it and shows its shape, "
        "columns and types, and a few rows (no rows with share_outputs off); it is one of "
        "max_steps. Auto mode only.",
    ),
    Option(
        "tool_calling",
        str,
        "auto",
        "How the model hands over code. on: through a run_python tool call (for providers that "
        "support tools); off: fenced code blocks; auto: fenced code blocks, which every model "
        "and local server understands.",
        choices=TOOL_CALLING,
    ),
    Option(
        "instructions",
        str,
        "",
        "Instructions for the model in every request (the project's conventions, libraries to "
        "use, ...), part of its system prompt, with the AGENTS.md nearest the notebook (in its "
        "folder or a parent, up to the server's root). At most 4,000 characters in all.",
        public=False,
    ),
    Option(
        "vision",
        str,
        "auto",
        "Whether the model sees images. on: plots and other images go to it as images; off: "
        "a matplotlib figure is described to it in words (title, axes, what is drawn, legend), "
        "read silently from the kernel; auto: on for the models litellm's table says see "
        "images, off for the others (any model it does not know, such as a local server's).",
        choices=VISION,
    ),
    Option(
        "share_outputs",
        bool,
        True,
        "Send cell outputs and data samples (printed values, results, data frame rows, "
        "variable values, an attached file's rows) to the model. Off: the model still sees code, "
        "variable names, types and shapes, column names, and the errors of the cells it runs, "
        "but no output values.",
    ),
    Option(
        "allow_pip_install",
        bool,
        False,
        "Run a proposed `%pip install` for a missing package without asking first.",
        per_request=False,
    ),
    Option(
        "strip_provider_keys",
        bool,
        False,
        "Also remove common provider key variables (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...) from "
        "the environment of kernels the server starts. Off by default: your own code may need "
        "them.",
        per_request=False,
    ),
    Option(
        "db_path",
        str,
        "",
        "Path of the SQLite file that stores conversations. Empty means jupyter-ci.sqlite in the "
        "Jupyter data directory. Avoid network filesystems.",
        per_request=False,
        public=False,
    ),
)

OPTIONS_BY_NAME: dict[str, Option] = {option.name: option for option in OPTIONS}

# Flags that set another option to a fixed value.
ALIASES: dict[str, tuple[str, Any]] = {
    "--review": ("mode", "review"),
    "--no-run": ("mode", "insert"),
}


def option(name: str) -> Option:
    """The option called ``name``; ``KeyError`` with the known names if there is none."""
    try:
        return OPTIONS_BY_NAME[name]
    except KeyError:
        known = ", ".join(sorted(OPTIONS_BY_NAME))
        raise KeyError(f"unknown option {name!r}; known options: {known}") from None
