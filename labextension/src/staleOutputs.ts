import type { Cell, ICodeCellModel } from '@jupyterlab/cells';
import { DisposableDelegate, IDisposable } from '@lumino/disposable';
import { PanelLayout, Widget } from '@lumino/widgets';

/**
 * Mark a cell's outputs as those of its code before the change it waits on
 * (a fix waiting for review sits above the traceback it answers): they are
 * dimmed, and a line above them says whose they are. Nothing is done for a
 * cell without outputs. Dispose the result to take the mark away.
 */
export function markStaleOutputs(cell: Cell, text: string): IDisposable {
  const model = cell.model;
  if (model.type !== 'code' || !(model as ICodeCellModel).outputs.length) {
    return new DisposableDelegate(() => undefined);
  }
  const label = new Widget();
  label.addClass(STALE_LABEL_CLASS);
  label.node.dataset.testid = 'jupyter-ci-stale-outputs';
  label.node.textContent = text;
  cell.addClass(STALE_CLASS);
  void cell.ready.then(() => {
    if (cell.isDisposed || label.isDisposed) {
      return;
    }
    const layout = cell.layout as PanelLayout;
    const outputs = layout.widgets.findIndex(w =>
      w.hasClass('jp-Cell-outputWrapper')
    );
    layout.insertWidget(outputs >= 0 ? outputs : layout.widgets.length, label);
  });
  return new DisposableDelegate(() => {
    label.dispose();
    if (!cell.isDisposed) {
      cell.removeClass(STALE_CLASS);
    }
  });
}

/**
 * The words above the outputs of a cell waiting for review: of which try
 * they are (`attempt`, when the run ran the cell), or of the user's own code.
 */
export function staleOutputsText(attempt: number | null): string {
  return attempt !== null
    ? `Output of attempt ${attempt}, before this change: the new code has not run yet`
    : 'Output of your code, before this fix: the fix has not run yet';
}

/**
 * The class of a cell whose outputs are marked (its outputs are dimmed).
 */
export const STALE_CLASS = 'jp-jupyter-ci-staleOutputs';
const STALE_LABEL_CLASS = 'jp-jupyter-ci-StaleOutputs-label';
