import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';

import { jupyterCIIcon } from './icons';
import { JupyterCIPanel, PANEL_ID } from './panel';
import { ServerStatusModel } from './status';

/**
 * The command ids jupyter-ci registers.
 */
export namespace CommandIDs {
  export const openPanel = 'jupyter-ci:open-panel';
}

/**
 * The category of jupyter-ci commands in the command palette.
 */
const PALETTE_CATEGORY = 'jupyter-ci';

/**
 * The jupyter-ci side panel and its command.
 *
 * Needs nothing Lab-specific, so it runs in JupyterLab and Notebook 7 alike.
 */
const plugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-ci:plugin',
  description: 'The jupyter-ci side panel.',
  autoStart: true,
  optional: [ICommandPalette, ILayoutRestorer],
  activate: (
    app: JupyterFrontEnd,
    palette: ICommandPalette | null,
    restorer: ILayoutRestorer | null
  ): void => {
    const model = new ServerStatusModel();
    const panel = new JupyterCIPanel({ model });
    panel.disposed.connect(() => {
      model.dispose();
    });

    app.shell.add(panel, 'right', { rank: 1000 });
    if (restorer) {
      restorer.add(panel, PANEL_ID);
    }

    app.commands.addCommand(CommandIDs.openPanel, {
      label: 'Open jupyter-ci panel',
      caption: 'Show the jupyter-ci side panel',
      icon: args => (args['isPalette'] ? undefined : jupyterCIIcon),
      execute: () => {
        app.shell.activateById(panel.id);
      }
    });
    if (palette) {
      palette.addItem({
        command: CommandIDs.openPanel,
        category: PALETTE_CATEGORY
      });
    }

    // Fetch in the background: activation must not wait for the server.
    void model.refresh();
  }
};

export default plugin;
