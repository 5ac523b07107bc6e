import type { ICellModel, ICodeCellModel } from '@jupyterlab/cells';

import type { NotebookIndex } from './notebooks';

/**
 * Resolves `true` once `test` holds for the cell `cellId`, checked now and
 * on every change of its outputs or of its notebook's cells (events, not a
 * poll); `false` when the cell is gone or `stop` resolves first.
 */
export function untilCell(
  index: NotebookIndex,
  cellId: string,
  test: (model: ICellModel) => boolean,
  stop: Promise<unknown>
): Promise<boolean> {
  const found = index.findCellAnywhere(cellId);
  if (!found) {
    return Promise.resolve(false);
  }
  if (test(found.model)) {
    return Promise.resolve(true);
  }
  const cells = found.panel.content.model?.cells ?? null;
  const outputs =
    found.model.type === 'code'
      ? (found.model as ICodeCellModel).outputs
      : null;
  return new Promise<boolean>(resolve => {
    let settled = false;
    const finish = (result: boolean): void => {
      if (settled) {
        return;
      }
      settled = true;
      outputs?.changed.disconnect(check);
      cells?.changed.disconnect(check);
      resolve(result);
    };
    function check(): void {
      const now = index.findCellAnywhere(cellId);
      if (!now) {
        finish(false);
      } else if (test(now.model)) {
        finish(true);
      }
    }
    outputs?.changed.connect(check);
    cells?.changed.connect(check);
    void stop.then(() => finish(false));
  });
}

/**
 * Resolves after `ms` milliseconds.
 */
export function delay(ms: number): Promise<void> {
  return new Promise(resolve => window.setTimeout(resolve, ms));
}
