import type { Cell } from '@jupyterlab/cells';
import type { Notebook } from '@jupyterlab/notebook';

import { CIConnection } from './connection';
import { Lifecycle } from './lifecycle';
import { NotebookIndex } from './notebooks';
import { RATE_LIMITED_REASON, type RunEvent } from './protocol';
import { RunTracker } from './runs';

/**
 * Keeps the cell a run is fixing in view, with the run's status output when
 * both fit: the notebook scrolls when the run starts fixing a cell, when the
 * fix is written into it and when it runs again, so the user sees the fix
 * (its diff, its badge) rather than the traceback it answers. Only the
 * notebook scrolls: the focus stays where the user has it. Only in the tab
 * that owns the run (its cells are written there), only while the notebook
 * is shown.
 */
export class FixInView extends Lifecycle {
  constructor(index: NotebookIndex, runs: RunTracker) {
    super();
    this._index = index;
    this._runs = runs;
    this.listen(runs.connection.events, this._onEvent);
  }

  protected onDispose(): void {
    window.cancelAnimationFrame(this._frame);
  }

  private readonly _onEvent = (
    _sender: CIConnection,
    event: RunEvent
  ): void => {
    const view = this._runs.get(event.run_id);
    const path = view?.notebookPath;
    if (!view || !path || view.owner !== this._runs.connection.clientId) {
      return;
    }
    let cellId: string | null = null;
    if (
      event.type === 'state' &&
      event.state === 'fixing' &&
      event.reason !== RATE_LIMITED_REASON
    ) {
      cellId = view.attempt?.cellId ?? null;
    } else if (
      event.type === 'cell_updated' &&
      (event.cause === 'fix' || event.cause === 'own_fix')
    ) {
      cellId = event.cell_id;
    } else if (event.type === 'execution_started' && event.attempt > 1) {
      cellId = event.cell_id;
    }
    if (cellId === null) {
      return;
    }
    const target = { path, cellId, anchorId: view.anchorCellId };
    // After the cell shows the change (the diff, the new code).
    window.cancelAnimationFrame(this._frame);
    this._frame = window.requestAnimationFrame(() => {
      void this._reveal(target.path, target.cellId, target.anchorId);
    });
  };

  private async _reveal(
    path: string,
    cellId: string,
    anchorId: string | null
  ): Promise<void> {
    const panel = this._index.panel(path);
    if (!panel || !panel.isVisible) {
      return;
    }
    const notebook = panel.content;
    const index = notebook.widgets.findIndex(w => w.model.id === cellId);
    if (index < 0) {
      return;
    }
    const cell = notebook.widgets[index];
    if (!cell.node.isConnected || cell.node.getClientRects().length === 0) {
      // Windowed out of the page: bring it in first.
      await notebook.scrollToItem(index, 'start');
    }
    const anchor = anchorId
      ? notebook.widgets.find(w => w.model.id === anchorId)
      : undefined;
    const status = anchor?.node.querySelector(
      '[data-testid="jupyter-ci-status-output"]'
    );
    Private.scrollIntoView(
      notebook,
      Private.head(cell),
      status?.getBoundingClientRect() ?? null
    );
  }

  private readonly _index: NotebookIndex;
  private readonly _runs: RunTracker;
  private _frame = 0;
}

namespace Private {
  /**
   * Room kept between what is shown and the notebook's edges (px).
   */
  const MARGIN = 8;

  /**
   * A cell's head: its input and jupyter-ci's decoration under it (the
   * badge and the diff), without its outputs.
   */
  export function head(cell: Cell): DOMRect {
    const parts = [
      cell.node.querySelector('.jp-Cell-inputWrapper'),
      cell.node.querySelector('.jp-jupyter-ci-CellDecoration')
    ]
      .filter((node): node is Element => node !== null)
      .map(node => node.getBoundingClientRect())
      .filter(rect => rect.height > 0);
    if (!parts.length) {
      return cell.node.getBoundingClientRect();
    }
    const top = Math.min(...parts.map(rect => rect.top));
    const bottom = Math.max(...parts.map(rect => rect.bottom));
    return new DOMRect(parts[0].left, top, parts[0].width, bottom - top);
  }

  /**
   * Scroll the notebook as little as possible to show `target`, and `also`
   * with it when both fit; a target taller than the notebook shows its top.
   */
  export function scrollIntoView(
    notebook: Notebook,
    target: DOMRect,
    also: DOMRect | null
  ): void {
    const scroller = notebook.outerNode;
    const box = scroller.getBoundingClientRect();
    let top = target.top;
    let bottom = target.bottom;
    if (also && also.height > 0) {
      const joined = {
        top: Math.min(top, also.top),
        bottom: Math.max(bottom, also.bottom)
      };
      if (joined.bottom - joined.top <= box.height - 2 * MARGIN) {
        ({ top, bottom } = joined);
      }
    }
    let delta = 0;
    if (top < box.top + MARGIN) {
      delta = top - box.top - MARGIN;
    } else if (bottom > box.bottom - MARGIN) {
      delta = Math.min(bottom - box.bottom + MARGIN, top - box.top - MARGIN);
    }
    if (delta !== 0) {
      scroller.scrollBy({ top: delta, behavior: 'instant' });
    }
  }
}
