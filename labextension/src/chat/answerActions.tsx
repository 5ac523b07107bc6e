import { Button } from '@jupyterlab/ui-components';
import * as React from 'react';

/**
 * The button under an answer of the model's in the panel: its text and what
 * it does (also its accessible name and tooltip).
 */
export const ANSWER_BUTTON = {
  label: 'Insert as Markdown',
  description:
    'Insert this answer as a Markdown cell where the next cells of the conversation go'
} as const;

/**
 * What can be done with a whole answer (a message of the model's, once it is
 * complete): insert it into the notebook as a Markdown cell.
 */
export function AnswerActions(props: {
  onInsert: () => void;
}): React.ReactElement {
  return (
    <div className="jp-jupyter-ci-answer-actions">
      <Button
        small
        className="jp-jupyter-ci-answer-button"
        data-testid="jupyter-ci-insert-answer"
        title={ANSWER_BUTTON.description}
        aria-label={ANSWER_BUTTON.description}
        onClick={props.onInsert}
      >
        {ANSWER_BUTTON.label}
      </Button>
    </div>
  );
}
