import type * as nbformat from '@jupyterlab/nbformat';
import type { PartialJSONObject } from '@lumino/coreutils';

import { inertImage } from './inertMedia';
import { CELL_METADATA_KEY } from './protocol';

/**
 * The answer of a `%%ci` run under its cell: a display output with the
 * model's prose as `text/markdown` (HTML escaped, see `escapeMarkdownHtml`)
 * and the prose itself as `text/plain`, so that a saved notebook shows it in
 * any frontend. Its metadata (`jupyter_ci.answer`) names the run, so that
 * jupyter-ci knows its own output again.
 */
export function answerOutput(
  answer: string,
  runId: string | null
): nbformat.IDisplayData {
  return {
    output_type: 'display_data',
    data: {
      'text/markdown': escapeMarkdownHtml(answer),
      'text/plain': answer
    },
    metadata: {
      [CELL_METADATA_KEY]: { answer: true, run_id: runId }
    }
  };
}

/**
 * The answer an output holds, if it is a `%%ci` answer output.
 */
export function readAnswer(
  output: nbformat.IOutput
): { text: string; runId: string | null } | null {
  if (output.output_type !== 'display_data') {
    return null;
  }
  const mark = (output.metadata as PartialJSONObject | undefined)?.[
    CELL_METADATA_KEY
  ] as { answer?: unknown; run_id?: unknown } | undefined;
  const text = (output as nbformat.IDisplayData).data['text/plain'];
  if (!mark || mark.answer !== true) {
    return null;
  }
  const plain = Array.isArray(text) ? text.join('') : text;
  if (typeof plain !== 'string') {
    return null;
  }
  return {
    text: plain,
    runId: typeof mark.run_id === 'string' ? mark.run_id : null
  };
}

/**
 * Markdown from an untrusted model with its raw HTML made inert, for an
 * output JupyterLab renders as trusted (the `%%ci` cell ran, so its outputs
 * are trusted and their Markdown is not sanitized).
 *
 * The result is built so that no reading of the Markdown can give the
 * model's text a way into the page, whatever the blocks around it:
 * - Fenced code blocks (opened by a fence indented at most three spaces) are
 *   written again as a top-level block with a fence longer than any run of
 *   backticks in the code, which is left as it is (Markdown shows it
 *   literally).
 * - Everywhere else `&`, `<` and `>` become entities, every backtick and any
 *   run of three tildes is escaped (no code span or fence of the model's is
 *   left to be read another way), and a code span within one line becomes
 *   jupyter-ci's own `<code>` element with its text escaped.
 * - An image (inline, or by reference to a definition of the text) is
 *   written as `inertImage`: its URL as a link, never loaded (see
 *   inertMedia.ts); any other `![` reads as text.
 * - A link or link reference definition whose destination has a scheme
 *   other than http, https or mailto (`javascript:`, `data:`, ...), or is
 *   not on its line, loses its syntax and reads as text.
 */
export function escapeMarkdownHtml(markdown: string): string {
  const out: string[] = [];
  const lines = markdown.split('\n');
  const definitions = Private.definitions(lines);
  let block: Private.IBlock | null = null;
  for (const line of lines) {
    if (block) {
      if (Private.closes(line, block)) {
        out.push(...Private.fenced(block));
        block = null;
      } else {
        block.body.push(Private.dedent(line, block.indent));
      }
      continue;
    }
    block = Private.opens(line);
    if (!block) {
      out.push(Private.escapeLine(line, definitions));
    }
  }
  if (block) {
    out.push(...Private.fenced(block)); // a block never closed runs to the end
  }
  return out.join('\n');
}

namespace Private {
  /**
   * A fenced code block of the model's.
   */
  export interface IBlock {
    char: string;
    length: number;
    indent: number;
    info: string;
    body: string[];
  }

