"""Keep keys out of messages: provider errors sometimes quote the key they refused.

Anything shaped like a key is masked, and so is every stretch of text that repeats a piece of a
known secret at least :data:`MIN_FRAGMENT` characters long, however it is written:

- in any letter case, forwards or backwards, with a few characters cut at either end;
- spaced out or with separators between its characters (``s-k-_-p.r o j``), which are left out
  of the key and of the text before they are compared;
- escaped character by character: percent-encoded (``%73%6B``), HTML entities (``&#115;``,
  ``&#x6b;``, ``&amp;``), backslash escapes (``\\x73``, ``\\u006b``), mixed with plain characters;
- encoded as a whole: base64 (standard or URL-safe, at any alignment) or hex (with or without
  separators), decoded and checked again, twice deep (base64 of hex, ...).

What is masked is the original text's span that carries the piece: the characters from the
piece's first to its last, separators and escapes included, or the encoded characters its bytes
were decoded from.
"""

from __future__ import annotations

import base64
import binascii
import functools
import html
import re
from collections.abc import Callable, Iterable

# Common shapes of API keys (OpenAI, Anthropic, Google, generic bearer tokens).
_KEY_PATTERNS = re.compile(
    r"(sk-[A-Za-z0-9_\-]{8,}|sk-ant-[A-Za-z0-9_\-]{8,}|AIza[0-9A-Za-z_\-]{20,}"
    r"|(?i:bearer)\s+[A-Za-z0-9._\-]{12,})"
)
#: The stars of a key masked as providers print it (sk-ab****wxyz), with the characters around
#: them found by :func:`_starred` (one pattern for both took time quadratic in a long word).
_STARS = re.compile(r"\*{3,}")
_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
#: The shortest piece of a secret that is masked wherever it appears.
MIN_FRAGMENT = 6
MASK = "[key]"
#: How many encodings deep a piece is looked for (base64 of hex of the key: 2).
MAX_DEPTH = 2

#: Characters left out before comparing: whitespace, and what people and programs put between
#: characters (a key's own dashes and underscores go too, from the key as from the text).
_SEPARATORS = frozenset(" \t\r\n\f\v-_.,:;/|'\"`+*~^=()[]{}<>")
_DROPPED = {ord(char): None for char in _SEPARATORS}
#: One escaped character: %XX, an HTML character reference, \xXX, \uXXXX.
_ESCAPE = re.compile(
    r"%(?P<pct>[0-9A-Fa-f]{2})"
    r"|&(?P<ent>#[0-9]{1,7};?|#[xX][0-9A-Fa-f]{1,6};?|[A-Za-z][A-Za-z0-9]{1,31};)"
    r"|\\(?:x(?P<hx>[0-9A-Fa-f]{2})|u(?P<u4>[0-9A-Fa-f]{4})|U(?P<u8>[0-9A-Fa-f]{8}))"
)
#: Runs that may be base64, in either alphabet (a key piece of 6 characters is 8 of base64).
_BASE64_RUNS = (
    (re.compile(r"[A-Za-z0-9+/]{8,}={0,2}"), b"+/"),
    (re.compile(r"[A-Za-z0-9_-]{8,}={0,2}"), b"-_"),
)
#: Runs that may be hex bytes, with separators or prefixes between them.
_HEX = re.compile(r"(?:(?:\\x|0x|%)?[0-9A-Fa-f]{2}[\s:,._-]*){6,}")
_HEX_DIGIT = re.compile(r"\\x|0x|%|([0-9A-Fa-f])")


