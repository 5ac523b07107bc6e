"""The chat panel read at its default width (JupyterLab's 250 px sidebar), as a user sees it: a
long line of code shows whole, wrapped between tokens (never inside one); a new cell waiting for
review shows once; "Insert as Markdown" is offered under the answer only; Copy says "Copied"; a
sent request shows what was attached to it."""

from __future__ import annotations

from typing import Any

from jupyter_ci.testing import Reply, ScriptedModelServer

from .chat import PANEL, ask, by_testid, chat_about_new_notebook, set_theme, wait_run_state
from .lab import Lab, screenshot
from .notebooks import cells, dump, text_of, wait_until

#: A line of code about 880 px wide in the notebook. Each token fits a line of the panel: only a
#: token wider than the panel may break.
LONG_LINE = (
    "petal_length_cm = {'setosa': 1.462, 'versicolor': 4.26, 'virginica': 5.552}"
    ".get(flower_species, float('nan')) * cm_per_unit"
)
CODE = f"flower_species = 'setosa'\ncm_per_unit = 1\n{LONG_LINE}\nprint(petal_length_cm)"
TOKENS = ("petal_length_cm", "flower_species", "versicolor", "cm_per_unit")

#: JavaScript: for an element, whether its content overflows sideways, and for each token the
#: number of lines each occurrence lies on (1 when no line wraps inside it).
_LAYOUT = """([selector, tokens]) => {
  const element = document.querySelector(selector);
  const lines = {};
  const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode;
    for (const token of tokens) {
      let at = node.data.indexOf(token);
      while (at >= 0) {
        const range = document.createRange();
        range.setStart(node, at);
        range.setEnd(node, at + token.length);
        const tops = new Set(Array.from(range.getClientRects(), r => Math.round(r.top)));
        (lines[token] = lines[token] || []).push(tops.size);
        at = node.data.indexOf(token, at + 1);
      }
    }
  }
  return {
    overflow: element.scrollWidth - element.clientWidth,
    width: element.getBoundingClientRect().width,
    lines,
  };
}"""


def layout(page: Any, selector: str) -> dict[str, Any]:
    found: dict[str, Any] = page.evaluate(_LAYOUT, [selector, list(TOKENS)])
    return found


def assert_whole_and_unsplit(found: dict[str, Any]) -> None:
    assert found["overflow"] <= 1, found  # nothing hidden sideways
    assert set(found["lines"]) == set(TOKENS), found
    assert all(count == 1 for counts in found["lines"].values() for count in counts), found


