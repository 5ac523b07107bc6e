import { NotebookPanel } from '@jupyterlab/notebook';

import type { Attachment } from './input';
import type { IPanelPrefs } from './prefs';

/**
 * The fields start_run and preview share.
 */
export interface IRequestFields {
  notebook_path: string;
  kernel_id: string;
  prompt: string;
  options: Record<string, unknown>;
  anchor_cell_id: string | null;
  fix_cell_id: string | null;
  attachments: string[];
  attached_cell_ids: string[];
  user_options: Record<string, unknown>;
}

/**
 * What goes into one request from the panel.
 */
export interface IRequestInput {
  text: string;
  /**
   * The cell to fix in place ("Fix with jupyter-ci"), or null.
   */
  fixCellId: string | null;
  /**
   * The cell the new cells go after (see `CellPlacement`).
   */
  anchorCellId: string | null;
  attachments: readonly Attachment[];
  prefs: IPanelPrefs;
  userOptions: Record<string, unknown>;
}

/**
 * The request for a notebook: attached cells and files go by their ids and
 * paths (the server reads and describes them), the panel's choices
 * as the request's own options; new cells go after `anchorCellId`. Null
 * when the notebook has no kernel.
 */
export async function buildRequest(
  panel: NotebookPanel,
  input: IRequestInput
): Promise<IRequestFields | null> {
  await panel.sessionContext.ready;
  const kernel = panel.sessionContext.session?.kernel;
  if (!kernel) {
    return null;
  }
  const files: string[] = [];
  const cellIds: string[] = [];
  for (const item of input.attachments) {
    if (item.kind === 'cell') {
      cellIds.push(item.cellId);
    } else {
      files.push(item.path);
    }
  }
  const { prefs } = input;
  const options: Record<string, unknown> = {};
  if (prefs.mode) {
    options.mode = prefs.mode;
  }
  if (prefs.model) {
    options.model = prefs.model;
  }
  if (prefs.shareOutputs !== null) {
    options.share_outputs = prefs.shareOutputs;
  }
  return {
    notebook_path: panel.context.path,
    kernel_id: kernel.id,
    prompt: input.text,
    options,
    anchor_cell_id: input.fixCellId ? null : input.anchorCellId,
    fix_cell_id: input.fixCellId,
    attachments: files,
    attached_cell_ids: cellIds,
    user_options: input.userOptions
  };
}
