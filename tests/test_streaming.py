"""Following a streamed reply: code lines go into the cell as they complete, the rest is prose,
and what is shown as prose never holds a piece of the cell."""

from __future__ import annotations

import pytest

from jupyter_ci.agent.streaming import FenceStream, Piece, code_pieces


def feed_all(deltas: list[str]) -> tuple[list[Piece], FenceStream]:
    stream = FenceStream()
    pieces = [piece for delta in deltas for piece in stream.feed(delta)]
    pieces += stream.finish()
    return pieces, stream


def by_part(pieces: list[Piece]) -> tuple[str, str]:
    prose = "".join(text for part, text in pieces if part == "prose")
    return prose, code_pieces(pieces)


REPLY = "Here it is.\n```python\nimport math\nprint(math.pi)\n```\nThat prints pi."


@pytest.mark.parametrize("size", [1, 2, 3, 7, len(REPLY)])
def test_the_code_goes_to_the_cell_and_the_rest_is_prose_whatever_the_deltas(size: int) -> None:
    pieces, stream = feed_all([REPLY[i : i + size] for i in range(0, len(REPLY), size)])
    prose, code = by_part(pieces)
    assert code == stream.code == "import math\nprint(math.pi)"
    assert prose == "Here it is.\nThat prints pi."  # the fence lines are neither
    assert not stream.in_code  # the fence closed


def test_tokens_as_real_models_send_them_split_the_fence() -> None:
    deltas = ["Sure", ".\n", "``", "`", "python", "\n", "x", " = ", "1", "\n", "```", "\nDone."]
    pieces, _ = feed_all(deltas)
    assert by_part(pieces) == ("Sure.\nDone.", "x = 1")
    # Prose streams as it comes; only a line that may become a fence waits for its end.
    assert pieces[0] == ("prose", "Sure")


def test_an_unclosed_block_ends_with_its_last_line() -> None:
    pieces, stream = feed_all(["```\nx = 1\ny = 2"])
    assert stream.code == "x = 1\ny = 2"
    assert [text for part, text in pieces if part == "code"] == ["x = 1", "\ny = 2"]


def test_only_the_first_python_block_streams_and_blank_lines_inside_are_kept() -> None:
    pieces, stream = feed_all(["```py\na = 1\n\nb = 2\n```\n```python\nc = 3\n```\n"])
    assert stream.code == "a = 1\n\nb = 2"
    assert by_part(pieces)[0] == "```python\nc = 3\n```\n"  # a later block is prose


def test_another_languages_block_is_prose_and_its_closing_fence_opens_nothing() -> None:
    reply = "Install it:\n```bash\npip install x\n```\nThen:\n```python\nimport x\n```\n"
    pieces, stream = feed_all([reply])
    assert stream.code == "import x"
    assert by_part(pieces)[0] == "Install it:\n```bash\npip install x\n```\nThen:\n"


def test_text_without_a_python_block_streams_no_code() -> None:
    pieces, stream = feed_all(["Just prose.\n", "```text\nnot code\n```\n"])
    assert code_pieces(pieces) == ""
    assert stream.code == ""
