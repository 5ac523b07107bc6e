import { Notification } from '@jupyterlab/apputils';
import { Cell } from '@jupyterlab/cells';
import {
  KernelError,
  Notebook,
  NotebookActions,
  NotebookPanel
} from '@jupyterlab/notebook';
import type { CommandRegistry } from '@lumino/commands';
import type { IDisposable } from '@lumino/disposable';

import { showUnderInput } from './cellBadge';
import { CIConnection } from './connection';
import { CommandIDs } from './constants';
import { Lifecycle } from './lifecycle';
import { NotebookIndex } from './notebooks';
import { CellPlacement } from './placement';
import { IAwaitedReview, IRunView, RunTracker } from './runs';
import { ReviewBar } from './reviewBar';
import { markStaleOutputs, staleOutputsText } from './staleOutputs';
import { HELD_BACK_ERROR_NAME } from './protocol';
import type { IReviewRequest } from './protocol';

/**
 * A decision on a cell in review, as the user gives it.
 */
export type ReviewDecision = IReviewRequest['decision'];

/**
 * The words of the review controls, in the notebook, its notification and
 * the panel: what each button says and its accessible name (also its
 * tooltip), which begins with what it says. A `%pip install` cell proposed
 * for a missing package asks "Install and continue" or "Don't install".
 */
export const REVIEW_WORDS = {
  cell: {
    title: 'jupyter-ci: this cell waits for your review',
    run: { label: 'Run', description: 'Run this cell' },
    runEdited: { label: 'Run', description: 'Run your version of the cell' },
    edit: { label: 'Edit', description: 'Edit the cell before running it' },
    reject: {
      label: 'Reject',
      description: 'Reject this cell without running it'
    },
    comment: {
      label: 'Why reject? (optional)',
      description:
        'Your reason for rejecting this cell (optional): jupyter-ci tells the model with the rejection; Enter rejects'
    }
  },
  missing_package: {
    title: 'jupyter-ci: a package is missing — install it and continue?',
    run: {
      label: 'Install and continue',
      description:
        'Install and continue: run the install, then the failed cell again'
    },
    runEdited: {
      label: 'Install and continue',
      description:
        'Install and continue: run your version of the install, then the failed cell again'
    },
    edit: {
      label: 'Edit',
      description: 'Edit the install command before running it'
    },
    reject: {
      label: "Don't install",
      description: "Don't install: end the request without installing"
    },
    comment: null
  }
} as const;

/**
 * The words for a review's reason.
 */
export function reviewWords(
  reason: string
): (typeof REVIEW_WORDS)['cell' | 'missing_package'] {
  return reason === 'missing_package'
    ? REVIEW_WORDS.missing_package
    : REVIEW_WORDS.cell;
}

/**
 * The cell's code as the user left it in the notebook, when it differs from
 * the code the run proposed (null when they did not change it, or the cell
 * is not open here).
 */
export function editedSource(
  index: NotebookIndex,
  path: string | null,
  review: { cellId: string; source: string }
): string | null {
  const found = path
    ? index.findCell(path, review.cellId)
    : index.findCellAnywhere(review.cellId);
  const now = found?.model.sharedModel.getSource();
  return now !== undefined && now !== review.source ? now : null;
}

/**
 * Review from the notebook alone (ARCHITECTURE.md, "The run record": the
 * loop waits in `awaiting_approval` for the `review` request of the tab that
 * owns the run). While a run of this tab waits on a cell:
 *
 * - the cell carries Run, Edit and Reject (for a missing package's
 *   `%pip install` cell: Install and continue, Edit, Don't install), in
 *   every view of its notebook;
 * - a JupyterLab notification says so, with the same actions, unless the
 *   panel (whose review card asks the same) shows that notebook (once it
 *   does, the notification goes);
 * - running the cell yourself (Shift+Enter) counts as Run: once that
 *   execution has ended the tab answers `ran`, and the run reads the cell's
 *   outputs from the notebook. Shift+Enter on the waiting cell runs it and
 *   selects the next cell, but adds no empty cell when it is the last one
 *   (the run's next cell goes there): the selection stays on it, and where
 *   the panel's next request goes is not changed by it.
 *
 * Run sends the cell's code as it is in the notebook when the user changed
 * it (Edit puts the cell in edit mode to do so).
 */
