import { Button } from '@jupyterlab/ui-components';
import * as React from 'react';

import type { IPreview } from '../protocol';

/**
 * Exactly what the next request will send to the model, message by message,
 * with its token count.
 */
export function PreviewView(props: {
  preview: IPreview;
  onClose: () => void;
}): React.ReactElement {
  const { preview, onClose } = props;
  return (
    <section
      className="jp-jupyter-ci-preview"
      data-testid="jupyter-ci-preview"
      aria-label="What the next request sends"
    >
      <div className="jp-jupyter-ci-preview-head">
        <span data-testid="jupyter-ci-preview-tokens">
          {`${preview.prompt_tokens.toLocaleString('en-US')} tokens of ${preview.context_tokens.toLocaleString('en-US')} · ${preview.model}`}
        </span>
        <Button
          type="button"
          className="jp-jupyter-ci-button"
          minimal
          small
          aria-label="Close the preview"
          onClick={onClose}
        >
          Close
        </Button>
      </div>
      {preview.messages.map((message, index) => (
        <details key={index} open={index === preview.messages.length - 1}>
          <summary>{message.role}</summary>
          <pre className="jp-jupyter-ci-preview-text">{message.content}</pre>
        </details>
      ))}
    </section>
  );
}
