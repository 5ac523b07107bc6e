"""Keep keys out of messages: provider errors sometimes quote the key they refused.

Anything shaped like a key is masked, and so is every stretch of text that repeats a piece of a
known secret at least :data:`MIN_FRAGMENT` characters long, in any letter case, forwards or
backwards: a provider that quotes the key with a few characters cut at each end, or upper-cased,
or reversed, gives nothing away.
"""

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
#: The shortest piece of a secret that is masked wherever it appears.
MIN_FRAGMENT = 6
MASK = "[key]"


def scrub(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with anything shaped like a key, and every piece of a secret (at least
    :data:`MIN_FRAGMENT` characters, any case, either direction), replaced by ``[key]``."""
    text = _KEY_PATTERNS.sub(MASK, text)
    pieces = _pieces(secret for secret in secrets if secret)
    if not pieces:
        return text
    lowered = text.lower()
    covered = bytearray(len(text))
    for start in range(len(text) - MIN_FRAGMENT + 1):
        if lowered[start : start + MIN_FRAGMENT] in pieces:
            covered[start : start + MIN_FRAGMENT] = b"\x01" * MIN_FRAGMENT
    out: list[str] = []
    index = 0
    while index < len(text):
        if covered[index]:
            out.append(MASK)
            while index < len(text) and covered[index]:
                index += 1
        else:
            out.append(text[index])
            index += 1
    return "".join(out)


def _pieces(secrets: Iterable[str]) -> frozenset[str]:
    """Every :data:`MIN_FRAGMENT`-long piece of each secret, lower-cased, forwards and back."""
    pieces: set[str] = set()
    for secret in secrets:
        for form in (secret.lower(), secret.lower()[::-1]):
            if len(form) < MIN_FRAGMENT:
                pieces.add(form)  # too short to cut: only the whole of it, by the pattern above
                continue
            pieces.update(form[i : i + MIN_FRAGMENT] for i in range(len(form) - MIN_FRAGMENT + 1))
    return frozenset(piece for piece in pieces if len(piece) == MIN_FRAGMENT)
