import { Button } from '@jupyterlab/ui-components';
import * as React from 'react';

import type { IPreview } from '../protocol';

/**
 * Exactly what the next request will send to the model, message by message,
 * with the token count of each and of all: shown in the conversation's place
 * (which comes back on Close or Escape), every message open, the whole view
 * scrolling, focused when it opens so the keyboard and a screen reader are in
 * it.
 */
export function PreviewView(props: {
  preview: IPreview;
  onClose: () => void;
}): React.ReactElement {
  const { preview, onClose } = props;
  const view = React.useRef<HTMLElement>(null);
  React.useEffect(() => {
    view.current?.focus();
  }, [preview]);
  const count = (n: number): string => n.toLocaleString('en-US');
  return (
    <section
      ref={view}
      className="jp-jupyter-ci-preview"
      data-testid="jupyter-ci-preview"
      aria-label="What the next request sends"
      tabIndex={0}
      onKeyDown={event => {
        if (event.key === 'Escape') {
          event.stopPropagation();
          onClose();
        }
      }}
    >
      <div className="jp-jupyter-ci-preview-head">
        <span data-testid="jupyter-ci-preview-tokens">
          {`${count(preview.prompt_tokens)} tokens of ${count(preview.context_tokens)} · ${preview.model}`}
        </span>
        <Button
          type="button"
          className="jp-jupyter-ci-button"
          minimal
          small
          aria-label="Close the preview"
          title="Close the preview (Escape)"
          onClick={onClose}
        >
          Close
        </Button>
      </div>
      <p className="jp-jupyter-ci-preview-note">
        {`${preview.messages.length} message${preview.messages.length === 1 ? '' : 's'}, as the model gets them; nothing was sent.`}
      </p>
      {preview.messages.map((message, index) => (
        <details
          key={index}
          className="jp-jupyter-ci-preview-message"
          data-testid="jupyter-ci-preview-message"
          open
        >
          <summary>{`${message.role} · ${count(message.tokens)} tokens`}</summary>
          <pre className="jp-jupyter-ci-preview-text">{message.content}</pre>
        </details>
      ))}
    </section>
  );
}
