"""``%ci`` and ``%%ci``: the IPython side of jupyter-ci.

Loading this module must stay cheap: it imports only the standard library, IPython (already loaded
in any kernel) and jupyter-ci's own light modules. litellm and openai are imported only when a
model is first called.
"""

from __future__ import annotations

import os
from typing import Any

from IPython.core.magic import Magics, cell_magic, line_magic, magics_class, no_var_expand

from ._version import __version__
from .arguments import OptionsError, magic_help, parse_magic_line
from .config import environment_values
from .errors import ConfigError, JupyterCIError
from .options import OPTIONS
from .settings import Layer, Settings, resolve_settings

#: Set to 1 (or true) to make ``%%ci`` do nothing, e.g. for unattended re-runs of a notebook.
DISABLE_ENV = "JUPYTER_CI_DISABLE"


@magics_class
class CIMagics(Magics):
    """The ``%ci`` line magic (settings) and the ``%%ci`` cell magic (requests)."""

    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        #: Settings made with ``%ci --option value`` for the rest of this kernel session.
        self.session: dict[str, Any] = {}
        self.enabled = True

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
            print(magic_help())
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
            print("jupyter-ci: session settings cleared.")
            return
        try:
            given, rest = parse_magic_line(line)
            if rest:
                raise OptionsError(f"unexpected text {rest!r}; %ci takes only options")
            candidate = {**self.session, **given}
            self.settings(candidate)  # validate before keeping anything
        except (OptionsError, JupyterCIError) as err:
            print(f"jupyter-ci: {err}")
            return
        self.session = candidate
        print(describe(self.settings(), enabled=self.is_enabled()))

    @cell_magic("ci")  # type: ignore[arg-type]
    @no_var_expand
    def ci_cell(self, line: str, cell: str) -> None:
        """Turn the request in this cell into code cells run in this kernel.

        ``%%ci [options] request`` — the request is the rest of the line and the cell's body.
        ``%ci --help`` lists the options.
        """
        if not self.is_enabled():
            print("jupyter-ci: %%ci is off here; nothing was done.")
            return
        try:
            given, prompt = parse_magic_line(line)
        except OptionsError as err:
            print(f"jupyter-ci: {err}")
            return
        prompt = "\n".join(part for part in (prompt, cell.strip()) if part)
        if not prompt:
            print("jupyter-ci: write a request after %%ci, e.g. `%%ci plot the iris data`.")
            return
        try:
            settings = self.settings(given)
            if not settings.model:
                raise ConfigError.no_model()
        except JupyterCIError as err:
            print(f"jupyter-ci: {err.message}\n{err.hint}".rstrip())
            return
        print(
            f"jupyter-ci {__version__}: model {settings.model} is configured, but this version "
            "cannot run requests yet: the agent loop is not part of it."
        )

    def is_enabled(self) -> bool:
        """Whether ``%%ci`` acts: not switched off by ``%ci off`` nor by JUPYTER_CI_DISABLE."""
        disabled = os.environ.get(DISABLE_ENV, "").strip().lower() in {"1", "true", "yes", "on"}
        return self.enabled and not disabled


def allow_one_line_cell_magic(lines: list[str]) -> list[str]:
    """Let ``%%ci plot the iris data`` stand alone on its line.

    IPython refuses a cell magic whose body is empty; a request usually fits on the magic's own
    line. This input transformer gives such a cell an empty second line, so the magic runs with
    an empty body instead of raising ``UsageError``. Other cells pass through untouched.
    """
    if len(lines) == 1 and lines[0].startswith("%%ci") and lines[0][4:5] in ("", " ", "\t", "\n"):
        return [lines[0] if lines[0].endswith("\n") else lines[0] + "\n", "\n"]
    return lines


def describe(settings: Settings, *, enabled: bool = True) -> str:
    """The text ``%ci`` prints: version, state, and each public setting with where it came from.

    Never shows a key, and shows only whether a custom ``api_base`` is set, not its address.
    """
    lines = [f"jupyter-ci {__version__}" + ("" if enabled else " (off: %%ci does nothing)")]
    model = settings.model or "not configured (e.g. %ci --model openai/gpt-4o-mini)"
    lines.append(f"  model: {model}")
    lines.append(
        "  api_base: " + ("set (custom endpoint)" if settings.api_base else "provider default")
    )
    lines.append("  key: " + _key_state(settings))
    for opt in OPTIONS:
        if opt.name in {"model", "api_base", "models"} or not opt.public or not opt.per_request:
            continue
        source = settings.sources.get(opt.name, "default")
        lines.append(f"  {opt.name}: {getattr(settings, opt.name)}  ({source})")
    return "\n".join(lines)


def _key_state(settings: Settings) -> str:
    if os.environ.get(settings.api_key_env):
        return f"found in {settings.api_key_env}"
    return f"{settings.api_key_env} not set (the provider's usual variable is used if set)"
