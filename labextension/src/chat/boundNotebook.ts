import { NotebookActions, NotebookPanel } from '@jupyterlab/notebook';

import { escapeMarkdownHtml } from '../answerOutput';
import { FileOpener, notebookFolder } from '../files';
import { NotebookIndex } from '../notebooks';
import { CellPlacement } from '../placement';
import { ChatModel } from './model';
import type { IProposal } from './steps';

/**
 * The notebook the chat panel is bound to (the one in focus), as the panel
 * acts on it: where a request's new cells go, inserting code or an answer,
 * showing a cell, reading a proposed cell's code as it is now, and opening
 * the files its runs wrote.
 */
export class BoundNotebook {
  constructor(options: BoundNotebook.IOptions) {
    this._options = options;
  }

  /**
   * A view of the notebook (null when the panel is bound to none, or it is
   * not open).
   */
  get panel(): NotebookPanel | null {
    const path = this._options.path();
    return path ? this._options.index.panel(path) : null;
  }

  /**
   * Where new cells go in the notebook: after the previous run's cells,
   * unless the user has selected another cell since (`CellPlacement`).
   */
  anchor(panel: NotebookPanel): string | null {
    return this._options.placement.anchor(
      panel,
      this._options.model.runCells(panel.context.path)
    );
  }

  /**
   * Insert code as a new cell below the notebook's active cell.
   */
  insertBelow(code: string): void {
    const panel = this.panel;
    if (!panel) {
      return;
    }
    NotebookActions.insertBelow(panel.content);
    panel.content.activeCell?.model.sharedModel.setSource(code);
  }

  /**
   * Insert text (an answer) as a Markdown cell of the notebook where the
   * next request's cells would go, and select it: the next request's cells
   * then follow it.
   */
  insertMarkdown(text: string): void {
    const panel = this.panel;
    const model = panel?.content.model;
    if (!panel || !model) {
      return;
    }
    const anchor = this.anchor(panel);
    const found = anchor ? NotebookIndex.cellIn(panel, anchor) : null;
    const index = found ? found.index + 1 : model.cells.length;
    // The model's text, as the %%ci answer writes it: no raw HTML, no image
    // that loads (inertMedia.ts), since JupyterLab renders the cell.
    model.sharedModel.insertCell(index, {
      cell_type: 'markdown',
      source: escapeMarkdownHtml(text)
    });
    const notebook = panel.content;
    notebook.activeCellIndex = index;
    const widget = notebook.widgets[index];
    if (widget) {
      void notebook.scrollToCell(widget);
    }
  }

  /**
   * Scroll the notebook to a cell and select it.
   */
  showCell(cellId: string): void {
    const path = this._options.path();
    const found = path ? this._options.index.findCell(path, cellId) : null;
    if (!found) {
      return;
    }
    const notebook = found.panel.content;
    notebook.activeCellIndex = found.index;
    const widget = notebook.widgets[found.index];
    if (widget) {
      void notebook.scrollToCell(widget);
    }
  }

  /**
   * A proposal with the source its cell holds now in the notebook (the cell
   * is the truth once the code has streamed into it).
   */
  withCellSource(proposal: IProposal): IProposal {
    const path = this._options.path();
    const found = path
      ? this._options.index.findCell(path, proposal.cellId)
      : null;
    const source = found?.model.sharedModel.getSource();
    return source && source !== proposal.source
      ? { ...proposal, source }
      : proposal;
  }

  /**
   * The folder where the notebook's runs' file paths start.
   */
  filesFolder(): string | null {
    return notebookFolder(this._options.path());
  }

  /**
   * Open a file (its path from the server's root) in JupyterLab.
   */
  openFile(path: string): void {
    this._options.openFile?.(path);
  }

  private readonly _options: BoundNotebook.IOptions;
}

/**
 * The namespace for `BoundNotebook` statics.
 */
export namespace BoundNotebook {
  export interface IOptions {
    index: NotebookIndex;
    /**
     * Where a request's new cells go.
     */
    placement: CellPlacement;
    /**
     * The conversations (the cells of the notebook's earlier runs).
     */
    model: ChatModel;
    /**
     * The path of the notebook the panel is bound to (null: none).
     */
    path: () => string | null;
    /**
     * Opens a file in JupyterLab (the files a run wrote).
     */
    openFile: FileOpener | null;
  }
}
