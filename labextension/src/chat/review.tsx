import { Button } from '@jupyterlab/ui-components';
import * as React from 'react';

import { reviewWords } from '../cellReview';
import { breakable, hangingIndent } from './codeWrap';
import type { IProposal } from './steps';

/**
 * The user's answer to a cell in review: run it (with their edited source,
 * if they edited it) or reject it.
 */
export type ReviewAnswer =
  | { decision: 'run'; source: string | null }
  | { decision: 'reject'; comment: string | null };

/**
 * A diff line's kind, for its colour.
 */
function lineClass(line: string): string {
  if (line.startsWith('+') && !line.startsWith('+++')) {
    return 'jp-jupyter-ci-diff-add';
  }
  if (line.startsWith('-') && !line.startsWith('---')) {
    return 'jp-jupyter-ci-diff-del';
  }
  return '';
}

/**
 * The lines shown for a proposal: the fix's diff, or a new cell's source (its
 * code, once: the run's list of cells leaves it to this card).
 */
export function diffLines(proposal: IProposal): string[] {
  if (proposal.diff.trim()) {
    return proposal.diff.replace(/\n$/, '').split('\n');
  }
  return proposal.source.split('\n');
}

/**
 * One line of a diff or of code, wrapping between tokens with its
 * continuation indented past the line's own indentation.
 */
function CodeLine(props: {
  line: string;
  className: string;
  marker: boolean;
}): React.ReactElement {
  const { line, className, marker } = props;
  const indent =
    (marker ? 1 : 0) + /^[ \t]*/.exec(line.slice(marker ? 1 : 0))![0].length;
  return (
    <div
      className={`jp-jupyter-ci-diff-line ${className}`.trim()}
      style={hangingIndent(indent)}
    >
      {line
        ? breakable(line).map((part, index) => (
            <React.Fragment key={index}>
              {index > 0 ? <wbr /> : null}
              {part}
            </React.Fragment>
          ))
        : ' '}
    </div>
  );
}

/**
 * A cell waiting for review: its diff, and Run, Edit and Reject (give it a
 * new `key` for each proposal, so its state starts afresh). For a missing
 * package's `%pip install` cell (`reason` `missing_package`): Install and
 * continue, Edit, Don't install.
 */
export function ReviewCard(props: {
  proposal: IProposal;
  reason: string;
  onAnswer: (answer: ReviewAnswer) => void;
  onShowCell: () => void;
}): React.ReactElement {
  const { proposal, reason, onAnswer, onShowCell } = props;
  const install = reason === 'missing_package';
  const words = reviewWords(reason);
  const fix = proposal.diff.trim() !== '';
  const [editing, setEditing] = React.useState(false);
  const [source, setSource] = React.useState(proposal.source);
  const [comment, setComment] = React.useState('');
  const [sent, setSent] = React.useState(false);
  const reject = (): void =>
    answer({ decision: 'reject', comment: comment.trim() || null });

  const answer = (value: ReviewAnswer): void => {
    setSent(true);
    onAnswer(value);
  };

  return (
    <section
      className="jp-jupyter-ci-review"
      data-testid="jupyter-ci-review"
      aria-label="A cell waits for your review"
    >
      <div className="jp-jupyter-ci-review-title">
        {install
          ? 'A package is missing: install it and continue?'
          : proposal.diff.trim()
            ? 'Review this fix'
            : 'Review this cell'}{' '}
        <button
          type="button"
          className="jp-jupyter-ci-link"
          onClick={onShowCell}
          aria-label="Show the cell in the notebook"
        >
          show cell
        </button>
      </div>
      {editing ? (
        <textarea
          className="jp-jupyter-ci-textarea jp-jupyter-ci-review-editor"
          data-testid="jupyter-ci-review-editor"
          aria-label="Your version of the cell"
          value={source}
          rows={Math.min(16, source.split('\n').length + 1)}
          onChange={event => setSource(event.target.value)}
        />
      ) : (
        <pre
          className="jp-jupyter-ci-diff"
          data-testid="jupyter-ci-diff"
          data-new-cell={!fix}
        >
          {diffLines(proposal).map((line, index) => (
            <CodeLine
              key={index}
              line={line}
              className={fix ? lineClass(line) : ''}
              marker={fix}
            />
          ))}
        </pre>
      )}
      {words.comment && (
        <input
          type="text"
          className="jp-jupyter-ci-textarea jp-jupyter-ci-review-comment"
          data-testid="jupyter-ci-review-comment"
          aria-label={words.comment.description}
          title={words.comment.description}
          placeholder={words.comment.label}
          value={comment}
          disabled={sent}
          onChange={event => setComment(event.target.value)}
          onKeyDown={event => {
            if (event.key === 'Enter') {
              event.preventDefault();
              reject();
            }
          }}
        />
      )}
      <div className="jp-jupyter-ci-review-actions">
        <Button
          type="button"
          className="jp-jupyter-ci-button jp-mod-styled jp-mod-accept"
          data-testid="jupyter-ci-review-run"
          aria-label={
            editing ? words.runEdited.description : words.run.description
          }
          title={editing ? words.runEdited.description : words.run.description}
          disabled={sent}
          onClick={() =>
            answer({
              decision: 'run',
              source: editing && source !== proposal.source ? source : null
            })
          }
        >
          {words.run.label}
        </Button>
        {!editing && (
          <Button
            type="button"
            className="jp-jupyter-ci-button"
            minimal
            data-testid="jupyter-ci-review-edit"
            aria-label={words.edit.description}
            title={words.edit.description}
            disabled={sent}
            onClick={() => setEditing(true)}
          >
            Edit
          </Button>
        )}
        <Button
          type="button"
          className="jp-jupyter-ci-button jp-mod-styled jp-mod-warn"
          data-testid="jupyter-ci-review-reject"
          aria-label={words.reject.description}
          title={words.reject.description}
          disabled={sent}
          onClick={reject}
        >
          {words.reject.label}
        </Button>
      </div>
    </section>
  );
}
