"""jupyter-ci's few error classes, grouped by what the agent loop does with them.

- :class:`Recoverable` errors are fed back to the model, which may try again within the caps:
  a cell that raised, a cell that timed out, a reply with no usable code.
- :class:`Fatal` errors stop the run and are told to the user with what to do: configuration,
  the model provider (key, quota, outage), a cap reached, the kernel dead, a stop by the user,
  or a bug of ours.

Each carries structured fields and a ``hint`` (the next step for the user). They become HTTP
statuses, websocket events or magic output only at the edges (:meth:`JupyterCIError.to_dict`).
"""

from __future__ import annotations

import re
from typing import Any, ClassVar


def error_text(text: str) -> str:
    """An error message with each exception name said once, and litellm's prefix dropped.

    Libraries start their messages with their exception's name and wrap one another's, and a
    caller adding the name again gave "InternalServerError: InternalServerError: ...".
    """
    text = re.sub(r"(?<![\w./])litellm\.(?=[A-Z])", "", text)
    while True:
        shorter = re.sub(r"\b(\w+): \1: ", r"\1: ", text)
        if shorter == text:
            return text
        text = shorter


def exception_text(exc: BaseException) -> str:
    """``Name: message`` for an exception, the name said once (see :func:`error_text`)."""
    message = str(exc)
    return error_text(f"{type(exc).__name__}: {message}" if message else type(exc).__name__)


class JupyterCIError(Exception):
    """Base of every error jupyter-ci raises on purpose."""

    #: A stable machine-readable name, used in events and HTTP replies.
    code: ClassVar[str] = "error"
    #: Whether the loop feeds this error back to the model and lets it try again.
    feed_back: ClassVar[bool] = False

    def __init__(self, message: str, *, hint: str = "") -> None:
        message = error_text(message)
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        message = self.message.rstrip()
        if self.hint and message and message[-1] not in ".!?:;":
            message += "."  # "x.ipynb: does not exist" then the hint: two sentences
        return f"{message} {self.hint}".strip()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description: ``code``, ``message``, ``hint`` and the subclass's fields."""
        data: dict[str, Any] = {"code": self.code, "message": self.message, "hint": self.hint}
        data.update(self._fields())
        return data

    def _fields(self) -> dict[str, Any]:
        return {}


class Recoverable(JupyterCIError):
    """An error the model is told about and may fix (within ``max_attempts``)."""

    feed_back = True


class Fatal(JupyterCIError):
    """An error that ends the run; the user is told what happened and what to do."""

    feed_back = False


# --- fed back to the model -------------------------------------------------------------------


class CellError(Recoverable):
    """A generated cell raised: the kernel's ``ename``, ``evalue`` and traceback lines."""

    code = "cell_error"

    def __init__(self, ename: str, evalue: str, traceback: list[str] | None = None) -> None:
        super().__init__(f"{ename}: {evalue}" if evalue else ename)
        self.ename = ename
        self.evalue = evalue
        self.traceback = list(traceback or [])

    @classmethod
    def from_output(cls, output: dict[str, Any]) -> CellError:
        """Build one from an nbformat ``error`` output."""
        return cls(
            str(output.get("ename", "Error")),
            str(output.get("evalue", "")),
            [str(line) for line in output.get("traceback", [])],
        )

    def _fields(self) -> dict[str, Any]:
        return {"ename": self.ename, "evalue": self.evalue, "traceback": self.traceback}


class CellTimeout(Recoverable):
    """A generated cell ran past ``timeout`` seconds and the kernel was interrupted."""

    code = "cell_timeout"

    def __init__(self, seconds: float) -> None:
        super().__init__(
            f"The cell was still running after {seconds:g} s and was interrupted.",
            hint="Raise --timeout, or ask for a faster approach.",
        )
        self.seconds = seconds

    def _fields(self) -> dict[str, Any]:
        return {"seconds": self.seconds}