def scrub(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with anything shaped like a key, and every piece of a secret (at least
    :data:`MIN_FRAGMENT` characters, however written: see the module), replaced by ``[key]``."""
    text = _KEY_PATTERNS.sub(MASK, text)
    pieces = _pieces(secret for secret in secrets if secret)
    covered = bytearray(len(text))
    spans = _starred(text)
    if pieces:
        spans += _spans(text, pieces, MAX_DEPTH)
    if not spans:
        return text
    for start, end in spans:
        covered[start:end] = b"\x01" * (end - start)
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


def _spans(text: str, pieces: frozenset[str], depth: int) -> list[tuple[int, int]]:
    """The spans of ``text`` that carry a piece of a secret, written any of the ways above."""
    spans = _plain_spans(text, pieces)
    if depth:
        for run_start, decoded, origin in _decodings(text):
            for start, end in _spans(decoded, pieces, depth - 1):
                # The characters of the run that the piece's bytes were decoded from.
                spans.append((run_start + origin(start)[0], run_start + origin(end - 1)[1]))
    return spans


#: Where in its run a decoded character came from: its index → the run's span.
_Origin = Callable[[int], tuple[int, int]]


def _decodings(text: str) -> list[tuple[int, str, _Origin]]:
    """What base64 and hex runs of ``text`` decode to: each run's start, the decoded text, and
    where in the run each decoded character came from."""
    found: list[tuple[int, str, _Origin]] = []
    for pattern, alphabet in _BASE64_RUNS:
        for match in pattern.finditer(text):
            found.extend((match.start(), *decoded) for decoded in _from_base64(match[0], alphabet))
    for match in _HEX.finditer(text):
        found.extend((match.start(), *decoded) for decoded in _from_hex(match[0]))
    return found


def _starred(text: str) -> list[tuple[int, int]]:
    """Keys masked as providers print them: three stars or more, with the key's characters on
    either side."""
    spans: list[tuple[int, int]] = []
    for match in _STARS.finditer(text):
        start, end = match.span()
        while start and text[start - 1] in _KEY_CHARS:
            start -= 1
        while end < len(text) and text[end] in _KEY_CHARS:
            end += 1
        spans.append((start, end))
    return spans


def _plain_spans(text: str, pieces: frozenset[str]) -> list[tuple[int, int]]:
    """Pieces in the normalised text (escapes decoded, separators left out, case folded)."""
    # First at the speed of the library (most texts hold no piece), then character by character.
    folded = _ESCAPE.sub(_unescaped, text).casefold().translate(_DROPPED)
    if not _finder(pieces).search(folded):
        return []
    chars, starts, ends = _normalised(text)
    spans: list[tuple[int, int]] = []
    for index in range(len(chars) - MIN_FRAGMENT + 1):
        if "".join(chars[index : index + MIN_FRAGMENT]) in pieces:
            spans.append((starts[index], ends[index + MIN_FRAGMENT - 1]))
    return spans


def _normalised(text: str) -> tuple[list[str], list[int], list[int]]:
    """The characters of ``text`` as compared, each with the span of the text it came from."""
    chars: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    index = 0
    while index < len(text):
        match = _ESCAPE.match(text, index)
        if match:
            char = _unescaped(match)
            end = match.end()
        else:
            char, end = text[index], index + 1
        for folded in char.casefold():
            if folded not in _SEPARATORS:
                chars.append(folded)
                starts.append(index)
                ends.append(end)
        index = end
    return chars, starts, ends


def _unescaped(match: re.Match[str]) -> str:
    """The character one escape stands for ("" when it stands for none)."""
    if match["ent"] is not None:
        return html.unescape("&" + match["ent"])
    code = match["pct"] or match["hx"] or match["u4"] or match["u8"]
    try:
        return chr(int(code, 16))
    except (ValueError, OverflowError):
        return ""


def _from_base64(run: str, alphabet: bytes) -> list[tuple[str, _Origin]]:
    """``run`` decoded as base64 from each of its first four characters (the run may begin
    before the encoding does)."""
    decoded: list[tuple[str, _Origin]] = []
    body = run.rstrip("=")
    for offset in range(4):
        part = body[offset:]
        if len(part) % 4 == 1:
            part = part[:-1]
        try:
            raw = base64.b64decode(part + "=" * (-len(part) % 4), altchars=alphabet, validate=True)
        except (binascii.Error, ValueError):
            continue
        decoded.append((raw.decode("latin-1"), functools.partial(_base64_origin, offset)))
    return decoded


def _base64_origin(offset: int, index: int) -> tuple[int, int]:
    """Byte 3g+i of a decoding is made of characters 4g+i and 4g+i+1."""
    first = offset + index // 3 * 4 + index % 3
    return first, first + 2


def _from_hex(run: str) -> list[tuple[str, _Origin]]:
    """``run``'s hex digits decoded as bytes, from the first digit and from the second."""
    positions = [m.start() for m in _HEX_DIGIT.finditer(run) if m[1] is not None]
    digits = "".join(run[index] for index in positions)
    decoded: list[tuple[str, _Origin]] = []
    for offset in (0, 1):
        count = (len(digits) - offset) // 2
        if count:
            raw = bytes.fromhex(digits[offset : offset + 2 * count])
            origin = functools.partial(_hex_origin, positions, offset)
            decoded.append((raw.decode("latin-1"), origin))
    return decoded


def _hex_origin(positions: list[int], offset: int, index: int) -> tuple[int, int]:
    """Byte k of a decoding is made of the digits ``offset + 2k`` and the next."""
    return positions[offset + 2 * index], positions[offset + 2 * index + 1] + 1


@functools.lru_cache(maxsize=8)
def _finder(pieces: frozenset[str]) -> re.Pattern[str]:
    """One pattern that finds any of ``pieces``."""
    return re.compile("|".join(re.escape(piece) for piece in sorted(pieces)))


def _pieces(secrets: Iterable[str]) -> frozenset[str]:
    """Every :data:`MIN_FRAGMENT`-long piece of each secret, normalised as the text is,
    forwards and back."""
    pieces: set[str] = set()
    for secret in secrets:
        plain = "".join(c for c in secret.casefold() if c not in _SEPARATORS)
        for form in (plain, plain[::-1]):
            if len(form) < MIN_FRAGMENT:
                pieces.add(form)  # too short to cut: only the whole of it, by the pattern above
                continue
            pieces.update(form[i : i + MIN_FRAGMENT] for i in range(len(form) - MIN_FRAGMENT + 1))
    return frozenset(piece for piece in pieces if len(piece) == MIN_FRAGMENT)