export class CellReview extends Lifecycle {
  constructor(options: CellReview.IOptions) {
    super();
    this._index = options.index;
    this._runs = options.runs;
    this._connection = options.connection;
    this._show = options.show;
    this._panelShowing = options.panelShowing;
    this._placement = options.placement ?? null;
    if (options.commands) {
      this._addShiftEnter(options.commands);
    }
    this.listen(this._runs.changed, this._onRun);
    this.listen(NotebookActions.executionScheduled, this._onScheduled);
    this.listen(NotebookActions.executed, this._onExecuted);
  }

  /**
   * Answer the cell a run waits on. `source` is the user's version when they
   * edited it elsewhere (the panel's editor); otherwise the notebook's cell
   * says whether they changed it.
   */
  async answer(
    runId: string,
    decision: ReviewDecision,
    source: string | null = null,
    comment: string | null = null
  ): Promise<void> {
    const waiting = this._waiting.get(runId);
    const review = waiting?.review ?? this._runs.get(runId)?.review ?? null;
    if (!review) {
      return;
    }
    if (waiting) {
      waiting.sent = true;
      this._render(waiting);
    }
    const path = this._runs.get(runId)?.notebookPath ?? null;
    const sent =
      decision === 'reject'
        ? null
        : (source ?? editedSource(this._index, path, review));
    try {
      await this._connection.request({
        request: 'review',
        run_id: runId,
        cell_id: review.cellId,
        decision,
        source: sent,
        ...(decision === 'reject' && comment?.trim()
          ? { comment: comment.trim() }
          : {})
      });
    } catch (error) {
      if (waiting && this._waiting.get(runId) === waiting) {
        waiting.sent = false;
        this._render(waiting);
      }
      Notification.error(
        `jupyter-ci: the review was not sent: ${error instanceof Error ? error.message : String(error)}`,
        { autoClose: 8000 }
      );
    }
  }

  /**
   * Put the waiting cell in edit mode, in the notebook's tab.
   */
  edit(runId: string): void {
    const waiting = this._waiting.get(runId);
    const found = waiting
      ? this._index.findCell(waiting.path, waiting.review.cellId)
      : null;
    if (!found) {
      return;
    }
    this._show(found.panel);
    const notebook = found.panel.content;
    notebook.activeCellIndex = found.index;
    notebook.deselectAll();
    notebook.mode = 'edit';
    const widget = notebook.widgets[found.index];
    if (widget) {
      void notebook.scrollToCell(widget).then(() => {
        widget.editor?.focus();
      });
    }
  }

  /**
   * The panel may show another notebook now: a notification about a cell of
   * the notebook it shows is dismissed (its review card asks the same).
   */
  panelChanged(): void {
    for (const waiting of this._waiting.values()) {
      if (waiting.notification && this._panelShowing(waiting.path)) {
        Notification.dismiss(waiting.notification);
        waiting.notification = null;
      }
    }
  }

  protected onDispose(): void {
    for (const runId of [...this._waiting.keys()]) {
      this._end(runId);
    }
  }

  /**
   * Shift+Enter on a cell waiting for review: run it (it counts as Run) and
   * select the next cell, without JupyterLab's new empty cell after the last
   * one (a stray cell the run's next cell would then go above).
   */
  private _addShiftEnter(commands: CommandRegistry): void {
    this.own(
      commands.addCommand(CommandIDs.runReviewed, {
        label:
          'Run the cell waiting for jupyter-ci review and select the next cell',
        execute: () => this._runAndSelectNext()
      })
    );
    this.own(
      commands.addKeyBinding({
        command: CommandIDs.runReviewed,
        keys: ['Shift Enter'],
        selector: `.jp-Notebook .${Private.WAITING_CLASS}`
      })
    );
  }

