import { ICellModel } from '@jupyterlab/cells';
import { NotebookPanel } from '@jupyterlab/notebook';

import { isCICell } from './constants';

/**
 * The editor language of a `%%ci` cell: its request is plain language, not
 * Python, so it is not highlighted as code.
 */
export const CI_CELL_MIMETYPE = 'text/plain';

/**
 * Keep every `%%ci` cell of a notebook view in plain text (and give a cell
 * the notebook's language back when it stops being one): as the notebook
 * loads, as cells are added, as a cell's first line changes, and when the
 * notebook sets its kernel's language on every cell again.
 */
export function plainTextCICells(panel: NotebookPanel): void {
  const watched = new WeakSet<ICellModel>();
  const apply = (model: ICellModel): void => {
    if (model.type !== 'code') {
      return;
    }
    const ci = isCICell(model.sharedModel.getSource());
    const wanted = ci ? CI_CELL_MIMETYPE : panel.content.codeMimetype;
    if (
      model.mimeType !== wanted &&
      (ci || model.mimeType === CI_CELL_MIMETYPE)
    ) {
      model.mimeType = wanted;
    }
  };
  const watch = (model: ICellModel): void => {
    if (!watched.has(model)) {
      watched.add(model);
      model.contentChanged.connect(() => apply(model));
      model.mimeTypeChanged.connect(() => apply(model));
    }
    apply(model);
  };
  void panel.context.ready.then(() => {
    const cells = panel.content.model?.cells;
    if (!cells) {
      return;
    }
    for (let index = 0; index < cells.length; index++) {
      watch(cells.get(index));
    }
    cells.changed.connect((_sender, change) => {
      if (change.type === 'add' || change.type === 'set') {
        change.newValues.forEach(watch);
      }
    });
  });
}
