/**
 * Code in the side panel, readable at its default width: each line wraps
 * between tokens (after `.`, `,`, `(`, `=` ...; a token longer than the whole
 * width breaks only then), and a wrapped line's continuation is indented
 * past the line's own indentation, so it never reads as a line of its own.
 * The text is unchanged (Copy and the tests read it as it was).
 */

/**
 * Where a line of code may wrap besides its spaces: after an operator or an
 * opening bracket, unless what follows closes or goes on with punctuation;
 * and before an attribute's name (`df.|mean`), never inside a number.
 */
const BREAK_AFTER =
  /(?<=[,([{=:;+\-*/%<>|&])(?=[^\s.,)\]}:;])|(?<=[\w)\]}'"]\.)(?=[A-Za-z_])/g;

/**
 * How much deeper than its line a wrapped continuation starts (in `ch`).
 */
const CONTINUATION = 4;

/**
 * The pieces of `text` with the places a line may wrap between them.
 */
export function breakable(text: string): string[] {
  const pieces: string[] = [];
  let from = 0;
  for (const at of breaks(text)) {
    pieces.push(text.slice(from, at));
    from = at;
  }
  pieces.push(text.slice(from));
  return pieces;
}

/**
 * The offsets in `text` where a line may wrap (before that character).
 */
function breaks(text: string): number[] {
  return Array.from(text.matchAll(BREAK_AFTER), match => match.index);
}

/**
 * The hanging indent of a line that starts with `indent` characters of
 * indentation (markers and spaces): CSS for its element.
 */
export function hangingIndent(indent: number): {
  paddingLeft: string;
  textIndent: string;
} {
  const hang = indent + CONTINUATION;
  return { paddingLeft: `${hang}ch`, textIndent: `-${hang}ch` };
}

/**
 * Lay out every `pre` under `root` as wrapping code: one block per line
 * (with its hanging indent) and a break opportunity (`<wbr>`) between
 * tokens. The highlighting spans are kept (cloned per line).
 */
export function wrapCode(root: HTMLElement): void {
  for (const pre of Array.from(root.querySelectorAll('pre'))) {
    const code = pre.querySelector('code') ?? pre;
    Private.splitLines(code);
    pre.classList.add('jp-jupyter-ci-wrapped');
  }
}

namespace Private {
  /**
   * Replace `code`'s content by one block per line, each holding clones of
   * the highlighting elements its text was in.
   */
  export function splitLines(code: Element): void {
    const lines: HTMLElement[] = [];
    let line = newLine(lines);
    const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
    const texts: Text[] = [];
    while (walker.nextNode()) {
      texts.push(walker.currentNode as Text);
    }
    // Where to wrap is decided on the whole text: a token's highlighting
    // spans do not hide a place between tokens.
    const wraps = new Set(breaks(code.textContent ?? ''));
    let offset = 0;
    for (const text of texts) {
      const chain = ancestors(text, code);
      const pieces = text.data.split(/(\n)/);
      for (const piece of pieces) {
        if (piece === '') {
          continue;
        }
        if (piece === '\n') {
          line.appendChild(document.createTextNode('\n'));
          line = newLine(lines);
        } else {
          line.appendChild(wrapped(piece, offset, wraps, chain));
        }
        offset += piece.length;
      }
    }
    if (!line.textContent) {
      lines.pop();
    }
    for (const block of lines) {
      const leading = /^[ \t]*/.exec(block.textContent ?? '')![0].length;
      Object.assign(block.style, hangingIndent(leading));
    }
    code.replaceChildren(...lines);
  }

  function newLine(lines: HTMLElement[]): HTMLElement {
    const line = document.createElement('span');
    line.className = 'jp-jupyter-ci-code-line';
    lines.push(line);
    return line;
  }

  /**
   * The elements between `node` and `root`, outermost first.
   */
  function ancestors(node: Node, root: Element): Element[] {
    const chain: Element[] = [];
    for (
      let at = node.parentElement;
      at && at !== root;
      at = at.parentElement
    ) {
      chain.unshift(at);
    }
    return chain;
  }

  /**
   * `text` (at `offset` in the code) inside shallow clones of `chain`, with a
   * `<wbr>` at each of the `wraps` offsets it holds.
   */
  function wrapped(
    text: string,
    offset: number,
    wraps: Set<number>,
    chain: Element[]
  ): Node {
    const inner = document.createDocumentFragment();
    let from = 0;
    for (let at = 0; at <= text.length; at++) {
      if (wraps.has(offset + at) && at < text.length) {
        if (at > from) {
          inner.appendChild(document.createTextNode(text.slice(from, at)));
        }
        inner.appendChild(document.createElement('wbr'));
        from = at;
      }
    }
    inner.appendChild(document.createTextNode(text.slice(from)));
    let node: Node = inner;
    for (const element of [...chain].reverse()) {
      const clone = element.cloneNode(false);
      clone.appendChild(node);
      node = clone;
    }
    return node;
  }
}
