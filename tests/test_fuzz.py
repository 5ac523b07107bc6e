"""The parsers, fuzzed: what a model, a kernel, a user or a file name may hand them.

Each property says what must hold for every input (never an unexpected exception; the caps
kept; the same answer however a stream is cut), on inputs hypothesis makes and shrinks. The
profiles are in ``tests/conftest.py``: by default the same 300 examples a test on every run
(well under a minute in all); ``HYPOTHESIS_PROFILE=explore`` looks much further. The
dispatcher's fuzzing, which needs a real server, is in ``tests/lab/test_fuzz_dispatch.py``.
"""

from __future__ import annotations

import os
import string
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from jupyter_ci.agent.digest import digest_outputs
from jupyter_ci.agent.extract import extract_code
from jupyter_ci.agent.streaming import FenceStream, code_pieces
from jupyter_ci.arguments import OptionsError
from jupyter_ci.magics import parse_line
from jupyter_ci.server.attachments import AttachmentError, resolve

#: Text with what replies are made of: fences, tags, JSON braces, newlines, odd characters.
PIECES = st.sampled_from(
    [
        "```",
        "```python\n",
        "```py\n",
        "```output\n",
        "~~~\n",
        "\n",
        "\r\n",
        "    ",
        "<think>",
        "</think>",
        "<tool_call>",
        "</tool_call>",
        '{"code": "x = 1"}',
        '{"name": "run_python", "arguments": {"code": "print(1)"}}',
        "Output:\n",
        "x = 1",
        "print(x)",
        "def f():\n    return 1\n",
        "import pandas as pd",
        "Here is the code:",
        "\x00",
        "\u202e",
        "日本",
    ]
)
REPLIES = st.lists(st.one_of(PIECES, st.text(max_size=20)), max_size=30).map("".join)


@given(REPLIES)
@example("```python\nx = 1\n")  # a fence left open
@example("<think>```python\nhidden()\n```</think>")
def test_code_extraction_takes_any_reply(reply: str) -> None:
    found = extract_code(reply)
    assert found.code is None or found.code.strip()
    assert isinstance(found.prose, str)
    if found.code is not None:
        # The code is taken from the reply, not invented: each of its lines is in the reply, or
        # came out of the JSON of a tool call or reply object (which may hold escapes).
        # (Thinking sections are taken out first, which may join what was around them.)
        unescaped = reply.replace("\r\n", "\n")
        escaped = any(mark in reply for mark in ('"code"', "<tool_call>", "<think>"))
        assert escaped or all(line in unescaped for line in found.code.split("\n"))


CODE_LINES = st.lists(
    st.text(alphabet=string.ascii_letters + string.digits + " =()+-*/_.,'\"#:[]", max_size=30)
    .filter(lambda line: not line.lstrip().startswith(("```", "~~~")))
    .map(str.rstrip),
    min_size=1,
    max_size=12,
)


@given(CODE_LINES, st.sampled_from(["python", "py", "", "python3"]))
def test_a_fenced_block_gives_its_code_back(lines: list[str], tag: str) -> None:
    code = "\n".join(lines).strip("\n")
    if not code.strip():
        return
    found = extract_code(f"Some words.\n```{tag}\n{code}\n```\nMore words.")
    # As the cell gets it: the common indentation and the blank edges go.
    assert found.code == textwrap.dedent(code).strip("\n").rstrip()
    assert "Some words." in found.prose


@given(REPLIES, st.lists(st.integers(min_value=0, max_value=400), max_size=12))
def test_the_fence_stream_is_the_same_however_the_reply_is_cut(reply: str, cuts: list[int]) -> None:
    def follow(chunks: list[str]) -> tuple[str, str, str]:
        stream = FenceStream()
        pieces = [piece for chunk in chunks for piece in stream.feed(chunk)]
        pieces += stream.finish()
        prose = "".join(text for part, text in pieces if part == "prose")
        return prose, code_pieces(pieces), stream.code

    points = sorted({min(cut, len(reply)) for cut in cuts})
    chunks = [reply[a:b] for a, b in zip([0, *points], [*points, len(reply)], strict=True)]
    whole = follow([reply])
    assert follow(chunks) == whole
    # What streamed into the cell is the stream's code, and never holds a fence line.
    assert whole[1] == whole[2]
    # (A line ends at "\n" only, as for the code extraction: a lone "\r" is in the line.)
    assert not any(line.strip() in ("```", "~~~") for line in whole[2].split("\n"))


