import { Cell, ICellModel } from '@jupyterlab/cells';
import { Notebook, NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import { PanelLayout, Widget } from '@lumino/widgets';

import { CELL_METADATA_KEY as METADATA_KEY } from './protocol';
import { NotebookIndex } from './notebooks';
import { SourceStreamer } from './streaming';

/**
 * What jupyter-ci shows on one generated cell.
 */
export interface ICellDecoration {
  /**
   * The try of the cell now (1 = the first), and the run's limit.
   */
  attempt?: number;
  maxAttempts?: number;
  /**
   * Whether code is streaming into the cell (it is read-only meanwhile).
   */
  streaming?: boolean;
  /**
   * The latest code the model proposed for the cell (a fix, or its other
   * proposal after a Reject) as a unified diff (before → after), and the
   * attempt it is for.
   */
  diff?: string;
  diffAttempt?: number;
  /**
   * The user's own change to that proposal in review (Edit, then Run), as a
   * unified diff from the model's code: shown apart from the model's.
   */
  editDiff?: string;
  /**
   * The cell is the user's, fixed by jupyter-ci ("Fix with jupyter-ci"), not
   * generated: badged so, and its code can be restored.
   */
  fixed?: boolean;
  /**
   * Restore can put the user's code back (this tab changed it, and the run
   * is over); `restored` while the cell holds the user's code again (Restore,
   * or Ctrl+Z in its editor).
   */
  restorable?: boolean;
  restored?: boolean;
  /**
   * The run was stopped while the model wrote this cell: its code is
   * commented out and it never ran (until the user runs it).
   */
  stopped?: boolean;
  /**
   * The outside agent (an MCP client's name) that added the cell: the badge
   * says "added by …".
   */
  agent?: string;
  /**
   * The outside agent that changed the cell (its latest diff is that
   * agent's): "changed by …" on a cell it did not add.
   */
  changedBy?: string;
}

/**
 * The marks jupyter-ci puts on generated cells, in every view of a notebook:
 * a small badge (generated, attempt x/y, stopped before running), the
 * before/after diff of the latest fix, and read-only while code streams in.
 *
 * Decorations are views only: nothing here is saved with the notebook, except
 * the attempt count and the stop, which `recordAttempt` and `recordStopped`
 * write into the cell's `metadata.jupyter_ci` hint (outside the undo
 * history). A stopped cell's mark goes once the user runs the cell.
 *
 * A cell the user wrote and jupyter-ci fixed stays theirs: it is badged
 * "fixed by jupyter-ci", its fix shows as a diff, and once the run is over a
 * Restore button (labelled, in the tab order) puts back the code it had
 * before the fix (`rememberOriginal`), as one Ctrl+Z in its editor does.
 */
export class CellDecorations {
  constructor(index: NotebookIndex) {
    this._index = index;
    NotebookActions.executionScheduled.connect(this._onScheduled);
  }

  /**
   * Change a cell's decoration (found in any open notebook) and show it.
   */
  update(cellId: string, change: ICellDecoration): void {
    const previous = this._states.get(cellId);
    const state = { ...(previous ?? {}), ...change };
    if (previous && Private.same(previous, state)) {
      return; // e.g. every piece of streamed code says "streaming"
    }
    this._states.set(cellId, state);
    const found = this._index.findCellAnywhere(cellId);
    if (found) {
      this._apply(found.panel.context.path, cellId, state);
    }
  }

  /**
   * Show a cell's decoration in every view of the notebook at `path`.
   */
  show(path: string, cellId: string): void {
    this._apply(path, cellId, this._states.get(cellId) ?? {});
  }

  /**
   * Badge every generated cell of a notebook view (on open, and as cells
   * change), with whatever this page knows of them.
   */
  scan(panel: NotebookPanel): void {
    const model = panel.content.model;
    if (!model || panel.isDisposed) {
      return;
    }
    for (const widget of panel.content.widgets) {
      const hint: unknown = widget.model.getMetadata(METADATA_KEY);
      if (CellDecorations.isGenerated(hint)) {
        const saved: ICellDecoration = {};
        if (typeof hint['attempt'] === 'number') {
          saved.attempt = hint['attempt'];
        }
        if (typeof hint['max_attempts'] === 'number') {
          saved.maxAttempts = hint['max_attempts'];
        }
        if (typeof hint['agent'] === 'string') {
          saved.agent = hint['agent'];
        }
        if (hint['stopped'] === true) {
          saved.stopped = true;
        }
        const state = this._states.get(widget.model.id) ?? {};
        Private.decorate(widget, { ...saved, ...state }, () =>
          this.restore(widget.model.id)
        );
      }
    }
  }

  /**
   * Record a cell's attempt count and the run's limit in its
   * `metadata.jupyter_ci` hint (the badge reads the same after a reload).
   */
  recordAttempt(cellId: string, attempt: number, maxAttempts: number): void {
    this._record(cellId, hint => ({
      ...hint,
      attempt,
      max_attempts: maxAttempts
    }));
  }

  /**
   * Record in the cell's `metadata.jupyter_ci` hint that the run was stopped
   * while the model wrote it.
   */
  recordStopped(cellId: string): void {
    this._record(cellId, hint => ({ ...hint, stopped: true }));
  }

  /**
   * Forget a cell (deleted).
   */
  forget(cellId: string): void {
    this._states.delete(cellId);
    this._originals.delete(cellId);
  }

  /**
   * Remember the user's code of a cell a run of this tab is about to fix
   * (the first time only: Restore puts back what the user wrote).
   */
  rememberOriginal(cellId: string, runId: string, model: ICellModel): void {
    if (this._originals.get(cellId)?.runId === runId) {
      return;
    }
    const source = model.sharedModel.getSource();
    this._originals.set(cellId, { runId, source });
    if (!this._following.has(cellId)) {
      // Ctrl+Z, Ctrl+Shift+Z and Restore all change the source: the badge,
      // the diff and Restore follow whether it is the user's code again.
      this._following.add(cellId);
      model.contentChanged.connect(() => this._followSource(cellId, model));
    }
  }

  /**
   * Whether Restore can put the user's code of the cell back.
   */
  hasOriginal(cellId: string): boolean {
    return this._originals.has(cellId);
  }

  /**
   * Put the user's code back into a cell jupyter-ci fixed, in the cell's undo
   * history (Ctrl+Z brings the fix back).
   */
  restore(cellId: string): void {
    const original = this._originals.get(cellId);
    const found = this._index.findCellAnywhere(cellId);
    if (original === undefined || !found) {
      return;
    }
    SourceStreamer.replace(found.model, original.source, true);
  }

  /**
   * A fixed cell's source changed: is it the user's code again?
   */
  private _followSource(cellId: string, model: ICellModel): void {
    const original = this._originals.get(cellId);
    if (!original || model.isDisposed) {
      return;
    }
    const restored = model.sharedModel.getSource() === original.source;
    if ((this._states.get(cellId)?.restored ?? false) !== restored) {
      this.update(cellId, { restored });
    }
  }

  /**
   * Change a generated cell's hint, outside the undo history.
   */
  private _record(
    cellId: string,
    change: (hint: Record<string, unknown>) => Record<string, unknown>
  ): void {
    const found = this._index.findCellAnywhere(cellId);
    if (!found) {
      return;
    }
    const hint = found.model.getMetadata(METADATA_KEY) as unknown;
    if (!CellDecorations.isGenerated(hint)) {
      return;
    }
    const shared = found.model.sharedModel;
    shared.transact(() => {
      found.model.setMetadata(METADATA_KEY, change(hint));
    }, false);
  }

  /**
   * The user runs a cell: one stopped before running is no longer.
   */
  private readonly _onScheduled = (
    _sender: unknown,
    args: { notebook: Notebook; cell: Cell }
  ): void => {
    const model = args.cell.model;
    const hint = model.getMetadata(METADATA_KEY) as unknown;
    const shown = this._states.get(model.id)?.stopped;
    if (!CellDecorations.isGenerated(hint) || (!hint['stopped'] && !shown)) {
      return;
    }
    if (hint['stopped']) {
      this._record(model.id, ({ stopped: _dropped, ...rest }) => rest);
    }
    const state: ICellDecoration = {
      ...(typeof hint['attempt'] === 'number'
        ? { attempt: hint['attempt'] }
        : {}),
      ...(typeof hint['max_attempts'] === 'number'
        ? { maxAttempts: hint['max_attempts'] }
        : {}),
      ...(this._states.get(model.id) ?? {}),
      stopped: false
    };
    this._states.set(model.id, state);
    Private.decorate(args.cell, state, () => this.restore(model.id));
  };

  private _apply(path: string, cellId: string, state: ICellDecoration): void {
    for (const widget of this._index.cellWidgets(path, cellId)) {
      Private.decorate(widget, state, () => this.restore(cellId));
    }
  }

  private readonly _index: NotebookIndex;
  private readonly _states = new Map<string, ICellDecoration>();
  /**
   * The user's code of the cells this tab's runs fixed, before the fix.
   */
  private readonly _originals = new Map<
    string,
    { runId: string; source: string }
  >();
  /**
   * The fixed cells whose source changes are followed.
   */
  private readonly _following = new Set<string>();
}

/**
 * The namespace for `CellDecorations` statics.
 */
export namespace CellDecorations {
  /**
   * Whether a `metadata.jupyter_ci` value marks a generated cell (a hint:
   * copy and paste duplicates it; the server's run record is the truth).
   */
  export function isGenerated(
    hint: unknown
  ): hint is Record<string, unknown> & { run_id: string } {
    return (
      typeof hint === 'object' &&
      hint !== null &&
      typeof (hint as Record<string, unknown>)['run_id'] === 'string'
    );
  }
}

/**
 * The decoration of one cell view: the badge line, the diff of the model's
 * latest proposal, the user's own edit of it, and Restore on a user's cell.
 */
class DecorationWidget extends Widget {
  constructor(onRestore: () => void) {
    super();
    this.addClass('jp-jupyter-ci-CellDecoration');
    const line = document.createElement('div');
    line.className = 'jp-jupyter-ci-CellBadge';
    line.dataset.testid = 'jupyter-ci-badge';
    this._label = document.createElement('span');
    this._label.className = 'jp-jupyter-ci-CellBadge-label';
    this._label.textContent = 'generated by jupyter-ci';
    this._attempt = document.createElement('span');
    this._attempt.className = 'jp-jupyter-ci-CellBadge-attempt';
    this._stopped = document.createElement('span');
    this._stopped.className = 'jp-jupyter-ci-CellBadge-stopped';
    this._stopped.textContent = 'stopped before running';
    this._stopped.title =
      'The run was stopped while jupyter-ci wrote this cell: its code is commented out and it has not run.';
    this._stopped.hidden = true;
    this._restore = document.createElement('button');
    this._restore.type = 'button';
    this._restore.className =
      'jp-Button jp-mod-small jp-jupyter-ci-button jp-jupyter-ci-CellBadge-restore';
    this._restore.textContent = 'Restore your code';
    this._restore.setAttribute(
      'aria-label',
      'Restore your code: put back the code you wrote before jupyter-ci fixed it'
    );
    this._restore.title =
      'Put back the code you wrote before jupyter-ci fixed it (Ctrl+Z in the cell does the same; Ctrl+Z after Restore brings the fix back)';
    this._restore.dataset.testid = 'jupyter-ci-restore';
    this._restore.hidden = true;
    this._restore.addEventListener('click', onRestore);
    line.append(this._label, this._stopped, this._attempt, this._restore);
    this._diff = document.createElement('details');
    this._diff.className = 'jp-jupyter-ci-CellDiff';
    this._diff.dataset.testid = 'jupyter-ci-diff';
    this._diff.open = true;
    this._diff.hidden = true;
    this._editDiff = document.createElement('details');
    this._editDiff.className = 'jp-jupyter-ci-CellDiff';
    this._editDiff.dataset.testid = 'jupyter-ci-edit-diff';
    this._editDiff.open = true;
    this._editDiff.hidden = true;
    this.node.append(line, this._diff, this._editDiff);
  }

  render(state: ICellDecoration): void {
    this._attempt.textContent = state.restored
      ? ''
      : Private.attemptWords(state.attempt, state.maxAttempts);
    this._label.textContent = state.streaming
      ? 'jupyter-ci is writing…'
      : state.restored
        ? 'your code, restored'
        : state.agent
          ? `added by ${state.agent}`
          : state.changedBy
            ? `changed by ${state.changedBy}`
            : state.fixed
              ? 'fixed by jupyter-ci'
              : 'generated by jupyter-ci';
    this._stopped.hidden = !state.stopped;
    this._restore.hidden = !state.restorable || !!state.restored;
    const diff = state.restored ? '' : (state.diff ?? '');
    if (diff && diff !== this._shownDiff) {
      this._shownDiff = diff;
      Private.renderDiff(
        this._diff,
        diff,
        state.changedBy
          ? `${state.changedBy} changed this cell: before → after`
          : Private.diffTitle(state.fixed ?? false, state.diffAttempt)
      );
    }
    this._diff.hidden = !diff;
    const edit = state.restored ? '' : (state.editDiff ?? '');
    if (edit && edit !== this._shownEdit) {
      this._shownEdit = edit;
      Private.renderDiff(
        this._editDiff,
        edit,
        'your edit of jupyter-ci’s code: before → after'
      );
    }
    this._editDiff.hidden = !edit;
  }

  private readonly _label: HTMLSpanElement;
  private readonly _attempt: HTMLSpanElement;
  private readonly _stopped: HTMLSpanElement;
  private readonly _restore: HTMLButtonElement;
  private readonly _diff: HTMLDetailsElement;
  private readonly _editDiff: HTMLDetailsElement;
  private _shownDiff = '';
  private _shownEdit = '';
}

namespace Private {
  /**
   * The badge's words for a cell's try: "attempt 2/3" once it was fixed
   * (with the run's limit where known), nothing for a first try (the
   * run's status line says it while it runs), the same before and after a
   * reload.
   */
  export function attemptWords(
    attempt: number | undefined,
    maxAttempts: number | undefined
  ): string {
    if (attempt === undefined || attempt <= 1) {
      return '';
    }
    return `attempt ${attempt}${maxAttempts ? `/${maxAttempts}` : ''}`;
  }

  const widgets = new WeakMap<Cell, DecorationWidget>();

  export function same(a: ICellDecoration, b: ICellDecoration): boolean {
    return (
      a.attempt === b.attempt &&
      a.maxAttempts === b.maxAttempts &&
      a.streaming === b.streaming &&
      a.diff === b.diff &&
      a.diffAttempt === b.diffAttempt &&
      a.editDiff === b.editDiff &&
      a.stopped === b.stopped &&
      a.fixed === b.fixed &&
      a.restorable === b.restorable &&
      a.restored === b.restored &&
      a.agent === b.agent &&
      a.changedBy === b.changedBy
    );
  }

  /**
   * Put (or refresh) the decoration on a cell view, below its input.
   */
  export function decorate(
    cell: Cell,
    state: ICellDecoration,
    onRestore: () => void = () => undefined
  ): void {
    if (cell.isDisposed) {
      return;
    }
    cell.addClass(
      state.fixed ? 'jp-jupyter-ci-fixed' : 'jp-jupyter-ci-generated'
    );
    cell.toggleClass('jp-jupyter-ci-streaming', !!state.streaming);
    if (state.streaming !== undefined) {
      cell.readOnly = state.streaming;
    }
    let widget = widgets.get(cell);
    if (!widget || widget.isDisposed) {
      const created = new DecorationWidget(onRestore);
      widget = created;
      widgets.set(cell, created);
      // A cell builds its layout when first shown: place ours after that.
      void cell.ready.then(() => {
        if (cell.isDisposed || created.isDisposed || created.parent) {
          return;
        }
        const layout = cell.layout as PanelLayout;
        const input = layout.widgets.findIndex(w =>
          w.hasClass('jp-Cell-inputWrapper')
        );
        layout.insertWidget(
          input >= 0 ? input + 1 : layout.widgets.length,
          created
        );
      });
    }
    widget.render(state);
  }

  /**
   * What a diff of the model's code says it is.
   */
  export function diffTitle(
    fixed: boolean,
    attempt: number | undefined
  ): string {
    if (fixed) {
      return attempt !== undefined
        ? `jupyter-ci fixed your code for attempt ${attempt}: before → after`
        : 'jupyter-ci fixed your code: before → after';
    }
    return attempt !== undefined && attempt > 1
      ? `jupyter-ci fixed this cell for attempt ${attempt}: before → after`
      : 'jupyter-ci changed this cell: before → after';
  }

  export function renderDiff(
    node: HTMLDetailsElement,
    diff: string,
    title: string
  ): void {
    node.replaceChildren();
    const summary = document.createElement('summary');
    summary.textContent = title;
    const body = document.createElement('pre');
    body.className = 'jp-jupyter-ci-CellDiff-body';
    for (const text of diff.split('\n')) {
      if (text.startsWith('---') || text.startsWith('+++')) {
        continue;
      }
      const line = document.createElement('div');
      line.textContent = text;
      line.className = text.startsWith('+')
        ? 'jp-jupyter-ci-diff-added'
        : text.startsWith('-')
          ? 'jp-jupyter-ci-diff-removed'
          : text.startsWith('@@')
            ? 'jp-jupyter-ci-diff-hunk'
            : 'jp-jupyter-ci-diff-context';
      body.append(line);
    }
    node.append(summary, body);
  }
}