class BadCodeBlock(Recoverable):
    """The model's reply had no code that could be extracted, or code that does not parse."""

    code = "bad_code_block"

    def __init__(self, reason: str, excerpt: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.excerpt = excerpt[:500]

    def _fields(self) -> dict[str, Any]:
        return {"reason": self.reason, "excerpt": self.excerpt}


# --- ending the run ---------------------------------------------------------------------------


class ConfigError(Fatal):
    """A setting is missing, malformed or not allowed (an ``api_base`` the server did not name)."""

    code = "config_error"

    def __init__(self, message: str, *, hint: str = "", option: str = "") -> None:
        super().__init__(message, hint=hint)
        self.option = option

    @classmethod
    def no_model(cls, where: str = "jupyterlab") -> ConfigError:
        """The error for "no model is configured", with the settings that fix it ``where`` the
        model is called: by the Jupyter server (``jupyterlab``), by the kernel itself
        (``kernel``: ``%%ci`` without JupyterLab), by ``jupyter ci`` (``cli``) or the Python
        API (``api``)."""
        return cls(
            "No model is configured for jupyter-ci.", hint=NO_MODEL_HINTS[where], option="model"
        )

    def _fields(self) -> dict[str, Any]:
        return {"option": self.option}


#: Starting JupyterLab with a model and its key: the key must be in the server's environment
#: before it starts (the panel's setup card and the no-model hint say it).
LAB_SETUP_COMMAND = "JUPYTER_CI_MODEL=openai/gpt-4o-mini OPENAI_API_KEY=sk-... jupyter lab"
#: The same for a local OpenAI-compatible server that needs no key.
LOCAL_LAB_SETUP_COMMAND = (
    "JUPYTER_CI_MODEL=openai/NAME JUPYTER_CI_API_BASE=http://127.0.0.1:8080/v1 jupyter lab"
)

#: What to do when no model is configured, by who calls the model: each is followed literally by a
#: test (tests/lab/test_hints*.py, tests/test_hints_followed.py).
NO_MODEL_HINTS: dict[str, str] = {
    "jupyterlab": (
        "In JupyterLab the Jupyter server calls the model, with its own configuration and "
        f"environment: start it with a model and the key, e.g. `{LAB_SETUP_COMMAND}` "
        "(or c.JupyterCI.model in jupyter_server_config.py); "
        "a key set in the kernel (%env) does not reach the server. For a local "
        "OpenAI-compatible server that needs no key, run "
        "`%ci --model openai/NAME --api-base http://127.0.0.1:8080/v1` in this kernel."
    ),
    "kernel": (
        "Here %%ci runs in the kernel, which calls the model itself: run "
        "`%ci --model openai/gpt-4o-mini` (or set JUPYTER_CI_MODEL), with the key in "
        "OPENAI_API_KEY (or JUPYTER_CI_API_KEY) in the environment the kernel starts with. "
        "For a local server: `%ci --model openai/NAME --api-base http://127.0.0.1:8080/v1`."
    ),
    "cli": (
        "Add --model openai/gpt-4o-mini (or set JUPYTER_CI_MODEL), with the key in "
        "OPENAI_API_KEY (or JUPYTER_CI_API_KEY) in this shell's environment. For a local "
        "server: --model openai/NAME --api-base http://127.0.0.1:8080/v1."
    ),
    "api": (
        'Pass options={"model": "openai/gpt-4o-mini"} (or set JUPYTER_CI_MODEL), with the key '
        "in OPENAI_API_KEY (or JUPYTER_CI_API_KEY) in this process's environment."
    ),
}


class ModelError(Fatal):
    """The model provider failed: bad key, quota or rate limit, outage, unreachable, bad reply.

    ``kind`` is one of ``auth``, ``rate_limit``, ``provider``, ``connection``, ``bad_reply``,
    ``empty_reply``, ``context_overflow``. The provider's message is kept only after key
    fragments are scrubbed.
    """

    code = "model_error"
    KINDS: ClassVar[tuple[str, ...]] = (
        "auth",
        "rate_limit",
        "provider",
        "connection",
        "bad_reply",
        "empty_reply",
        "context_overflow",
    )
    _HINTS: ClassVar[dict[str, str]] = {
        "auth": "Check the key: the model provider refused it.",
        "rate_limit": "The provider is rate-limiting or out of quota; wait and try again.",
        "provider": "The provider failed; try again, or pick another model.",
        "connection": "The model endpoint could not be reached; check api_base and the network.",
        "bad_reply": "The model's reply could not be read; try again or pick another model.",
        "empty_reply": "Try again; if it keeps happening, see the model server's log.",
        "context_overflow": "The prompt did not fit the model's context; lower --context-tokens.",
    }

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        hint: str = "",
    ) -> None:
        if kind not in self.KINDS:
            raise ValueError(f"unknown ModelError kind {kind!r}")
        super().__init__(message, hint=hint or self._HINTS[kind])
        self.kind = kind
        self.status = status
        self.retry_after = retry_after

    def _fields(self) -> dict[str, Any]:
        return {"kind": self.kind, "status": self.status, "retry_after": self.retry_after}


