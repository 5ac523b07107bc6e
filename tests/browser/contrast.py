"""The contrast of every text jupyter-ci draws, measured in the page as WCAG defines it.

:func:`measure` finds each visible element jupyter-ci draws (under an element with a
``jp-jupyter-ci``/``jupyter-ci`` class or a ``data-testid`` starting ``jupyter-ci``) that shows
text of its own (a text node, a form control's value or placeholder, a list item's number) and
computes the WCAG contrast ratio of its computed text colour against its effective background:
the first opaque background among it and its ancestors, with every translucent one above it
composited in (alpha), and the text colour composited over that. Body text needs 4.5:1; large
text (24 px, or 18.66 px bold) 3:1.

A generated (or fixed) cell only carries jupyter-ci's marker classes
(``jp-jupyter-ci-generated``, ``jp-jupyter-ci-fixed``, ``jp-jupyter-ci-streaming``, and while it
waits for review ``jp-jupyter-ci-awaitingReview``, ``jp-jupyter-ci-staleOutputs``): its editor
and outputs are JupyterLab's, measured only where jupyter-ci draws inside it (the badge and the
diff). Likewise the colours of highlighted code in the panel's Markdown (``span`` tokens inside a
``pre``) are JupyterLab's editor theme, the same as in every code cell (its light theme's
brackets, #997 on white, are 2.9:1): the code block's own text and background are measured, its
tokens' colours are not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: JavaScript: every text of jupyter-ci's elements with its colours and contrast ratio.
_MEASURE = r"""() => {
  const MARKERS = [
    'jp-jupyter-ci-generated', 'jp-jupyter-ci-fixed', 'jp-jupyter-ci-streaming',
    'jp-jupyter-ci-awaitingReview', 'jp-jupyter-ci-staleOutputs'
  ];
  const parse = (value) => {
    if (!value || value === 'transparent') { return [0, 0, 0, 0]; }
    let m = value.match(/^rgba?\(([^)]+)\)$/);
    if (m) {
      const parts = m[1].split(/[\s,/]+/).filter(Boolean).map(Number);
      return [parts[0], parts[1], parts[2], parts.length > 3 ? parts[3] : 1];
    }
    // color-mix() and friends compute to color(srgb r g b / a) with channels in 0..1.
    m = value.match(/^color\(srgb\s+([^)]+)\)$/);
    if (m) {
      const [rgb, alpha] = m[1].split('/');
      const parts = rgb.trim().split(/\s+/).map(Number);
      return [parts[0] * 255, parts[1] * 255, parts[2] * 255,
              alpha === undefined ? 1 : Number(alpha)];
    }
    throw new Error(`unparsed colour ${value}`);
  };
  const over = (top, bottom) => {
    const a = top[3];
    return [0, 1, 2].map(i => top[i] * a + bottom[i] * (1 - a)).concat([1]);
  };
  const luminance = (c) => {
    const [r, g, b] = c.slice(0, 3).map(v => {
      const s = v / 255;
      return s <= 0.03928 ? s / 12.92 : Math.pow((s + 0.055) / 1.055, 2.4);
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const ratio = (a, b) => {
    const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
    return (hi + 0.05) / (lo + 0.05);
  };
  const background = (element) => {
    const layers = [];
    let opacity = 1;
    for (let node = element; node; node = node.parentElement) {
      const style = getComputedStyle(node);
      opacity *= Number(style.opacity);
      const colour = parse(style.backgroundColor);
      if (colour[3] > 0) {
        layers.push(colour);
        if (colour[3] >= 1) { break; }
      }
    }
    let result = [255, 255, 255, 1];  // the canvas, if nothing is opaque
    for (const layer of layers.reverse()) { result = over(layer, result); }
    return { colour: result, opacity };
  };
  const ours = (element) => {
    for (let node = element; node; node = node.parentElement) {
      if (node.dataset && (node.dataset.testid || '').startsWith('jupyter-ci')) { return true; }
      const named = Array.from(node.classList || []).filter(
        c => c.includes('jupyter-ci') && !MARKERS.includes(c));
      if (named.length) { return true; }
    }
    return false;
  };
  const ownText = (element) => {
    const tag = element.tagName;
    if (tag === 'TEXTAREA' || (tag === 'INPUT' && element.type === 'text')) {
      return element.value ? { text: element.value, pseudo: null }
        : element.placeholder ? { text: element.placeholder, pseudo: '::placeholder' } : null;
    }
    if (tag === 'SELECT') {
      const option = element.selectedOptions[0];
      return option && option.text.trim() ? { text: option.text.trim(), pseudo: null } : null;
    }
    if (tag === 'OPTION' || tag === 'SCRIPT' || tag === 'STYLE') { return null; }
    if (tag === 'SPAN' && element.closest('.jp-RenderedMarkdown pre')) { return null; }
    const text = Array.from(element.childNodes)
      .filter(n => n.nodeType === Node.TEXT_NODE).map(n => n.textContent).join('').trim();
    return text ? { text, pseudo: null } : null;
  };
  const describe = (element) => {
    const testid = element.closest('[data-testid^="jupyter-ci"]');
    return [element.tagName.toLowerCase() + (element.className && typeof element.className
      === 'string' ? '.' + element.className.trim().split(/\s+/).join('.') : ''),
      testid ? `in [data-testid=${testid.dataset.testid}]` : ''].join(' ').trim();
  };
  const found = [];
  const measure = (element, text, pseudo, what) => {
    const style = getComputedStyle(element, pseudo);
    const bg = background(element);
    const fg = parse(style.color);
    const shown = over([fg[0], fg[1], fg[2], fg[3] * bg.opacity], bg.colour);
    const size = parseFloat(style.fontSize);
    const bold = Number(style.fontWeight) >= 700;
    const large = size >= 24 || (size >= 18.66 && bold);
    found.push({
      element: what || describe(element),
      text: text.slice(0, 60),
      ratio: Math.round(ratio(shown, bg.colour) * 100) / 100,
      required: large ? 3 : 4.5,
      color: style.color,
      background: `rgb(${bg.colour.slice(0, 3).map(Math.round).join(', ')})`,
    });
  };
  for (const element of document.querySelectorAll('body *')) {
    if (!ours(element)) { continue; }
    if (!element.checkVisibility({ checkOpacity: true, checkVisibilityCSS: true })) { continue; }
    const rect = element.getBoundingClientRect();
    if (rect.width === 0 || rect.height === 0) { continue; }
    const own = ownText(element);
    if (own) { measure(element, own.text, own.pseudo, null); }
    const style = getComputedStyle(element);
    if (style.display === 'list-item' && style.listStyleType !== 'none' &&
        element.parentElement && element.parentElement.tagName === 'OL') {
      measure(element, 'list number', '::marker', `${describe(element)}::marker`);
    }
  }
  return found;
}"""


@dataclass(frozen=True)
class Measured:
    """One text's contrast: where it is, what it says, its ratio and what it needs."""

    element: str
    text: str
    ratio: float
    required: float
    color: str
    background: str

    def __str__(self) -> str:
        return (
            f"{self.ratio:.2f}:1 (needs {self.required}) {self.color} on {self.background}: "
            f"{self.element} {self.text!r}"
        )


def measure(page: Any) -> list[Measured]:
    """The contrast of every visible text jupyter-ci draws in the page now."""
    return [Measured(**item) for item in page.evaluate(_MEASURE)]


def low_contrast(measured: list[Measured]) -> list[Measured]:
    """The texts below their required ratio."""
    return [m for m in measured if m.ratio < m.required]
