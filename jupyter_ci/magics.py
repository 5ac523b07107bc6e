"""``%ci`` and ``%%ci``: the IPython side of jupyter-ci.

Loading this module must stay cheap: it imports only the standard library, IPython (already loaded
in any kernel) and jupyter-ci's own light modules. litellm and openai are imported only when a
model is first called.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from IPython.core.magic import Magics, cell_magic, line_magic, magics_class, no_var_expand

from ._version import __version__
from .arguments import OptionsError, make_magic_parser, split_options
from .config import environment_values
from .errors import ConfigError, JupyterCIError, exception_text
from .options import OPTIONS, option
from .settings import Layer, Settings, resolve_settings
from .vocabulary import constant

#: Set to 1 (or true) to make ``%%ci`` do nothing, e.g. for unattended re-runs of a notebook.
DISABLE_ENV = "JUPYTER_CI_DISABLE"
#: Modules the in-kernel loop imports when it runs (not when the extension loads).
LOOP_NEEDS = ("litellm", "openai")

NO_LITELLM = (
    "jupyter-ci's in-kernel loop needs litellm in this kernel's environment: "
    "%pip install jupyter-ci"
)
#: The text part of the handoff output (what other frontends show of it).
HANDED_OFF = "jupyter-ci: handed to JupyterLab; the generated cells appear below this one."
#: The one line the queue-stopping error shows (ARCHITECTURE.md, "The path of one request").
GENERATING_BELOW = "jupyter-ci is generating below; the following cells will run when it is done."


#: The one line shown in a cell held back because it was sent before a handoff.
HELD_BACK = "jupyter-ci: held back; this cell runs when the generation above is done."
#: The hold on a tab's requests after a handoff ends at the latest this long after it (seconds):
#: the tab ends it at once when it sees the handoff (ARCHITECTURE.md, "Timing windows"); this
#: is for a tab that went away right after sending the ``%%ci``.
HOLD_LIMIT = 30.0


class JupyterCIHeldBack(Exception):
    """A cell sent with a handing-off ``%%ci`` (Run All) that reached the kernel after it.

    The kernel's own abort covers only the requests it had already received when the
    ``%%ci`` stopped the queue; on a busy machine a later one arrives after that and would run
    before the generated cells. The labextension runs it again, in order, when the run is done.
    """

    def __init__(self) -> None:
        super().__init__(HELD_BACK)

    def _render_traceback_(self) -> list[str]:
        return [HELD_BACK]


class HoldBatch:
    """After a handoff, refuse the rest of the same session's batch (an input transformer).

    The batch is what the ``%%ci``'s session sent before the tab saw the handoff: the tab then
    sends jupyter-ci's own first request (``metadata.jupyter_ci_resume``: its mark of the batch's
    end, a generated cell, or the batch's continuation), which arrives behind every request of
    the batch on the same channel and ends the hold, from any session (a server-side executor
    sends the batch from the server's session, the tab its mark from its own). Silent requests
    and other sessions' requests pass; at the latest the hold ends :data:`HOLD_LIMIT` seconds
    after the handoff.
    """

    def __init__(
        self, shell: Any, session: str, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.shell = shell
        self.session = session
        self._clock = clock
        self.expires = clock() + HOLD_LIMIT

    def install(self) -> None:
        """Start holding (replacing an earlier hold)."""
        cleanup = self.shell.input_transformers_cleanup
        for transformer in [t for t in cleanup if isinstance(t, HoldBatch)]:
            cleanup.remove(transformer)
        cleanup.insert(0, self)

    def remove(self) -> None:
        """Stop holding."""
        cleanup = self.shell.input_transformers_cleanup
        if self in cleanup:
            cleanup.remove(self)

    def __call__(self, lines: list[str]) -> list[str]:
        if self._clock() > self.expires:
            self.remove()
            return lines
        parent = parent_request(self.shell)
        header = parent.get("header") if isinstance(parent, Mapping) else None
        content = parent.get("content") if isinstance(parent, Mapping) else None
        metadata = parent.get("metadata") if isinstance(parent, Mapping) else None
        if isinstance(metadata, Mapping) and metadata.get(constant("ResumeMetadataKey")):
            self.remove()  # the batch's end
            return lines
        if not isinstance(header, Mapping) or header.get("session") != self.session:
            return lines
        if isinstance(content, Mapping) and content.get("silent"):
            return lines
        return ["raise __import__('jupyter_ci.magics').magics.JupyterCIHeldBack()\n"]


class JupyterCIHandoff(Exception):
    """Raised by a ``%%ci`` that handed its request to JupyterLab, to stop the execution queue.

    Under Run All the cells queued after the ``%%ci`` would otherwise run before the generated
    ones; the kernel aborts them instead, and the labextension runs them, in order, once the run
    is done. It shows as one line, not a traceback.
    """

    def __init__(self) -> None:
        super().__init__(GENERATING_BELOW)

    def _render_traceback_(self) -> list[str]:
        return [GENERATING_BELOW]


#: What ``%%ci`` says in a cell that jupyter-ci itself runs (ARCHITECTURE.md, Invariants).
INSIDE_A_RUN = (
    "jupyter-ci: %%ci starts nothing in a cell that jupyter-ci itself is running (generated "
    "code cannot start a run); write your request in a cell of your own."
)
REVIEW_IN_KERNEL = (
    "jupyter-ci: review mode needs the JupyterLab panel to approve each cell, and this request "
    "runs inside the kernel. Use --no-run to get the code as the next cell without running it, "
    "or --mode auto to run it."
)
#: ``%ci --progress``: a switch of this magic only (not in the shared options table).
PROGRESS_CHOICES = ("auto", "text", "widgets")
#: The environment variable that chooses the progress view when ``%ci --progress`` does not.
PROGRESS_ENV = "JUPYTER_CI_PROGRESS"
PROGRESS_HELP = (
    "How progress is shown under the cell (this magic only): widgets where the frontend is "
    "known to render them (JupyterLab, Notebook 7, VS Code), text elsewhere (auto); or always "
    f"text, or always widgets. Also the environment variable {PROGRESS_ENV}."
)


def should_hand_off(parent: Mapping[str, Any] | None) -> bool:
    """Whether ``%%ci`` hands the request to the jupyter-ci frontend that sent it.

    Only if the request's metadata carries a stamp (``metadata.jupyter_ci.client``, put there by
    the labextension) equal to the request header's ``session``: a stamp saved in a notebook
    file, a request from another client, or no stamp at all means the in-kernel loop.
    """
    if not isinstance(parent, Mapping):
        return False
    metadata = parent.get("metadata")
    header = parent.get("header")
    if not isinstance(metadata, Mapping) or not isinstance(header, Mapping):
        return False
    stamp = metadata.get("jupyter_ci")
    client = stamp.get("client") if isinstance(stamp, Mapping) else None
    session = header.get("session")
    return isinstance(client, str) and bool(client) and client == session


def run_of(parent: Mapping[str, Any] | None) -> str:
    """The run whose cell the request executes ('' for a cell of the user's): the tab names it
    in the request's metadata (``jupyter_ci_run``)."""
    metadata = parent.get("metadata") if isinstance(parent, Mapping) else None
    run_id = metadata.get(constant("RunMetadataKey")) if isinstance(metadata, Mapping) else None
    return run_id if isinstance(run_id, str) else ""


def parent_request(shell: Any) -> Mapping[str, Any] | None:
    """The execute request being handled, when the shell runs in a kernel (else None)."""
    kernel = getattr(shell, "kernel", None)
    if kernel is None:
        return None
    try:
        parent = kernel.get_parent()
    except Exception:
        return None
    return parent if isinstance(parent, Mapping) else None


@magics_class
class CIMagics(Magics):
    """The ``%ci`` line magic (settings) and the ``%%ci`` cell magic (requests)."""

    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        #: Settings made with ``%ci --option value`` for the rest of this kernel session.
        self.session: dict[str, Any] = {}
        self.enabled = True
        #: Code generated by in-kernel runs, by the input number of their ``%%ci`` cell.
        self.generated: dict[int, str] = {}
        #: ``%ci --progress`` for this session (a magic-only switch, not a shared option).
        self.progress: str | None = None
        #: Expectations of a jupyter-ci tab already handed off (see :mod:`jupyter_ci.expected`).
        self.taken: set[str] = set()
        #: Whether the in-kernel loop is running (its cells run in this very shell).
        self.running = False

    # --- settings -----------------------------------------------------------------------------

    def settings(self, request: dict[str, Any] | None = None) -> Settings:
        """Resolve the settings for a request made in this kernel.

        In the kernel the user is the owner of every layer (their environment, their session
        settings, their request), so all layers are trusted here.
        """
        return resolve_settings(
            [
                Layer("the kernel's environment", environment_values(), trusted=True),
                Layer("%ci session settings", self.session, trusted=True),
                Layer("this request", request or {}, trusted=True),
            ]
        )

    @line_magic
    @no_var_expand
    def ci(self, line: str) -> None:
        """Show or change jupyter-ci's settings for this kernel session.

        ``%ci`` shows the version and the settings; ``%ci --model openai/gpt-4o-mini
        --max-attempts 2`` changes them; ``%ci off`` / ``%ci on`` disable or enable ``%%ci``;
        ``%ci reset`` forgets the session's settings; ``%ci --help`` lists every option.
        """
        words = line.split()
        if words in (["--help"], ["-h"], ["help"]):
            print(options_help())
            return
        if words == ["off"]:
            self.enabled = False
            print("jupyter-ci: %%ci is off in this kernel (it will do nothing); `%ci on` to undo.")
            return
        if words == ["on"]:
            self.enabled = True
            print("jupyter-ci: %%ci is on.")
            return
        if words == ["reset"]:
            self.session.clear()
            self.progress = None
            print("jupyter-ci: session settings cleared.")
            return
        try:
            given, progress, rest = parse_line(line)
            if rest:
                raise OptionsError(f"unexpected text {rest!r}; %ci takes only options")
            candidate = {**self.session, **given}
            self.settings(candidate)  # validate before keeping anything
            env_progress = progress_from_env()
        except (OptionsError, JupyterCIError) as err:
            print(f"jupyter-ci: {err}")
            return
        self.session = candidate
        if progress is not None:
            self.progress = progress
        if self.progress is not None:
            shown = (self.progress, "%ci session settings")
        elif env_progress is not None:
            shown = (env_progress, "the kernel's environment")
        else:
            shown = ("auto", "default")
        print(describe(self.settings(), enabled=self.is_enabled(), progress=shown))

    @cell_magic("ci")  # type: ignore[arg-type]
    @no_var_expand
    def ci_cell(self, line: str, cell: str) -> None:
        """Turn the request in this cell into code cells run in this kernel.

        ``%%ci [options] request`` — the request is the rest of the line and the cell's body.
        ``%%ci --help`` (or ``%ci --help``) lists the options.
        """
        if line.split()[:1] in (["--help"], ["-h"]):
            print(options_help())
            return
        if not self.is_enabled():
            print("jupyter-ci: %%ci is off here; nothing was done.")
            return
        try:
            given, progress, prompt = parse_line(line)
            env_progress = progress_from_env()
        except OptionsError as err:
            print(f"jupyter-ci: {err}")
            return
        regenerate = bool(given.pop("regenerate", False))
        prompt = "\n".join(part for part in (prompt, cell.strip()) if part)
        if not prompt:
            print("jupyter-ci: write a request after %%ci, e.g. `%%ci plot the iris data`.")
            return
        parent = parent_request(self.shell)
        if self.running or run_of(parent):
            # A cell of a run (generated code) would start a run outside that run's caps and
            # record: in JupyterLab the tab names the run in the request's metadata; the
            # in-kernel loop runs its cells in this shell.
            print(INSIDE_A_RUN)
            return
        cell_id = _cell_id(parent) if should_hand_off(parent) else self.expected_cell(parent)
        if cell_id:
            # The server holds the model and its configuration; only the values' types are
            # checked here (the server checks what they may choose).
            try:
                typed = _typed(given)
                session = _typed(self.session)
            except ValueError as err:
                print(f"jupyter-ci: {err}")
                return
            hand_off(self.shell, parent, prompt, typed, session, regenerate, cell_id)
        try:
            settings = self.settings(given)
            if not settings.model:
                raise ConfigError.no_model("kernel")
        except JupyterCIError as err:
            print(f"jupyter-ci: {err.message}\n{err.hint}".rstrip())
            return
        if settings.mode == "review":
            print(REVIEW_IN_KERNEL)
            return
        missing = missing_for_loop()
        if missing:
            print(missing)
            return
        # Imported here: %load_ext must stay light.
        from .workspaces.inkernel_progress import choose_view

        choice = progress or self.progress or env_progress or "auto"
        self.running = True
        try:
            run_here(
                self.shell, prompt, settings, self.generated, progress=choose_view(choice, parent)
            )
        finally:
            self.running = False

    def expected_cell(self, parent: Mapping[str, Any] | None) -> str:
        """The cell a jupyter-ci tab expects an unstamped request to be ("" if none).

        A server-side executor (jupyter-server-nbmodel) sends the cell without its metadata;
        the tab told the jupyter-ci server which ``%%ci`` cell it scheduled, and the server wrote
        it next to this kernel's connection file with the session its executor sends from.
        """
        header = parent.get("header") if isinstance(parent, Mapping) else None
        content = parent.get("content") if isinstance(parent, Mapping) else None
        session = header.get("session") if isinstance(header, Mapping) else None
        code = content.get("code") if isinstance(content, Mapping) else None
        if not isinstance(session, str) or not session or not isinstance(code, str):
            return ""
        try:
            from ipykernel.connect import get_connection_file

            connection_file = get_connection_file()
        except Exception:
            return ""
        from . import expected

        found = expected.expected_cell(
            expected.path_for(connection_file), session, code, self.taken
        )
        return found or ""

    def is_enabled(self) -> bool:
        """Whether ``%%ci`` acts: not switched off by ``%ci off`` nor by JUPYTER_CI_DISABLE."""
        disabled = os.environ.get(DISABLE_ENV, "").strip().lower() in {"1", "true", "yes", "on"}
        return self.enabled and not disabled


def _typed(values: Mapping[str, Any]) -> dict[str, Any]:
    """Option values as their types (a command line gives strings); ``ValueError`` if not."""
    return {name: option(name).coerce(value) for name, value in values.items()}


def _cell_id(parent: Mapping[str, Any] | None) -> str:
    """The notebook cell id of the request (JupyterLab sends it; a console has none)."""
    metadata = parent.get("metadata") if isinstance(parent, Mapping) else None
    cell_id = metadata.get("cellId") if isinstance(metadata, Mapping) else None
    return cell_id if isinstance(cell_id, str) else ""


def hand_off(
    shell: Any,
    parent: Mapping[str, Any] | None,
    prompt: str,
    options: Mapping[str, Any],
    session_options: Mapping[str, Any],
    regenerate: bool,
    cell_id: str,
) -> None:
    """Hand the request of cell ``cell_id`` to the JupyterLab tab that sent it, then stop the
    execution queue.

    Outputs the handoff payload (ARCHITECTURE.md; the tab whose kernel session sent this request,
    or that expects it from a server-side executor, claims it, once), holds back the rest of the
    batch (:class:`HoldBatch`) and raises :class:`JupyterCIHandoff`.
    """
    import secrets

    from IPython.display import display

    from .protocol import HANDOFF_MIME, PROTOCOL_VERSION

    header = parent.get("header") if isinstance(parent, Mapping) else None
    session = header.get("session") if isinstance(header, Mapping) else ""
    payload = {
        "version": PROTOCOL_VERSION,
        "prompt": prompt,
        "options": dict(options),
        "session_options": dict(session_options),
        "cell_id": cell_id,
        "nonce": secrets.token_hex(16),
        "jupyter_ci_version": __version__,
        "regenerate": regenerate,
        "kernel_session": str(session or ""),
    }
    display({HANDOFF_MIME: payload, "text/plain": HANDED_OFF}, raw=True)  # type: ignore[no-untyped-call]
    if session:
        HoldBatch(shell, str(session)).install()
    raise JupyterCIHandoff()


def parse_line(line: str) -> tuple[dict[str, Any], str | None, str]:
    """Parse a ``%ci``/``%%ci`` line: ``(options given, --progress or None, prompt)``.

    ``OptionsError`` when the options are malformed.
    """
    parser = make_parser()
    tokens, prompt = split_options(line, parser)
    given = {
        name: value for name, value in vars(parser.parse_args(tokens)).items() if value is not None
    }
    progress = given.pop("progress", None)
    if progress is not None and progress not in PROGRESS_CHOICES:
        raise OptionsError(
            f"--progress must be one of {', '.join(PROGRESS_CHOICES)}; got {progress!r}"
        )
    return given, progress, prompt


def options_help() -> str:
    """What ``%ci --help`` and ``%%ci --help`` print: every option of the magic."""
    return make_parser().format_help()


def make_parser() -> argparse.ArgumentParser:
    """The options of ``%%ci``: the shared options table, and the magic-only ``--progress``."""
    parser = make_magic_parser()
    parser.add_argument(
        "--regenerate",
        dest="regenerate",
        action="store_true",
        default=None,
        help=(
            "In JupyterLab: replace the cells this %%ci generated before (unless you edited "
            "them) instead of keeping them. Without it, re-running a %%ci whose cells are still "
            "below it does not ask the model again."
        ),
    )
    parser.add_argument(
        "--progress",
        dest="progress",
        default=None,
        metavar="|".join(PROGRESS_CHOICES),
        help=PROGRESS_HELP,
    )
    return parser


def progress_from_env() -> str | None:
    """``JUPYTER_CI_PROGRESS`` if set; ``OptionsError`` when it names no view."""
    value = os.environ.get(PROGRESS_ENV, "").strip().lower()
    if not value:
        return None
    if value not in PROGRESS_CHOICES:
        raise OptionsError(
            f"{PROGRESS_ENV} must be one of {', '.join(PROGRESS_CHOICES)}; got {value!r}"
        )
    return value


def missing_for_loop() -> str:
    """What the in-kernel loop lacks in this kernel's environment, as a sentence ("" if none)."""
    missing = [name for name in LOOP_NEEDS if importlib.util.find_spec(name) is None]
    if not missing:
        return ""
    if missing == ["litellm"]:
        return f"{NO_LITELLM} (this kernel runs {sys.executable})"
    return (
        f"jupyter-ci's in-kernel loop needs {' and '.join(missing)} in this kernel's "
        f"environment: %pip install jupyter-ci (this kernel runs {sys.executable})"
    )


def run_here(
    shell: Any,
    prompt: str,
    settings: Settings,
    earlier: dict[int, str] | None = None,
    *,
    progress: str = "text",
) -> str:
    """Run the request with the in-kernel loop; print progress, the outcome, and offer the code.

    Returns the generated code ("" if none). Never raises for the run's failures: they are
    printed as text. ``earlier`` holds the code earlier runs in this kernel generated, by the
    input number of their ``%%ci`` cell; this run's code is added to it. ``progress`` is the
    view under the cell, ``"text"`` or ``"widgets"``; the status line is printed as text last.
    """
    try:
        # Imported here: %load_ext must stay light (no litellm, no loop).
        from .agent.instructions import project_instructions
        from .agent.loop import RunRequest
        from .models.litellm_model import LiteLLMModel
        from .workspaces.inkernel import current_input_number, run_in_kernel
    except ImportError as err:
        print(
            f"jupyter-ci: the in-kernel loop cannot be loaded in this kernel's environment "
            f"({err}); %pip install jupyter-ci (this kernel runs {sys.executable})"
        )
        return ""
    try:
        model = LiteLLMModel.from_settings(settings)
    except JupyterCIError as err:
        print(f"jupyter-ci: {err.message}\n{err.hint}".rstrip())
        return ""
    number = current_input_number(shell)
    here = Path.cwd()  # the kernel's working folder: AGENTS.md there
    request = RunRequest(
        prompt, settings, instructions=project_instructions(settings.instructions, here, here)
    )
    result = run_in_kernel(
        shell, request, model, progress=progress, model_name=settings.model, earlier=earlier
    )
    if result.code and number is not None and earlier is not None:
        earlier[number] = result.code
    if result.code:
        shell.set_next_input(result.code, replace=False)
    if result.abandoned:
        print("jupyter-ci: stopped; the run did not end in time and was left behind.")
        return result.code
    if result.error is not None or result.outcome is None:
        error = result.error
        print(f"jupyter-ci: internal error: {exception_text(error) if error else 'no outcome'}")
        return result.code
    outcome = result.outcome
    # The answer was printed as it came (the progress view's text, saved with the cell): not
    # displayed again as Markdown, which this kernel's frontend would render as trusted HTML.
    print(outcome.status_line())
    if outcome.error is not None and not outcome.ok and outcome.reason != "user":
        print(f"jupyter-ci: {outcome.error.message}\n{outcome.error.hint}".rstrip())
    if result.code and outcome.reason == "inserted":
        print(
            "jupyter-ci: the code was not run (--no-run); it is offered as the next cell "
            "(where the frontend supports it)."
        )
    elif result.code:
        print("jupyter-ci: the code is offered as the next cell (where the frontend supports it).")
    return result.code


def allow_one_line_cell_magic(lines: list[str]) -> list[str]:
    """Let ``%%ci plot the iris data`` stand alone on its line.

    IPython refuses a cell magic whose body is empty; a request usually fits on the magic's own
    line. This input transformer gives such a cell an empty second line, so the magic runs with
    an empty body instead of raising ``UsageError``. Other cells pass through untouched.
    """
    if len(lines) != 1:
        return lines
    from .vocabulary import is_ci_cell  # here, not at %load_ext: the schema's rule, read once

    if is_ci_cell(lines[0]):
        return [lines[0] if lines[0].endswith("\n") else lines[0] + "\n", "\n"]
    return lines


def describe(
    settings: Settings, *, enabled: bool = True, progress: tuple[str, str] = ("auto", "default")
) -> str:
    """The text ``%ci`` prints: version, state, and each public setting with where it came from.

    Never shows a key, and shows only whether a custom ``api_base`` is set, not its address.
    ``progress`` is the magic-only progress view and where it was chosen.
    """
    lines = [f"jupyter-ci {__version__}" + ("" if enabled else " (off: %%ci does nothing)")]
    model = settings.model or "not configured here (e.g. %ci --model openai/gpt-4o-mini)"
    lines.append(f"  model: {model}")
    lines.append(
        "  api_base: " + ("set (custom endpoint)" if settings.api_base else "provider default")
    )
    lines.extend(_key_lines(settings))
    for opt in OPTIONS:
        if opt.name in {"model", "api_base", "models"} or not opt.public or not opt.per_request:
            continue
        source = settings.sources.get(opt.name, "default")
        lines.append(f"  {opt.name}: {getattr(settings, opt.name)}  ({source})")
    lines.append(f"  progress: {progress[0]}  ({progress[1]})")
    return "\n".join(lines)


def key_variables(settings: Settings) -> list[str]:
    """The variables a key for ``settings`` is read from, in order: jupyter-ci's own, then the
    provider's usual one (never for a custom ``api_base``, which gets only jupyter-ci's)."""
    from .server.keys import provider_key_variable  # a light module: a table and a lookup

    names = [settings.api_key_env]
    provider = provider_key_variable(settings.model or "openai/")
    if provider and not settings.api_base:
        names.append(provider)
    return names


def _key_lines(settings: Settings) -> list[str]:
    """Where the key is looked for: in this kernel (where ``%%ci`` runs in the kernel), and in
    JupyterLab, where the Jupyter server reads it from its own environment at start."""
    names = key_variables(settings)
    found = [name for name in names if os.environ.get(name)]
    here = f"found in {found[0]}" if found else f"{' or '.join(names)} not set"
    return [
        f"  key, where %%ci runs in this kernel: {here}",
        "  key, in JupyterLab: the Jupyter server's environment when it starts, e.g. "
        f"`{names[-1]}=sk-... jupyter lab` (a key set in this kernel does not reach the server)",
    ]
