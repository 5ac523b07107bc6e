import { Button } from '@jupyterlab/ui-components';
import * as React from 'react';

/**
 * What a button says, and its accessible name (also its tooltip).
 */
export interface IWord {
  label: string;
  description: string;
}

/**
 * A small JupyterLab button that says a word's label and is named (and
 * titled) by its description: the review controls on a cell, Insert below
 * and Copy on a run's cells in the panel.
 */
export function WordButton(props: {
  word: IWord;
  className: string;
  minimal?: boolean;
  testid?: string;
  disabled: boolean;
  onClick: () => void;
  /**
   * Whether a change of its word is announced (Copy saying "Copied").
   */
  live?: boolean;
}): React.ReactElement {
  const { word, className, minimal, testid, disabled, onClick, live } = props;
  return (
    <Button
      type="button"
      className={className}
      minimal={minimal}
      small
      data-testid={testid}
      title={word.description}
      aria-label={word.description}
      aria-live={live ? 'polite' : undefined}
      disabled={disabled}
      onClick={onClick}
    >
      {word.label}
    </Button>
  );
}