def test_the_panel_at_its_default_width(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    model.set_script(
        [
            Reply.code(CODE, prose="I will look the length up."),
            Reply.text("Setosa petals are **1.462 cm** long on average."),
        ]
    )
    page, path = chat_about_new_notebook(model_context, model_lab, ["data = 1"], clipboard=True)
    panel = page.locator(PANEL)
    assert 240 <= panel.bounding_box()["width"] <= 260  # JupyterLab's default sidebar width
    page.locator(by_testid("jupyter-ci-mode")).select_option("review")
    try:
        # The request goes with the notebook's active cell attached: the sent message says so.
        page.locator(by_testid("jupyter-ci-attach-cells")).click()
        page.locator(by_testid("jupyter-ci-attachments"), has_text="cell [1]").wait_for()
        ask(page, "how long are setosa petals?")
        sent = page.locator(by_testid("jupyter-ci-sent-attachments"))
        sent.wait_for(timeout=30_000)
        assert sent.inner_text().strip() == "cell [1]"
        assert sent.get_attribute("aria-label") == "Attached to this request"

        # The new cell waits for review: its code shows once, in the review card, as code.
        review = page.locator(by_testid("jupyter-ci-review"))
        review.wait_for(timeout=60_000)
        diff = review.locator('[data-testid="jupyter-ci-diff"]')
        assert diff.get_attribute("data-new-cell") == "true"
        assert diff.inner_text().splitlines() == CODE.splitlines()
        listed = page.locator(f"{PANEL} [data-testid='jupyter-ci-run-cell']")
        assert listed.count() == 1
        assert listed.locator("pre").count() == 0
        assert "waits for your review" in listed.inner_text()
        assert_whole_and_unsplit(layout(page, f"{PANEL} [data-testid='jupyter-ci-diff']"))
        screenshot(page, "panel-default-width-review")
        review.get_by_role("button", name="Run this cell").click()
        assert wait_run_state(page, ("done",)) == "done"
        assert "1.462" in text_of(cells(page, path)[1]["outputs"]), dump(page, path)

        # The run's cell now lists its code, whole and wrapped between tokens.
        code = f"{PANEL} [data-testid='jupyter-ci-run-cell'] pre"
        page.locator(
            f"{PANEL} [data-testid='jupyter-ci-run-cell'] .jp-jupyter-ci-markdown"
            "[data-rendered='true']"
        ).wait_for(timeout=30_000)
        assert page.locator(code).text_content().rstrip("\n") == CODE
        assert_whole_and_unsplit(layout(page, code))

        # Insert as Markdown under the answer, not under the line that introduced the code.
        assistant = page.locator(f"{PANEL} [data-role='assistant']")
        wait_until(lambda: assistant.count() == 2, 30, "the intro and the answer")
        offered = [
            assistant.nth(i).locator("[data-testid='jupyter-ci-insert-answer']").count()
            for i in range(2)
        ]
        assert offered == [0, 1], [assistant.nth(i).inner_text() for i in range(2)]

        # Copy says it copied (by keyboard too), then goes back to Copy.
        copy = page.locator(f"{PANEL} [data-testid='jupyter-ci-run-cell']").get_by_role(
            "button", name="Copy this code to the clipboard"
        )
        copy.focus()
        page.keyboard.press("Enter")
        copied = page.locator(f"{PANEL} [data-testid='jupyter-ci-run-cell']").get_by_role(
            "button", name="Copied to the clipboard"
        )
        copied.wait_for(timeout=5_000)
        assert copied.inner_text() == "Copied"
        assert copied.get_attribute("aria-live") == "polite"
        assert page.evaluate("navigator.clipboard.readText()") == CODE
        copy.wait_for(timeout=10_000)
        for theme in ("JupyterLab Dark", "JupyterLab Light"):
            set_theme(page, theme)
            screenshot(page, f"panel-default-width-{theme.split()[-1].lower()}")
    finally:
        page.locator(by_testid("jupyter-ci-mode")).select_option("")
    assert model_context.jupyter_ci_errors == []


def test_the_preview_is_readable_and_keyboard_operable(
    model_context: Any, model_lab: Lab, model: ScriptedModelServer
) -> None:
    model.set_script([Reply.code("total = 2 + 3\nprint(total)"), Reply.text("It is 5.")])
    page, _path = chat_about_new_notebook(model_context, model_lab, ["data = [1, 2, 3]"])
    ask(page, "add two and three")  # an earlier turn: the preview holds more messages
    assert wait_run_state(page, ("done",)) == "done"
    box = page.locator(by_testid("jupyter-ci-input"))
    box.fill("and now times four")
    # The project's instructions: in the system prompt the Preview shows.
    agents = model_lab.root_dir / "AGENTS.md"
    agents.write_text("Keep every cell under ten lines.")
    try:
        opener = page.locator(by_testid("jupyter-ci-preview-button"))
        opener.focus()
        page.keyboard.press("Enter")
        preview = page.locator(by_testid("jupyter-ci-preview"))
        preview.wait_for(timeout=60_000)
    finally:
        agents.unlink()
    # It takes the conversation's place, as tall as the panel allows, focused.
    assert page.locator(by_testid("jupyter-ci-conversation")).is_hidden()
    panel_height = page.locator(PANEL).bounding_box()["height"]
    assert preview.bounding_box()["height"] > panel_height * 0.5, preview.bounding_box()
    assert page.evaluate("document.activeElement.dataset.testid") == "jupyter-ci-preview"
    # Every message open, each with its role and its share of the tokens.
    shown = preview.locator("[data-testid='jupyter-ci-preview-message']")
    assert shown.count() >= 3
    summaries = [shown.nth(i).locator("summary").inner_text() for i in range(shown.count())]
    assert all(shown.nth(i).get_attribute("open") is not None for i in range(shown.count()))
    total = int(page.locator(by_testid("jupyter-ci-preview-tokens")).inner_text().split()[0])
    each = [int(summary.split(" · ")[1].split()[0].replace(",", "")) for summary in summaries]
    assert sum(each) == total, summaries
    assert summaries[0].startswith("system · ")
    assert "From AGENTS.md:\nKeep every cell under ten lines." in shown.first.inner_text()
    assert "and now times four" in shown.last.inner_text()
    assert shown.last.is_visible()
    screenshot(page, "panel-preview")
    # Escape closes it; the conversation and the focus come back.
    page.keyboard.press("Escape")
    preview.wait_for(state="detached", timeout=10_000)
    assert page.locator(by_testid("jupyter-ci-conversation")).is_visible()
    assert page.evaluate("document.activeElement.dataset.testid") == "jupyter-ci-preview-button"
    assert box.input_value() == "and now times four"
    assert len(model.chat_requests) == 2  # the preview sent nothing
    assert model_context.jupyter_ci_errors == []