  /**
   * The block a line opens, or null.
   */
  export function opens(line: string): IBlock | null {
    const found = /^( {0,3})(`{3,}|~{3,})(.*)$/.exec(line);
    if (!found || (found[2][0] === '`' && found[3].includes('`'))) {
      return null; // a backtick fence's info string holds no backtick
    }
    return {
      char: found[2][0],
      length: found[2].length,
      indent: found[1].length,
      info: found[3],
      body: []
    };
  }

  /**
   * Whether a line closes the block: its fence, then only spaces.
   */
  export function closes(line: string, block: IBlock): boolean {
    const found = /^ {0,3}(`{3,}|~{3,})[ \t]*$/.exec(line);
    return (
      !!found && found[1][0] === block.char && found[1].length >= block.length
    );
  }

  /**
   * A line of an indented block without the fence's indentation.
   */
  export function dedent(line: string, indent: number): string {
    let index = 0;
    while (index < indent && line[index] === ' ') {
      index++;
    }
    return line.slice(index);
  }

  /**
   * The block written again: a top-level fence longer than any run of
   * backticks in its code, with the language name only.
   */
  export function fenced(block: IBlock): string[] {
    const runs = block.body.join('\n').match(/`+/g) ?? [];
    const fence = '`'.repeat(Math.max(3, ...runs.map(run => run.length + 1)));
    const language = (block.info.trim().split(/\s+/)[0] ?? '').replace(
      /[^\w+#.-]/g,
      ''
    );
    return [`${fence}${language}`, ...block.body, fence];
  }

  /**
   * The link reference definitions of the text outside code blocks (in a
   * quote or a list item too): their normalised labels and destinations.
   */
  export function definitions(lines: string[]): Map<string, string> {
    const found = new Map<string, string>();
    let block: IBlock | null = null;
    for (const line of lines) {
      if (block) {
        block = closes(line, block) ? null : block;
        continue;
      }
      block = opens(line);
      const match =
        /^(?:[ \t]*(?:>|[-*+]|\d{1,9}[.)])?[ \t]*)*\[((?:\\.|[^\]\\])+)\]:[ \t]*(<[^<>]*>|\S+)/.exec(
          line
        );
      if (!block && match) {
        const label = normalLabel(match[1]);
        if (!found.has(label)) {
          found.set(label, match[2].replace(/^<(.*)>$/, '$1'));
        }
      }
    }
    return found;
  }

  /**
   * A reference label as Markdown matches it: case and runs of spaces aside.
   */
  function normalLabel(label: string): string {
    return label.trim().replace(/\s+/g, ' ').toLowerCase();
  }

  /**
   * One line outside code blocks (see `escapeMarkdownHtml`).
   */
  export function escapeLine(
    line: string,
    definitions: Map<string, string>
  ): string {
    let result = '';
    let index = 0;
    while (index < line.length) {
      const char = line[index];
      if (char === '!' && line[index + 1] === '[') {
        const image = readImage(line, index, definitions);
        if (image) {
          const label = escapeLine(image.label, definitions);
          result += inertImage(label, image.url);
          index = image.end;
        } else {
          result += '\\!'; // what follows is a link or text, never an image
          index++;
        }
        continue;
      }
      if (char === '\\' && index + 1 < line.length) {
        const next = line[index + 1];
        // `\<` meant a literal `<`: the entity says the same.
        result += ENTITIES[next] ?? `\\${next}`;
        index += 2;
        continue;
      }
      if (char === '`') {
        let end = index;
        while (line[end] === '`') {
          end++;
        }
        const close = closingRun(line, end, end - index);
        if (close === -1) {
          result += '\\`'.repeat(end - index);
          index = end;
        } else {
          result += `<code>${codeText(line.slice(end, close))}</code>`;
          index = close + (end - index);
        }
        continue;
      }
      if (char === '~' && line.startsWith('~~~', index)) {
        let end = index;
        while (line[end] === '~') {
          end++;
        }
        result += '\\~'.repeat(end - index);
        index = end;
        continue;
      }
      result += ENTITIES[char] ?? char;
      index++;
    }
    return defuseLinks(result);
  }