class BudgetExceeded(Fatal):
    """A run reached a cap: ``max_steps``, ``max_tokens_per_run``, ``max_cost_per_run``, or the
    size of one reply (``max_reply_chars``, not an option: :meth:`reply_too_long`)."""

    code = "budget_exceeded"

    def __init__(
        self, cap: str, used: float, limit: float, *, message: str = "", hint: str = ""
    ) -> None:
        super().__init__(
            message or f"Stopped at the {cap} cap: {used:g} used of {limit:g}.",
            hint=hint or f"Raise --{cap.replace('_', '-')} to allow more.",
        )
        self.cap = cap
        self.used = used
        self.limit = limit

    @classmethod
    def reply_too_long(cls, chars: int, limit: int) -> BudgetExceeded:
        """One reply of the model's passed ``limit`` characters as it streamed."""
        return cls(
            "max_reply_chars",
            chars,
            limit,
            message=f"Stopped at the cap on one reply's size: the model's reply passed "
            f"{limit:,} characters and was cut.",
            hint="Ask for a smaller step; data the code needs belongs in a file it reads.",
        )

    def _fields(self) -> dict[str, Any]:
        return {"cap": self.cap, "used": self.used, "limit": self.limit}


class KernelDied(Fatal):
    """The kernel went away during a run (died, shut down or restarted); cells are not replayed.

    Which of these it was is the run's end reason, taken from what was asked (a restart, a
    shutdown) or from how the cell ended (:mod:`jupyter_ci.execution.status`), not from this
    error; ``detail`` says it in words.
    """

    code = "kernel_died"

    def __init__(self, detail: str = "The kernel died during the run.") -> None:
        super().__init__(
            detail,
            hint="Earlier cells' variables are gone: re-run the cells you need, then ask again.",
        )
        self.detail = detail

    def _fields(self) -> dict[str, Any]:
        return {"detail": self.detail}


class BadNotebookFile(Fatal):
    """A notebook file the headless path cannot use (missing folder, not a notebook, read-only,
    in use by another run); nothing was run or written."""

    code = "bad_notebook"

    def __init__(self, path: object, why: str, *, hint: str = "") -> None:
        super().__init__(f"{path}: {why}", hint=hint)
        self.path = str(path)


class NotebookUnavailable(Fatal):
    """The notebook, or a cell the run needs, is gone: closed, deleted, or not open in the tab."""

    code = "notebook_unavailable"

    def __init__(self, message: str, *, hint: str = "") -> None:
        super().__init__(
            message,
            hint=hint
            or "Cells already generated were kept; reopen the notebook and ask again to go on.",
        )


class Disconnected(Fatal):
    """The browser tab that owned a run went away and did not come back within the grace period."""

    code = "disconnected"

    def __init__(self, grace: float) -> None:
        super().__init__(
            f"The browser tab running this request disconnected and did not come back within "
            f"{grace:g} s.",
            hint="The cells generated so far are in the notebook; reopen it and ask again.",
        )
        self.grace = grace

    def _fields(self) -> dict[str, Any]:
        return {"grace": self.grace}


class ServerStopping(Fatal):
    """The Jupyter server is shutting down; runs in progress stop."""

    code = "server_shutdown"

    def __init__(self) -> None:
        super().__init__(
            "The Jupyter server is shutting down; the run stopped.",
            hint="The cells generated so far are in the notebook; ask again after the restart.",
        )


class StoppedByUser(Fatal):
    """The user pressed Stop or interrupted the kernel; never "fixed" by the model."""

    code = "stopped"

    def __init__(self) -> None:
        super().__init__("Stopped by the user.")


class InternalError(Fatal):
    """A bug in jupyter-ci: reported with what the user can do, never hidden."""

    code = "internal_error"

    def __init__(self, message: str) -> None:
        super().__init__(
            message,
            hint="This is a bug in jupyter-ci; please report it with the server log.",
        )


class CellNotFound(InternalError, KeyError):
    """No cell has this id in the workspace (the loop only uses ids it was given: a bug)."""

    code = "cell_not_found"

    def __init__(self, cell_id: str, where: str = "the notebook") -> None:
        super().__init__(f"No cell with id {cell_id!r} in {where}.")
        self.cell_id = cell_id

    def _fields(self) -> dict[str, Any]:
        return {"cell_id": self.cell_id}