  private async _runAndSelectNext(): Promise<void> {
    const panel = this._index.tracker.currentWidget;
    const notebook = panel?.content;
    if (!panel || !notebook || !notebook.activeCell) {
      return;
    }
    const index = notebook.activeCellIndex;
    const ran = NotebookActions.run(notebook, panel.sessionContext);
    if (index < notebook.widgets.length - 1) {
      notebook.activeCellIndex = index + 1;
    }
    notebook.mode = 'command';
    // Moving on from the review is not choosing where the next request goes.
    this._placement?.keep(panel.context.path);
    await ran;
  }

  private readonly _onRun = (_sender: RunTracker, view: IRunView): void => {
    const review = this._owns(view) ? view.review : null;
    const waiting = this._waiting.get(view.runId);
    if (
      waiting &&
      review &&
      waiting.review.cellId === review.cellId &&
      waiting.review.source === review.source &&
      waiting.review.reason === review.reason
    ) {
      if (waiting.bars.length === 0) {
        // The cell is here now (put back after a reload).
        this._attachAll(waiting);
      }
      return; // the same review: a token, a usage, ...
    }
    if (waiting) {
      this._end(view.runId);
    }
    if (review && view.notebookPath) {
      this._begin(view, view.notebookPath, review);
    }
  };

  private _owns(view: IRunView): boolean {
    return view.owner !== null && view.owner === this._connection.clientId;
  }

  private _begin(view: IRunView, path: string, review: IAwaitedReview): void {
    const waiting: Private.IWaiting = {
      runId: view.runId,
      path,
      review,
      sent: false,
      running: false,
      bars: [],
      cells: [],
      marks: [],
      notification: null
    };
    this._waiting.set(view.runId, waiting);
    this._attachAll(waiting);
    if (!this._panelShowing(path)) {
      waiting.notification = this._notify(waiting);
    }
  }

  private _attachAll(waiting: Private.IWaiting): void {
    for (const cell of this._index.cellWidgets(
      waiting.path,
      waiting.review.cellId
    )) {
      waiting.bars.push(this._attach(cell, waiting));
    }
  }

  private _end(runId: string): void {
    const waiting = this._waiting.get(runId);
    if (!waiting) {
      return;
    }
    this._waiting.delete(runId);
    for (const bar of waiting.bars) {
      bar.dispose();
    }
    for (const cell of waiting.cells) {
      cell.removeClass(Private.WAITING_CLASS);
    }
    for (const mark of waiting.marks) {
      mark.dispose();
    }
    if (waiting.notification) {
      Notification.dismiss(waiting.notification);
    }
  }

  /**
   * The controls on one view of the cell, after its input (and jupyter-ci's
   * badge, when it has one).
   */
  private _attach(cell: Cell, waiting: Private.IWaiting): ReviewBar {
    cell.addClass(Private.WAITING_CLASS);
    waiting.cells.push(cell);
    // Its outputs are the previous try's: the change waiting here has not run.
    const tried = this._runs.get(waiting.runId)?.attempt;
    waiting.marks.push(
      markStaleOutputs(
        cell,
        staleOutputsText(
          tried?.cellId === waiting.review.cellId ? tried.attempt : null
        )
      )
    );
    const bar = new ReviewBar({
      words: reviewWords(waiting.review.reason),
      proposed: waiting.review.source,
      cell,
      onRun: () => void this.answer(waiting.runId, 'run'),
      onEdit: () => this.edit(waiting.runId),
      onReject: comment =>
        void this.answer(waiting.runId, 'reject', null, comment)
    });
    showUnderInput(cell, bar);
    this._render(waiting);
    return bar;
  }

  private _render(waiting: Private.IWaiting): void {
    for (const bar of waiting.bars) {
      bar.setBusy(waiting.running ? 'running…' : waiting.sent ? 'sent…' : null);
    }
  }