  /**
   * The image that starts at `start` (`![`): its label, its URL (inline, or
   * from a reference definition) and where it ends; null when the syntax
   * does not make an image there (then it reads as text or as a link).
   */
  function readImage(
    line: string,
    start: number,
    definitions: Map<string, string>
  ): { label: string; url: string; end: number } | null {
    const close = matchingBracket(line, start + 1);
    if (close === -1) {
      return null;
    }
    const label = line.slice(start + 2, close);
    const rest = line.slice(close + 1);
    const inline =
      /^\(\s*(?:<([^<>\n]*)>|((?:\\.|[^\s()\\]|\((?:\\.|[^\s()\\])*\))*))(?:\s+(?:"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|\((?:\\.|[^()\\])*\)))?\s*\)/.exec(
        rest
      );
    if (inline) {
      const url = (inline[1] ?? inline[2] ?? '').replace(/\\(.)/g, '$1');
      return { label, url, end: close + 1 + inline[0].length };
    }
    const full = /^\[((?:\\.|[^\]\\])*)\]/.exec(rest);
    const reference = full && full[1].trim() ? full[1] : label;
    const url = definitions.get(normalLabel(reference));
    if (url === undefined) {
      return null;
    }
    return { label, url, end: close + 1 + (full ? full[0].length : 0) };
  }

  /**
   * The index of the `]` that closes the `[` at `open` (brackets nest,
   * backslashes escape), or -1.
   */
  function matchingBracket(line: string, open: number): number {
    let depth = 0;
    for (let index = open; index < line.length; index++) {
      const char = line[index];
      if (char === '\\') {
        index++;
      } else if (char === '[') {
        depth++;
      } else if (char === ']' && --depth === 0) {
        return index;
      }
    }
    return -1;
  }

  /**
   * HTML's characters as entities.
   */
  const ENTITIES: Record<string, string> = {
    '&': '&amp;',
    '<': '&lt;',
    '>': '&gt;'
  };

  /**
   * The start of the next run of exactly `length` backticks at or after
   * `from` (backslashes are literal in a code span), or -1.
   */
  function closingRun(line: string, from: number, length: number): number {
    let index = from;
    while (index < line.length) {
      if (line[index] !== '`') {
        index++;
        continue;
      }
      let end = index;
      while (line[end] === '`') {
        end++;
      }
      if (end - index === length) {
        return index;
      }
      index = end;
    }
    return -1;
  }

  /**
   * A code span's text for jupyter-ci's `<code>` element: as Markdown shows
   * a code span (one space stripped from each end when both have one), every
   * punctuation character escaped so that Markdown reads none of it.
   */
  function codeText(text: string): string {
    const inner =
      text.length > 2 &&
      text.startsWith(' ') &&
      text.endsWith(' ') &&
      text.trim()
        ? text.slice(1, -1)
        : text;
    return inner.replace(
      /[!-/:-@[-`{-~]/g,
      char => ENTITIES[char] ?? `\\${char}`
    );
  }

  /**
   * Link syntax with an unsafe destination made text: `](dest` opens an
   * inline link or image, `]: dest` ends the label of a link reference
   * definition (in a list or a quote too); its bracket is escaped.
   */
  function defuseLinks(line: string): string {
    return line.replace(
      /\](\(|:)([ \t]*)([^)\s]*)/g,
      (match, opener: string, space: string, dest: string) =>
        safeDestination(dest)
          ? match
          : `\\]${opener === '(' ? '\\(' : ':'}${space}${dest}`
    );
  }

  /**
   * Link destinations that stay links.
   */
  const SAFE_SCHEME = /^(https?|mailto)$/i;

  /**
   * Whether a link destination is relative or has a safe scheme. Markdown's
   * backslash escapes are removed first (`javascript\:` is `javascript:`),
   * and so are the characters browsers drop from a URL's scheme. An empty
   * destination is not safe: the real one may follow on the next line.
   */
  function safeDestination(dest: string): boolean {
    const plain = dest
      .replace(/\\(.)/g, '$1')
      // eslint-disable-next-line no-control-regex
      .replace(/[\u0000-\u0020\u007f-\u009f]/g, '');
    if (!plain) {
      return false;
    }
    const scheme = /^([a-zA-Z][a-zA-Z0-9+.-]*):/.exec(plain);
    return !scheme || SAFE_SCHEME.test(scheme[1]);
  }
}