TEXT = st.text(max_size=300)
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=10,
)
MIMES = st.sampled_from(
    [
        "text/plain",
        "text/html",
        "text/markdown",
        "image/png",
        "image/jpeg",
        "image/svg+xml",
        "application/json",
        "application/vnd.jupyter.widget-view+json",
        "application/x-weird",
    ]
)
BUNDLES = st.dictionaries(MIMES, st.one_of(TEXT, st.lists(TEXT, max_size=3), JSONISH), max_size=4)
OUTPUTS = st.one_of(
    st.fixed_dictionaries(
        {"output_type": st.just("stream"), "name": st.sampled_from(["stdout", "stderr"])},
        optional={"text": st.one_of(TEXT, st.lists(TEXT, max_size=3), JSONISH)},
    ),
    st.fixed_dictionaries(
        {"output_type": st.sampled_from(["display_data", "execute_result", "update_display_data"])},
        optional={"data": st.one_of(BUNDLES, JSONISH), "metadata": JSONISH},
    ),
    st.fixed_dictionaries(
        {"output_type": st.just("error")},
        optional={
            "ename": st.one_of(TEXT, JSONISH),
            "evalue": st.one_of(TEXT, JSONISH),
            "traceback": st.one_of(st.lists(TEXT, max_size=5), JSONISH),
        },
    ),
    st.dictionaries(TEXT, JSONISH, max_size=3),
)


@given(st.lists(OUTPUTS, max_size=6), st.integers(min_value=200, max_value=5000), st.booleans())
def test_the_digest_takes_any_outputs_and_keeps_its_cap(
    outputs: list[dict[str, Any]], max_chars: int, vision: bool
) -> None:
    digest = digest_outputs(outputs, max_chars=max_chars, vision=vision)
    assert isinstance(digest.text, str)
    assert len(digest.text) <= max_chars
    assert len(digest.images) <= 2


#: Option tokens of %%ci and what may follow them.
OPTION_TOKENS = st.sampled_from(
    [
        "--model",
        "--mode",
        "--max-attempts",
        "--max-attempts=3",
        "--timeout",
        "--no-run",
        "--review",
        "--regenerate",
        "--progress",
        "--progress=text",
        "--share-outputs",
        "--no-share-outputs",
        "--",
        "-m",
        "--unknown",
        "-",
        "'quoted words'",
        '"unclosed',
        "3",
        "abc",
        "\t",
        "日本",
    ]
)
LINES = st.lists(st.one_of(OPTION_TOKENS, st.text(max_size=10)), max_size=8).map(" ".join)


@given(LINES)
def test_the_option_parser_answers_any_line(line: str) -> None:
    refusal: str | None
    try:
        given_options, progress, prompt = parse_line(line)
    except OptionsError as err:
        refusal = str(err)
    else:
        refusal = None
    if refusal is not None:
        assert refusal  # says what was wrong
        return
    assert isinstance(given_options, dict)
    assert progress is None or isinstance(progress, str)
    assert isinstance(prompt, str)
    # The prompt is the end of the line, without the white space around it.
    assert prompt == prompt.strip()
    assert line.rstrip().endswith(prompt)


@given(st.text(min_size=1, max_size=60).filter(lambda p: not p.startswith(("-", " ", "\t"))))
def test_a_prompt_after_the_options_is_kept_verbatim(prompt: str) -> None:
    if prompt.strip() != prompt or "--" in prompt.split()[:1]:
        return
    given_options, _, parsed = parse_line(f"--max-attempts 2 -- {prompt}")
    assert given_options == {"max_attempts": "2"}
    assert parsed == prompt


@pytest.fixture(scope="module")
def attachment_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("attachments")
    root = base / "root"
    (root / "data").mkdir(parents=True)
    (root / "data" / "a.csv").write_text("a,b\n1,2\n")
    (root / "top.txt").write_text("top")
    (base / "secret.txt").write_text("outside")
    os.symlink(base / "secret.txt", root / "link_out.txt")
    os.symlink(root / "top.txt", root / "data" / "link_in.txt")
    return root


PATH_PARTS = st.sampled_from(
    ["data", "a.csv", "top.txt", "..", ".", "", "/", "secret.txt", "link_out.txt", "link_in.txt"]
)
PATHS = st.one_of(
    st.lists(PATH_PARTS, max_size=6).map("/".join),
    st.text(max_size=40),
    st.text(max_size=5).map(lambda s: s + "\x00"),
    st.just("x" * 5000),
)


@given(PATHS)
@example("../secret.txt")
@example("link_out.txt")
@example("data/../../secret.txt")
def test_an_attachment_path_resolves_inside_the_root_or_is_refused(
    attachment_root: Path, path: str
) -> None:
    refusal: str | None
    try:
        target = resolve(attachment_root, path)
    except AttachmentError as err:
        refusal = str(err)
    else:
        refusal = None
    if refusal is not None:
        assert refusal  # says why
        return
    root = attachment_root.resolve()
    assert root in target.parents
    assert target.is_file()
    assert target.read_text() != "outside"
