"""A key echoed back in the ways a provider's error (or an attacker) may write it, and an oracle
that looks for any piece of it in text, through the same encodings, built from the standard
library only (not from the scrubber it checks)."""

from __future__ import annotations

import base64
import binascii
import html
import re
import urllib.parse
from collections.abc import Callable

#: The shortest piece of a key that must never get through.
PIECE = 6


def _spaced(text: str) -> str:
    return " ".join(text)


def _separated(text: str) -> str:
    marks = "-_. "
    return "".join(char + marks[i % len(marks)] for i, char in enumerate(text))


def _mixed_case(text: str) -> str:
    return "".join(c.upper() if i % 2 else c.lower() for i, c in enumerate(text))


def _percent(text: str) -> str:
    return "".join(f"%{ord(c):02X}" for c in text)


def _percent_some(text: str) -> str:
    return "".join(f"%{ord(c):02x}" if i % 2 else c for i, c in enumerate(text))


def _entities(text: str) -> str:
    return "".join(f"&#{ord(c)};" if i % 2 else f"&#x{ord(c):x};" for i, c in enumerate(text))


def _hex(text: str) -> str:
    return text.encode().hex()


def _hex_colons(text: str) -> str:
    return ":".join(f"{b:02X}" for b in text.encode())


def _hex_escapes(text: str) -> str:
    return "".join(f"\\x{b:02x}" for b in text.encode())


def _base64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _base64url(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


#: Each way of writing a key, by name.
ENCODINGS: dict[str, Callable[[str], str]] = {
    "plain": lambda text: text,
    "spaced": _spaced,
    "separated": _separated,
    "upper": str.upper,
    "mixed case": _mixed_case,
    "reversed": lambda text: text[::-1],
    "percent": _percent,
    "percent, some": _percent_some,
    "html entities": _entities,
    "hex": _hex,
    "hex with colons": _hex_colons,
    "hex escapes": _hex_escapes,
    "base64": _base64,
    "base64url": _base64url,
}
#: Ways that encode the whole of a text (another encoding may go under them).
WHOLE = ("hex", "hex with colons", "base64", "base64url")


def pieces_of(key: str, size: int = PIECE) -> set[str]:
    """Every piece of ``key`` of ``size`` letters and digits, lower-cased, both ways."""
    plain = re.sub(r"[^a-z0-9]", "", key.lower())
    found = {plain[i : i + size] for i in range(len(plain) - size + 1)}
    return found | {piece[::-1] for piece in found}


def leaks(text: str, key: str, depth: int = 2, size: int = PIECE) -> list[str]:
    """The pieces of ``key`` (``size`` long) that ``text`` still holds, read in every way above.

    In a long text full of random ids (run ids, nonces) a decoding may show a short piece by
    chance: there, look for longer pieces (8 characters: about one chance in 10^12 a window).
    """
    pieces = pieces_of(key, size)
    return sorted({piece for view in _views(text, depth) for piece in pieces if piece in view})


def _views(text: str, depth: int) -> list[str]:
    decoded = [text, urllib.parse.unquote(text), html.unescape(text)]
    decoded.append(re.sub(r"\\x([0-9a-fA-F]{2})", lambda m: chr(int(m[1], 16)), text))
    if depth:
        for view in list(decoded):
            for run in re.findall(r"[A-Za-z0-9+/_=-]{8,}", view):
                decoded.extend(v for raw in _base64_decodings(run) for v in _views(raw, depth - 1))
            for run in re.findall(r"(?:(?:\\x|0x)?[0-9A-Fa-f]{2}[\s:,._-]*){4,}", view):
                digits = re.sub(r"\\x|0x|[^0-9A-Fa-f]", "", run)
                for offset in (0, 1):
                    part = digits[offset:][: (len(digits) - offset) // 2 * 2]
                    decoded.extend(_views(bytes.fromhex(part).decode("latin-1"), depth - 1))
    return [re.sub(r"[^a-z0-9]", "", view.lower()) for view in decoded]


def _base64_decodings(run: str) -> list[str]:
    out = []
    body = run.rstrip("=")
    for offset in range(4):
        part = body[offset:]
        if len(part) % 4 == 1:
            part = part[:-1]
        for alt in (b"+/", b"-_"):
            try:
                raw = base64.b64decode(part + "=" * (-len(part) % 4), altchars=alt)
            except (binascii.Error, ValueError):
                continue
            out.append(raw.decode("latin-1"))
    return out
