import { Button, closeIcon } from '@jupyterlab/ui-components';
import * as React from 'react';

/**
 * Something attached to the next request.
 */
export type Attachment =
  | { kind: 'cell'; cellId: string; label: string; source: string }
  | { kind: 'file'; path: string };

/**
 * How an attachment is named to the user (its chip, and under the request
 * it went with).
 */
export function attachmentName(item: Attachment): string {
  return item.kind === 'file' ? item.path : item.label;
}

/**
 * The request box: multi-line; Enter sends, Shift+Enter adds a line; ↑ and ↓
 * at the first or last line walk the prompts sent before; files dropped on
 * the panel and cells attached show as removable chips.
 */
export function ChatInput(props: {
  history: readonly string[];
  attachments: readonly Attachment[];
  busy: boolean;
  /**
   * Why the box takes no request now (no notebook, no model), or null.
   */
  disabled: string | null;
  onSend: (text: string) => void;
  onRemoveAttachment: (attachment: Attachment) => void;
  draft: string;
  onDraft: (text: string) => void;
}): React.ReactElement {
  const { history, attachments, busy, disabled, onSend, draft, onDraft } =
    props;
  const [position, setPosition] = React.useState<number | null>(null);
  const area = React.useRef<HTMLTextAreaElement>(null);

  const send = (): void => {
    const text = draft.trim();
    if (!text || busy || disabled) {
      return;
    }
    onSend(text);
    setPosition(null);
  };

  const onKeyDown = (event: React.KeyboardEvent<HTMLTextAreaElement>): void => {
    const target = event.currentTarget;
    if (
      event.key === 'Enter' &&
      !event.shiftKey &&
      !event.nativeEvent.isComposing
    ) {
      event.preventDefault();
      send();
      return;
    }
    const atStart = !target.value
      .slice(0, target.selectionStart)
      .includes('\n');
    const atEnd = !target.value.slice(target.selectionEnd).includes('\n');
    if (event.key === 'ArrowUp' && atStart && history.length > 0) {
      event.preventDefault();
      const next =
        position === null ? history.length - 1 : Math.max(0, position - 1);
      setPosition(next);
      onDraft(history[next]);
    } else if (event.key === 'ArrowDown' && atEnd && position !== null) {
      event.preventDefault();
      const next = position + 1;
      if (next >= history.length) {
        setPosition(null);
        onDraft('');
      } else {
        setPosition(next);
        onDraft(history[next]);
      }
    }
  };

  return (
    <div className="jp-jupyter-ci-input">
      {attachments.length > 0 && (
        <ul
          className="jp-jupyter-ci-attachments"
          aria-label="Attached to the next request"
          data-testid="jupyter-ci-attachments"
        >
          {attachments.map(item => {
            const name = attachmentName(item);
            return (
              <li key={item.kind === 'file' ? item.path : item.cellId}>
                <span className="jp-jupyter-ci-chip">{name}</span>
                <Button
                  type="button"
                  className="jp-jupyter-ci-chip-remove"
                  minimal
                  small
                  aria-label={`Remove attachment ${name}`}
                  title={`Remove ${name}`}
                  onClick={() => props.onRemoveAttachment(item)}
                >
                  <closeIcon.react tag="span" className="jp-jupyter-ci-icon" />
                </Button>
              </li>
            );
          })}
        </ul>
      )}
      <textarea
        ref={area}
        className="jp-jupyter-ci-textarea"
        data-testid="jupyter-ci-input"
        aria-label="Ask jupyter-ci (Enter sends, Shift+Enter adds a line, Up and Down recall earlier requests)"
        placeholder={
          disabled ??
          'Ask jupyter-ci… (Enter sends, Shift+Enter for a new line)'
        }
        rows={3}
        value={draft}
        disabled={disabled !== null}
        onChange={event => {
          onDraft(event.target.value);
          setPosition(null);
        }}
        onKeyDown={onKeyDown}
      />
    </div>
  );
}