  private _notify(waiting: Private.IWaiting): string {
    const words = reviewWords(waiting.review.reason);
    const actions = [
      {
        label: words.run.label,
        caption: words.run.description,
        displayType: 'accent' as const,
        callback: () => void this.answer(waiting.runId, 'run')
      },
      {
        label: words.edit.label,
        caption: words.edit.description,
        callback: () => this.edit(waiting.runId)
      },
      {
        label: words.reject.label,
        caption: words.reject.description,
        callback: () => void this.answer(waiting.runId, 'reject')
      }
    ];
    return Notification.emit(`${words.title} (${waiting.path})`, 'info', {
      autoClose: false,
      actions
    });
  }

  /**
   * The user runs the waiting cell themselves (Shift+Enter, Run ▸ Run
   * Selected Cell, Run All): the controls wait for its end.
   */
  private readonly _onScheduled = (
    _sender: unknown,
    args: { notebook: Notebook; cell: Cell }
  ): void => {
    const waiting = this._waitingOn(args.cell);
    if (waiting && !waiting.sent) {
      waiting.running = true;
      this._render(waiting);
    }
  };

  /**
   * The user's run of the waiting cell ended: it counts as Run (`ran`), with
   * their version of the code if they changed it.
   */
  private readonly _onExecuted = (
    _sender: unknown,
    args: {
      notebook: Notebook;
      cell: Cell;
      success: boolean;
      error?: KernelError | null;
    }
  ): void => {
    const waiting = this._waitingOn(args.cell);
    if (!waiting || waiting.sent || !waiting.running) {
      return;
    }
    waiting.running = false;
    // The kernel did not run it: aborted (no error name), or held back behind a %%ci of the
    // same Run All. The user asked for it to run, so it counts as Run, and the run runs it.
    const name = args.success ? null : (args.error?.errorName ?? '');
    const notRun = name === '' || name === HELD_BACK_ERROR_NAME;
    void this.answer(waiting.runId, notRun ? 'run' : 'ran');
  };

  private _waitingOn(cell: Cell): Private.IWaiting | null {
    for (const waiting of this._waiting.values()) {
      if (waiting.review.cellId === cell.model.id) {
        return waiting;
      }
    }
    return null;
  }

  private readonly _index: NotebookIndex;
  private readonly _runs: RunTracker;
  private readonly _connection: CIConnection;
  private readonly _show: (panel: NotebookPanel) => void;
  private readonly _panelShowing: (path: string) => boolean;
  private readonly _placement: CellPlacement | null;
  private readonly _waiting = new Map<string, Private.IWaiting>();
}

/**
 * The namespace for `CellReview` statics.
 */
export namespace CellReview {
  export interface IOptions {
    index: NotebookIndex;
    runs: RunTracker;
    connection: CIConnection;
    /**
     * Bring a notebook's tab to the front.
     */
    show: (panel: NotebookPanel) => void;
    /**
     * Whether the jupyter-ci panel shows the notebook at `path` now (its
     * review card asks the same: no notification then).
     */
    panelShowing: (path: string) => boolean;
    /**
     * Where Shift+Enter on a waiting cell is bound (its command and key).
     */
    commands?: CommandRegistry;
    /**
     * Where the panel's next cells go (Shift+Enter on a waiting cell does not
     * change it).
     */
    placement?: CellPlacement;
  }
}

namespace Private {
  /**
   * A run of this tab waiting on a cell, and what asks the user.
   */
  export interface IWaiting {
    runId: string;
    path: string;
    review: IAwaitedReview;
    /**
     * An answer was sent (the controls wait for the run to move on).
     */
    sent: boolean;
    /**
     * The user is running the cell themselves.
     */
    running: boolean;
    bars: ReviewBar[];
    /**
     * The views of the cell, marked as waiting (Shift+Enter's selector).
     */
    cells: Cell[];
    /**
     * The marks on its outputs (those of the previous try).
     */
    marks: IDisposable[];
    notification: string | null;
  }

  /**
   * The class of a cell view waiting for review.
   */
  export const WAITING_CLASS = 'jp-jupyter-ci-awaitingReview';
}
