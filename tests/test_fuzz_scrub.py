"""The scrubber, fuzzed: any piece of a key, written any of the ways a provider's error or an
attacker may write it (spaced out, with separators, in any case, reversed, percent-encoded,
as HTML entities or backslash escapes, in hex or base64, one encoding under another), inside
any text, leaves no piece of the key that the standard library's decoders can read back
(``tests/key_echoes.py``). The profiles are in ``tests/conftest.py``."""

from __future__ import annotations

import string
import time

from hypothesis import example, given
from hypothesis import strategies as st

from jupyter_ci.models.scrub import MASK, scrub

from .key_echoes import ENCODINGS, WHOLE, leaks

KEYS = st.text(string.ascii_letters + string.digits, min_size=24, max_size=48).map(
    lambda body: "sk-proj-" + body
)
#: An encoding, alone or with another under one that encodes the whole (two deep at most).
CHAINS = st.one_of(
    st.sampled_from(sorted(ENCODINGS)).map(lambda name: (name,)),
    st.tuples(st.sampled_from(WHOLE), st.sampled_from(sorted(ENCODINGS))),
)


@given(
    key=KEYS,
    cut=st.tuples(st.integers(0, 8), st.integers(0, 8)),  # at least 8 characters left
    chain=CHAINS,
    before=st.text(max_size=30),
    after=st.text(max_size=30),
)
@example(
    key="sk-proj-q7RwX2vLm9TzB4nKc8YpD1sFh6GjA3uE5oWi0eZx",
    cut=(0, 0),
    chain=("base64", "html entities"),
    before="Incorrect API key provided: ",
    after=". You can find your API key at https://platform.openai.com/account/api-keys.",
)
def test_no_piece_of_a_key_survives_in_any_writing(
    key: str, cut: tuple[int, int], chain: tuple[str, ...], before: str, after: str
) -> None:
    body = key[len("sk-proj-") :]
    fragment = body[cut[0] : len(body) - cut[1]]
    echo = fragment
    for name in reversed(chain):
        echo = ENCODINGS[name](echo)
    cleaned = scrub(before + echo + after, [key])
    assert leaks(cleaned, key) == [], (chain, echo, cleaned)
    assert echo not in cleaned
    assert MASK in cleaned


@given(st.text(max_size=200))
def test_text_without_the_key_is_left_alone(text: str) -> None:
    """A key of characters the text cannot hold: nothing is masked but key shapes."""
    key = "sk-" + "\U0001f511" * 3 + "q7RwX2vLm9Tz"
    if "sk-" in text or "*" * 3 in text or "bearer" in text.lower() or "AIza" in text:
        return
    assert scrub(text, [key]) == text


def test_long_runs_are_scrubbed_quickly() -> None:
    """200,000 characters of one word, or of hex, in well under the time a quadratic pattern
    took (minutes): scrubbing runs on the server's event loop."""
    key = "sk-proj-q7RwX2vLm9TzB4nKc8YpD1sFh6GjA3uE5oWi0eZx"
    for text in ("x" * 200_000, "a" * 100_000 + "***" + "b" * 100_000, "0123456789abcdef" * 12_500):
        started = time.monotonic()
        scrub(text, [key])
        assert time.monotonic() - started < 20, text[:20]
