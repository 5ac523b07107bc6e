import { ILayoutRestorer, JupyterFrontEnd } from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { IDefaultFileBrowser } from '@jupyterlab/filebrowser';
import { NotebookActions } from '@jupyterlab/notebook';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { ISettingRegistry } from '@jupyterlab/settingregistry';

import { fileOpener } from '../files';
import { CIConnection } from '../connection';
import { NotebookIndex } from '../notebooks';
import { CellPlacement } from '../placement';
import { RunTracker } from '../runs';
import { jupyterCIIcon } from '../icons';
import { ChatController } from './controller';
import { PanelPrefs } from './prefs';
import { ChatPanel } from './panel';

/**
 * The commands of the chat panel.
 */
export namespace ChatCommandIDs {
  export const fixCell = 'jupyter-ci:fix-cell';
  export const attachFile = 'jupyter-ci:attach-file';
  export const attachCells = 'jupyter-ci:attach-cells';
  export const clear = 'jupyter-ci:clear-conversation';
  export const exportMarkdown = 'jupyter-ci:export-conversation';
}

/**
 * What the chat panel needs from the notebook side of the extension.
 */
export interface IChatOptions {
  index: NotebookIndex;
  connection: CIConnection;
  runs: RunTracker;
  placement: CellPlacement;
  rendermime: IRenderMimeRegistry;
  registry: ISettingRegistry | null;
  settingsPluginId: string;
  restorer: ILayoutRestorer | null;
  palette: ICommandPalette | null;
  fileBrowser: IDefaultFileBrowser | null;
  userOptions: () => Record<string, unknown>;
}

/**
 * Add the chat side panel and its commands: "Fix with jupyter-ci" on failed
 * cells, "Attach to jupyter-ci" on files, attach cells, clear and export.
 */
export function addChatPanel(
  app: JupyterFrontEnd,
  options: IChatOptions
): ChatPanel {
  const prefs = new PanelPrefs(options.registry, options.settingsPluginId);
  const controller = new ChatController({
    index: options.index,
    connection: options.connection,
    runs: options.runs,
    placement: options.placement,
    prefs,
    userOptions: options.userOptions,
    contents: app.serviceManager.contents,
    openFile: fileOpener(app.commands)
  });
  const panel = new ChatPanel({ controller, rendermime: options.rendermime });
  panel.disposed.connect(() => controller.dispose());
  app.shell.add(panel, 'right', { rank: 1000 });
  options.restorer?.add(panel, panel.id);

  const { commands } = app;
  const show = (): void => app.shell.activateById(panel.id);

  commands.addCommand(ChatCommandIDs.fixCell, {
    label: 'Fix with jupyter-ci',
    icon: jupyterCIIcon,
    caption:
      'Ask jupyter-ci to fix this failed cell, with its code and traceback',
    isVisible: () => Private.activeCellFailed(options.index),
    isEnabled: () => Private.activeCellFailed(options.index),
    execute: async args => {
      const panelOfNotebook = options.index.tracker.currentWidget;
      const cell = panelOfNotebook?.content.activeCell;
      const cellId =
        typeof args['cell_id'] === 'string' ? args['cell_id'] : cell?.model.id;
      if (!cellId) {
        return;
      }
      show();
      const index = panelOfNotebook?.content.widgets.findIndex(
        widget => widget.model.id === cellId
      );
      const label = index !== undefined && index >= 0 ? ` [${index + 1}]` : '';
      await controller.send(`Fix the failing cell${label}.`, cellId);
    }
  });
  commands.addCommand(ChatCommandIDs.attachFile, {
    label: 'Attach to jupyter-ci',
    caption:
      'Attach this file to the next jupyter-ci request (tables: their schema and first rows)',
    isEnabled: () => controller.state.path !== null,
    execute: args => {
      const paths =
        typeof args['path'] === 'string'
          ? [args['path']]
          : Array.from(options.fileBrowser?.selectedItems() ?? [])
              .filter(item => item.type !== 'directory')
              .map(item => item.path);
      controller.attachments.attachFiles(paths);
      show();
    }
  });
  commands.addCommand(ChatCommandIDs.attachCells, {
    label: 'Attach selected cells to jupyter-ci',
    isEnabled: () => controller.state.path !== null,
    execute: () => {
      controller.attachments.attachSelectedCells();
      show();
    }
  });
  commands.addCommand(ChatCommandIDs.clear, {
    label: 'Clear the jupyter-ci conversation of this notebook',
    isEnabled: () => controller.state.path !== null,
    execute: () => controller.clear()
  });
  commands.addCommand(ChatCommandIDs.exportMarkdown, {
    label: 'Export the jupyter-ci conversation as Markdown',
    isEnabled: () => controller.state.path !== null,
    execute: () => controller.exportMarkdown()
  });

  // The cell toolbar shows "Fix" only on a failed cell: refresh it as cells run.
  const refreshFix = (): void =>
    commands.notifyCommandChanged(ChatCommandIDs.fixCell);
  options.index.tracker.activeCellChanged.connect(refreshFix);
  options.connection.events.connect((_sender, event) => {
    if (event.type === 'execution_finished') {
      refreshFix();
    }
  });
  NotebookActions.executed.connect(refreshFix);

  app.contextMenu.addItem({
    command: ChatCommandIDs.fixCell,
    selector: '.jp-Notebook .jp-CodeCell',
    rank: 0
  });
  app.contextMenu.addItem({
    command: ChatCommandIDs.attachCells,
    selector: '.jp-Notebook .jp-Cell',
    rank: 1
  });
  app.contextMenu.addItem({
    command: ChatCommandIDs.attachFile,
    selector: '.jp-DirListing-item[data-isdir="false"]',
    rank: 20
  });
  if (options.palette) {
    for (const command of [
      ChatCommandIDs.fixCell,
      ChatCommandIDs.attachCells,
      ChatCommandIDs.clear,
      ChatCommandIDs.exportMarkdown
    ]) {
      options.palette.addItem({ command, category: 'jupyter-ci' });
    }
  }
  return panel;
}

namespace Private {
  /**
   * Whether the current notebook's active cell shows an error output.
   */
  export function activeCellFailed(index: NotebookIndex): boolean {
    const cell = index.tracker.currentWidget?.content.activeCell;
    if (!cell || cell.model.type !== 'code') {
      return false;
    }
    const outputs = cell.model.toJSON().outputs;
    return (
      Array.isArray(outputs) &&
      outputs.some(
        output =>
          typeof output === 'object' &&
          output !== null &&
          (output as { output_type?: unknown }).output_type === 'error'
      )
    );
  }
}
