import { Clipboard } from '@jupyterlab/apputils';
import { IRenderMimeRegistry, MimeModel } from '@jupyterlab/rendermime';
import * as React from 'react';

import { modelRendermime } from '../inertMedia';
import { wrapCode } from './codeWrap';

/**
 * What a code block in a message can do.
 */
export interface ICodeActions {
  /**
   * Insert `code` as a new cell below the notebook's active cell.
   */
  insertBelow: (code: string) => void;
}

/**
 * The buttons over code in the panel: their text and what they do (also
 * their accessible name and tooltip).
 */
export const CODE_BUTTONS = {
  insert: {
    label: 'Insert below',
    description: 'Insert this code as a new cell below'
  },
  copy: { label: 'Copy', description: 'Copy this code to the clipboard' },
  copied: { label: 'Copied', description: 'Copied to the clipboard' }
} as const;

/**
 * How long Copy says "Copied" after a click (milliseconds).
 */
export const COPIED_FOR = 2000;

/**
 * Markdown text rendered by JupyterLab's rendermime as untrusted content:
 * its sanitizer removes scripts, event handlers and anything else unsafe,
 * and jupyter-ci's (`modelRendermime`) turns images and other embeds into
 * links, so that nothing loads from the text; code blocks are highlighted by
 * Lab's markdown parser. With `actions`,
 * each code block gets "Insert below" and "Copy" buttons.
 */
export function Markdown(props: {
  text: string;
  rendermime: IRenderMimeRegistry;
  actions?: ICodeActions;
}): React.ReactElement {
  const { text, rendermime, actions } = props;
  const host = React.useRef<HTMLDivElement>(null);
  React.useEffect(() => {
    const node = host.current;
    if (!node) {
      return;
    }
    let cancelled = false;
    // Rendering is asynchronous: say when this text is in (tests read it).
    node.dataset.rendered = 'false';
    const renderer =
      modelRendermime(rendermime).createRenderer('text/markdown');
    const model = new MimeModel({
      data: { 'text/markdown': text },
      trusted: false
    });
    void renderer
      .renderModel(model)
      .then(() => {
        if (cancelled) {
          return;
        }
        node.replaceChildren(renderer.node);
        if (actions) {
          Private.addCodeActions(renderer.node, actions);
        }
        // After the actions took each block's code as it is.
        wrapCode(renderer.node);
        node.dataset.rendered = 'true';
      })
      .catch(() => {
        if (!cancelled) {
          // Never raw HTML: fall back to the text itself.
          node.textContent = text;
          node.dataset.rendered = 'true';
        }
      });
    return () => {
      cancelled = true;
      renderer.dispose();
    };
  }, [text, rendermime, actions]);
  return <div className="jp-jupyter-ci-markdown" ref={host} />;
}

namespace Private {
  /**
   * Put "Insert below" and "Copy" buttons over each code block.
   */
  export function addCodeActions(
    root: HTMLElement,
    actions: ICodeActions
  ): void {
    for (const pre of Array.from(root.querySelectorAll('pre'))) {
      const code = pre.textContent ?? '';
      const bar = document.createElement('div');
      bar.className = 'jp-jupyter-ci-code-actions';
      const insert = button(CODE_BUTTONS.insert, () =>
        actions.insertBelow(code.replace(/\n$/, ''))
      );
      insert.dataset.testid = 'jupyter-ci-insert-code';
      bar.appendChild(insert);
      const copy = button(CODE_BUTTONS.copy, () => {
        Clipboard.copyToSystem(code);
        say(copy, CODE_BUTTONS.copied);
        window.setTimeout(() => say(copy, CODE_BUTTONS.copy), COPIED_FOR);
      });
      copy.setAttribute('aria-live', 'polite');
      copy.dataset.testid = 'jupyter-ci-copy-code';
      bar.appendChild(copy);
      const wrapper = document.createElement('div');
      wrapper.className = 'jp-jupyter-ci-code';
      pre.replaceWith(wrapper);
      wrapper.appendChild(bar);
      wrapper.appendChild(pre);
    }
  }

  function button(
    kind: { label: string; description: string },
    onClick: () => void
  ): HTMLButtonElement {
    const element = document.createElement('button');
    element.type = 'button';
    // JupyterLab's Button (ui-components), as the panel's React buttons are.
    element.className =
      'jp-Button jp-mod-minimal jp-mod-small jp-jupyter-ci-button';
    say(element, kind);
    element.addEventListener('click', onClick);
    return element;
  }

  /**
   * Make `element` say `kind`'s word (its text, name and tooltip).
   */
  function say(
    element: HTMLElement,
    kind: { label: string; description: string }
  ): void {
    element.textContent = kind.label;
    element.title = kind.description;
    element.setAttribute('aria-label', kind.description);
  }
}
