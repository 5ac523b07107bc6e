"""Following a streamed reply: code lines go into the cell as they complete."""

from __future__ import annotations

from jupyter_ci.agent.streaming import FenceStream


def feed_all(pieces: list[str]) -> tuple[list[str], FenceStream]:
    stream = FenceStream()
    out = [stream.feed(piece) for piece in pieces]
    out.append(stream.finish())
    return [piece for piece in out if piece], stream


def test_code_streams_line_by_line_without_a_trailing_newline() -> None:
    reply = "Here it is.\n```python\nimport math\nprint(math.pi)\n```\nThat prints pi."
    pieces = [reply[i : i + 3] for i in range(0, len(reply), 3)]
    out, stream = feed_all(pieces)
    assert "".join(out) == "import math\nprint(math.pi)"
    assert stream.code == "import math\nprint(math.pi)"
    assert not stream.in_code  # the fence closed


def test_an_unclosed_block_ends_with_its_last_line() -> None:
    out, stream = feed_all(["```\nx = 1\ny = 2"])
    assert stream.code == "x = 1\ny = 2"
    assert out == ["x = 1", "\ny = 2"]


def test_only_the_first_block_streams_and_blank_lines_inside_are_kept() -> None:
    _, stream = feed_all(["```py\na = 1\n\nb = 2\n```\n```python\nc = 3\n```\n"])
    assert stream.code == "a = 1\n\nb = 2"


def test_text_without_a_python_block_streams_nothing() -> None:
    out, stream = feed_all(["Just prose.\n", "```text\nnot code\n```\n"])
    assert out == []
    assert stream.code == ""
