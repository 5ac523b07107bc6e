"""Whether a model string names its provider, checked when the configuration is read.

litellm needs to know a model's provider (``openai/gpt-4o-mini``, or a bare name it knows such as
``gpt-4o-mini``); a name it cannot place (``gpt4o-mini``) used to be accepted and fail on the
first request with litellm's own message. :func:`model_problem` says so when the setting is read.

Where litellm is already imported (the Jupyter server warms it at start) its own resolution
decides. Elsewhere (``%ci`` in a kernel: ``%load_ext`` must stay light) the check is light: a
``provider/model`` string passes (litellm checks the provider at the first request, and says
the same), and a bare name passes only if litellm's packaged model table lists it, read as a file
without importing litellm. This module imports only the standard library.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import io
import json
import sys
from pathlib import Path

#: What to write instead, said after every problem.
MODEL_HINT = "Use provider/model, e.g. openai/gpt-4o-mini."

#: litellm's own table of models (shipped with the package), read without importing litellm.
_TABLE = "model_prices_and_context_window_backup.json"


def model_problem(name: str) -> str:
    """A sentence saying why litellm cannot use the model string ``name`` ("" when it can)."""
    name = name.strip()
    if not name:
        return ""
    litellm = sys.modules.get("litellm")
    resolve = getattr(litellm, "get_llm_provider", None)
    # Not while another thread is still importing it (the server's warm-up).
    spec = getattr(litellm, "__spec__", None)
    if resolve is not None and not getattr(spec, "_initializing", False):
        try:
            # Its "Provider List" banner goes to stdout unless the importer silenced it.
            with contextlib.redirect_stdout(io.StringIO()):
                _model, provider, *_rest = resolve(model=name)
        except Exception:
            provider = ""
        return "" if provider and _model else _no_provider(name)
    provider, slash, model = name.partition("/")
    if slash:
        return "" if provider and model else _no_provider(name)
    return "" if name in _known_bare_names() else _no_provider(name)


def models_problem(names: str) -> str:
    """:func:`model_problem` of each of the comma-separated ``names`` (the first problem)."""
    for name in names.split(","):
        problem = model_problem(name)
        if problem:
            return problem
    return ""


def _no_provider(name: str) -> str:
    return f"The model {name!r} does not name a provider litellm knows."


@functools.cache
def _known_bare_names() -> frozenset[str]:
    """The model names litellm's packaged table lists without a provider prefix."""
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return frozenset()
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        try:
            table = json.loads((Path(location) / _TABLE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(table, dict):
            return frozenset(
                key
                for key, entry in table.items()
                if "/" not in key and isinstance(entry, dict) and entry.get("litellm_provider")
            )
    return frozenset()
