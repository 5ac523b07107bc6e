"""Keep keys out of messages: provider errors sometimes quote the key they refused."""

from __future__ import annotations

import re
from collections.abc import Iterable

# Common shapes of API keys (OpenAI, Anthropic, Google, generic bearer tokens).
_KEY_PATTERNS = re.compile(
    r"(sk-[A-Za-z0-9_\-]{8,}|sk-ant-[A-Za-z0-9_\-]{8,}|AIza[0-9A-Za-z_\-]{20,}"
    r"|(?i:bearer)\s+[A-Za-z0-9._\-]{12,}"
    # Masked keys as providers print them: sk-ab****wxyz.
    r"|[A-Za-z0-9_\-]*\*{3,}[A-Za-z0-9_\-]*)"
)
_MIN_FRAGMENT = 6


def scrub(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with each secret, any fragment of one (≥ 6 characters, such as the masked
    ``sk-...abcd`` forms providers print) and anything shaped like a key replaced by ``[key]``."""
    text = _KEY_PATTERNS.sub("[key]", text)
    for secret in secrets:
        if not secret:
            continue
        text = text.replace(secret, "[key]")
        if len(secret) >= 2 * _MIN_FRAGMENT:
            for fragment in (secret[: _MIN_FRAGMENT + 4], secret[-_MIN_FRAGMENT:]):
                text = text.replace(fragment, "[key]")
    return text
