"""The server's keys: taken out of the process environment at start, handed to the model per call.

Kernels, terminals and every other child process inherit the Jupyter server's environment. To keep
jupyter-ci's own key (the variable named by ``c.JupyterCI.api_key_env``, ``JUPYTER_CI_API_KEY`` by
default) out of them, the server extension removes that variable from ``os.environ`` when it loads
and keeps the value here, in memory. With ``strip_provider_keys`` the common provider variables
(``OPENAI_API_KEY``, ...) are taken too; by default they stay, because the user's own code may
need them.

The limit, documented in the README: a kernel runs as the same operating-system user as the
server, so it can still read the environment the server *started* with (``/proc/<pid>/environ``)
and its files. Real isolation needs a proxy holding the key (a LiteLLM proxy with virtual keys).
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from dataclasses import dataclass, field

from ..settings import Settings

#: Provider prefixes of litellm model strings and the variable holding their key.
PROVIDER_KEY_VARIABLES: dict[str, str] = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "groq": "GROQ_API_KEY",
    "cohere": "COHERE_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "xai": "XAI_API_KEY",
    "together_ai": "TOGETHERAI_API_KEY",
    "fireworks_ai": "FIREWORKS_AI_API_KEY",
    "huggingface": "HUGGINGFACE_API_KEY",
    "perplexity": "PERPLEXITYAI_API_KEY",
    "azure": "AZURE_API_KEY",
}


def provider_key_variable(model: str) -> str | None:
    """The usual key variable of the provider of ``model`` (a bare name is OpenAI's)."""
    provider = model.split("/", 1)[0] if "/" in model else "openai"
    return PROVIDER_KEY_VARIABLES.get(provider)


@dataclass
class KeyRing:
    """Keys the server took from its environment, by variable name."""

    keys: dict[str, str] = field(default_factory=dict)

    @classmethod
    def take(
        cls,
        api_key_env: str,
        *,
        strip_provider_keys: bool = False,
        environ: MutableMapping[str, str] | None = None,
    ) -> KeyRing:
        """Remove jupyter-ci's key variable (and, if asked, the provider variables) from
        ``environ`` (the process environment by default), keeping their values."""
        environ = os.environ if environ is None else environ
        names = [api_key_env]
        if strip_provider_keys:
            names.extend(PROVIDER_KEY_VARIABLES.values())
        ring = cls()
        for name in names:
            value = environ.pop(name, None)
            if value:
                ring.keys[name] = value
        return ring

    def api_key_for(self, settings: Settings) -> str | None:
        """The key for a run with ``settings``, or None to let the provider's variable apply.

        jupyter-ci's own variable wins. A custom ``api_base`` gets only that key, never a
        provider's (the model layer then sends a placeholder). Otherwise a provider variable
        taken out of the environment (``strip_provider_keys``) is handed over; one left in the
        environment is read by litellm itself.
        """
        own = self.keys.get(settings.api_key_env)
        if own:
            return own
        if settings.api_base:
            return None
        variable = provider_key_variable(settings.model)
        return self.keys.get(variable) if variable else None

    def secrets(self) -> list[str]:
        """Every key held, for scrubbing messages and logs."""
        return [value for value in self.keys.values() if value]

    def __repr__(self) -> str:
        return f"KeyRing(variables={sorted(self.keys)})"
