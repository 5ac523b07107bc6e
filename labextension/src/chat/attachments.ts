import { PathExt } from '@jupyterlab/coreutils';
import { NotebookPanel } from '@jupyterlab/notebook';
import { Contents } from '@jupyterlab/services';

import type { Attachment } from './input';
import { uploadFiles } from './upload';

/**
 * What goes with the panel's next request, kept per notebook: the cells and
 * files the user attached to the notebook the panel is bound to (its
 * selected cells, files from the file browser, files dropped from the
 * desktop once they are uploaded into the notebook's folder), each once.
 */
export class ChatAttachments {
  constructor(options: ChatAttachments.IOptions) {
    this._options = options;
  }

  /**
   * The attachments of the notebook at `path` (none without one).
   */
  of(path: string | null): readonly Attachment[] {
    return path ? (this._byPath.get(path) ?? []) : [];
  }

  /**
   * Attach the notebook's selected cells (their code goes with the request).
   */
  attachSelectedCells(): void {
    const panel = this._options.notebook();
    const path = this._options.path();
    if (!panel || !path) {
      return;
    }
    const notebook = panel.content;
    const added: Attachment[] = [];
    notebook.widgets.forEach((cell, index) => {
      if (notebook.isSelectedOrActive(cell)) {
        added.push({
          kind: 'cell',
          cellId: cell.model.id,
          label: `cell [${index + 1}]`,
          source: cell.model.sharedModel.getSource()
        });
      }
    });
    this._attach(path, added);
  }

  /**
   * Attach files by their paths under the server's root (the server adds a
   * table's schema and first rows).
   */
  attachFiles(paths: string[]): void {
    const path = this._options.path();
    if (!path) {
      return;
    }
    this._attach(
      path,
      paths.map(file => ({ kind: 'file', path: file }))
    );
  }

  /**
   * Upload files dropped from outside JupyterLab into the notebook's folder
   * (never over an existing file), then attach them; say what was not.
   */
  async uploadAndAttach(files: readonly File[]): Promise<void> {
    const { contents, notice } = this._options;
    const path = this._options.path();
    if (!path || !files.length) {
      return;
    }
    if (!contents) {
      notice(
        path,
        'Files from outside JupyterLab cannot be taken here: upload them with the file browser, then attach them.'
      );
      return;
    }
    const folder = PathExt.dirname(path);
    const { uploaded, refused } = await uploadFiles(contents, folder, files);
    if (uploaded.length) {
      this.attachFiles(uploaded);
      const names = uploaded.map(file => PathExt.basename(file)).join(', ');
      notice(
        path,
        `Uploaded ${names} to ${folder || 'the server’s root folder'} and attached it.`
      );
    }
    for (const reason of refused) {
      notice(path, reason);
    }
  }

  /**
   * Take an attachment off the bound notebook's list.
   */
  remove(attachment: Attachment): void {
    const path = this._options.path();
    if (path) {
      this._set(
        path,
        this.of(path).filter(item => item !== attachment)
      );
    }
  }

  /**
   * The notebook's request went with its attachments: its list starts over.
   */
  sent(path: string): void {
    this._set(path, []);
  }

  private _attach(path: string, added: Attachment[]): void {
    const current = this.of(path);
    const key = (item: Attachment): string =>
      item.kind === 'file' ? `f:${item.path}` : `c:${item.cellId}`;
    const seen = new Set(current.map(key));
    this._set(path, [
      ...current,
      ...added.filter(item => !seen.has(key(item)))
    ]);
  }

  private _set(path: string, attachments: readonly Attachment[]): void {
    this._byPath.set(path, attachments);
    if (path === this._options.path()) {
      this._options.changed(attachments);
    }
  }

  private readonly _options: ChatAttachments.IOptions;
  private readonly _byPath = new Map<string, readonly Attachment[]>();
}

/**
 * The namespace for `ChatAttachments` statics.
 */
export namespace ChatAttachments {
  export interface IOptions {
    /**
     * The path of the notebook the panel is bound to (null: none).
     */
    path: () => string | null;
    /**
     * A view of that notebook (null: none).
     */
    notebook: () => NotebookPanel | null;
    /**
     * The server's contents (files dropped from the desktop are uploaded);
     * null where there are none.
     */
    contents: Contents.IManager | null;
    /**
     * Say something in the conversation of the notebook at `path`.
     */
    notice: (path: string, text: string) => void;
    /**
     * The bound notebook's attachments changed.
     */
    changed: (attachments: readonly Attachment[]) => void;
  }
}
