import { Clipboard } from '@jupyterlab/apputils';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import * as React from 'react';

import { WordButton } from '../wordButton';
import { CODE_BUTTONS, COPIED_FOR, ICodeActions, Markdown } from './markdown';
import type { IRunProgress } from './steps';

/**
 * One cell as the run's entry shows it.
 */
interface IShownCell {
  cellId: string | null;
  /**
   * The cell's latest complete code ('' when none is).
   */
  source: string;
  /**
   * The code being written for it, as it streams (null when none is).
   */
  writing: string | null;
  /**
   * Whether it waits for the user's review (its code shows in the review
   * card, not twice).
   */
  reviewing: boolean;
}

/**
 * The cells a run generated (or fixed), each with its latest complete code
 * and Insert below / Copy, which give exactly that code. Code the model is
 * writing shows as it streams, marked as being written, with both buttons
 * disabled until the cell's code is complete.
 */
export function RunCells(props: {
  progress: IRunProgress;
  rendermime: IRenderMimeRegistry;
  actions: ICodeActions;
  onShowCell: (cellId: string) => void;
}): React.ReactElement | null {
  const { progress, rendermime, actions, onShowCell } = props;
  const { writing } = progress;
  const shown: IShownCell[] = progress.cells.map(cell => ({
    ...cell,
    writing: writing && writing.cellId === cell.cellId ? writing.text : null,
    reviewing: progress.review?.cellId === cell.cellId
  }));
  if (writing && !shown.some(cell => cell.writing !== null)) {
    shown.push({
      cellId: writing.cellId,
      source: '',
      writing: writing.text,
      reviewing: false
    });
  }
  if (!shown.length) {
    return null;
  }
  return (
    <ol className="jp-jupyter-ci-cells" aria-label="Cells of the run">
      {shown.map((cell, index) => (
        <RunCell
          key={cell.cellId ?? 'writing'}
          cell={cell}
          label={`Cell ${index + 1}`}
          rendermime={rendermime}
          actions={actions}
          onShowCell={onShowCell}
        />
      ))}
    </ol>
  );
}

function RunCell(props: {
  cell: IShownCell;
  label: string;
  rendermime: IRenderMimeRegistry;
  actions: ICodeActions;
  onShowCell: (cellId: string) => void;
}): React.ReactElement {
  const { cell, label, rendermime, actions, onShowCell } = props;
  const { cellId, source, writing, reviewing } = cell;
  const [copied, setCopied] = React.useState(false);
  React.useEffect(() => {
    if (!copied) {
      return;
    }
    const timer = window.setTimeout(() => setCopied(false), COPIED_FOR);
    return () => window.clearTimeout(timer);
  }, [copied]);
  const complete = writing === null && source !== '';
  const note =
    writing !== null
      ? 'being written…'
      : reviewing
        ? 'waits for your review (below)'
        : complete
          ? ''
          : 'not complete: the run ended while it was written';
  return (
    <li
      className="jp-jupyter-ci-cell"
      data-testid="jupyter-ci-run-cell"
      data-cell-id={cellId ?? ''}
      data-writing={writing !== null}
      aria-busy={writing !== null}
    >
      <div className="jp-jupyter-ci-cell-head">
        {cellId ? (
          <button
            type="button"
            className="jp-jupyter-ci-link"
            aria-label={`${label}: show the cell`}
            onClick={() => onShowCell(cellId)}
          >
            {label}
          </button>
        ) : (
          <span>{label}</span>
        )}
        {note ? <span className="jp-jupyter-ci-cell-note">{note}</span> : null}
        <span className="jp-jupyter-ci-code-actions">
          <WordButton
            word={CODE_BUTTONS.insert}
            testid="jupyter-ci-insert-code"
            className="jp-jupyter-ci-button"
            minimal
            disabled={!complete}
            onClick={() => actions.insertBelow(source)}
          />
          <WordButton
            word={copied ? CODE_BUTTONS.copied : CODE_BUTTONS.copy}
            testid="jupyter-ci-copy-code"
            className="jp-jupyter-ci-button"
            minimal
            live
            disabled={!complete}
            onClick={() => {
              Clipboard.copyToSystem(source);
              setCopied(true);
            }}
          />
        </span>
      </div>
      {writing !== null || (source && !reviewing) ? (
        // The streaming text is the code alone (the fence lines are not code).
        <Markdown
          text={Private.fenced(writing ?? source)}
          rendermime={rendermime}
        />
      ) : null}
    </li>
  );
}

namespace Private {
  /**
   * Python code as a Markdown code block (its fence longer than any run of
   * backticks in the code).
   */
  export function fenced(code: string): string {
    const runs = code.match(/`+/g) ?? [];
    const fence = '`'.repeat(Math.max(2, ...runs.map(run => run.length)) + 1);
    return `${fence}python\n${code}\n${fence}`;
  }
}
