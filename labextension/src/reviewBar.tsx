import { Cell } from '@jupyterlab/cells';
import { ReactWidget } from '@jupyterlab/ui-components';
import * as React from 'react';

import { IWord, WordButton } from './wordButton';

/**
 * The review controls on a cell that a run waits on: a line saying so, then
 * Run (or Install and continue), Edit and Reject (or Don't install). Real
 * buttons, in the page's tab order, each with an accessible name. Run's name
 * says when it runs the user's version of the cell.
 */
export class ReviewBar extends ReactWidget {
  constructor(options: ReviewBar.IOptions) {
    super();
    this._options = options;
    this.addClass('jp-jupyter-ci-ReviewBar');
    this.node.dataset.testid = 'jupyter-ci-cell-review';
    this.node.setAttribute('role', 'group');
    this.node.setAttribute('aria-label', options.words.title);
    // Connected with the widget as receiver: its dispose disconnects it.
    options.cell.model.contentChanged.connect(this._onContent, this);
  }

  /**
   * Say that an answer is on its way ('sent…') or that the user runs the
   * cell ('running…'): the buttons are disabled meanwhile. Null: ready.
   */
  setBusy(busy: string | null): void {
    if (busy !== this._busy) {
      this._busy = busy;
      this.update();
    }
  }

  protected render(): React.ReactElement {
    const { words, cell, proposed, onRun, onEdit, onReject } = this._options;
    const edited = cell.model.sharedModel.getSource() !== proposed;
    const run = edited ? words.runEdited : words.run;
    const busy = this._busy;
    const reject = (): void => onReject(this._comment.trim() || null);
    return (
      <>
        <span className="jp-jupyter-ci-ReviewBar-title">
          {words.title}
          {busy ? ` (${busy})` : ''}
        </span>
        {words.comment && (
          <input
            type="text"
            className="jp-jupyter-ci-ReviewBar-comment"
            data-testid="jupyter-ci-cell-review-comment"
            aria-label={words.comment.description}
            title={words.comment.description}
            placeholder={words.comment.label}
            value={this._comment}
            disabled={busy !== null}
            onChange={event => {
              this._comment = event.target.value;
              this.update();
            }}
            onKeyDown={event => {
              // The notebook's own shortcuts (Shift+Enter, a, b, ...) stay out.
              event.stopPropagation();
              if (event.key === 'Enter') {
                event.preventDefault();
                reject();
              }
            }}
          />
        )}
        {(
          [
            ['run', run, onRun],
            ['edit', words.edit, onEdit],
            ['reject', words.reject, reject]
          ] as const
        ).map(([kind, word, onClick]) => (
          <WordButton
            key={kind}
            word={word}
            className={`jp-jupyter-ci-ReviewBar-button jp-jupyter-ci-ReviewBar-${kind}`}
            testid={`jupyter-ci-cell-review-${kind}`}
            disabled={busy !== null}
            onClick={onClick}
          />
        ))}
      </>
    );
  }

  private readonly _onContent = (): void => {
    this.update();
  };

  private readonly _options: ReviewBar.IOptions;
  private _busy: string | null = null;
  private _comment = '';
}

/**
 * The namespace for `ReviewBar` statics.
 */
export namespace ReviewBar {
  export interface IOptions {
    words: {
      title: string;
      run: IWord;
      runEdited: IWord;
      edit: IWord;
      reject: IWord;
      /**
       * The optional reason that goes with Reject (none for an install).
       */
      comment: IWord | null;
    };
    /**
     * The code the run proposed (the cell's code differs once the user edits
     * it).
     */
    proposed: string;
    cell: Cell;
    onRun: () => void;
    onEdit: () => void;
    /**
     * Reject, with the user's reason if they wrote one.
     */
    onReject: (comment: string | null) => void;
  }
}
