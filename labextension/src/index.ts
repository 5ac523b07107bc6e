import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { IDefaultFileBrowser } from '@jupyterlab/filebrowser';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { MessageLoop } from '@lumino/messaging';

import { AgentActivity } from './agentActivity';
import { addAskCommand } from './ask';
import { NotebookBridge } from './bridge';
import { CellDecorations } from './cellDecorations';
import { CellReview } from './cellReview';
import { addChatPanel } from './chat/plugin';
import { PANEL_ID } from './chat/panel';
import { CIConnection } from './connection';
import { CommandIDs } from './constants';
import { FixInView } from './fixInView';
import { HandoffController } from './handoff';
import { handoffRendererFactory } from './handoffRenderer';
import { jupyterCIIcon } from './icons';
import { plainTextCICells } from './ciCellMode';
import { NotebookIndex, watchPanels } from './notebooks';
import { CellPlacement } from './placement';
import { RunDecorations } from './runDecorations';
import { addRunIndicator } from './runIndicator';
import { RunTracker } from './runs';
import { UserSettings } from './settings';
import { StatusOutputs } from './statusOutput';
import { fileOpener } from './files';
import { statusRendererFactory } from './statusRenderer';
import { SourceStreamer } from './streaming';
import { CallTimings } from './timings';

export { CommandIDs } from './constants';

/**
 * The category of jupyter-ci commands in the command palette.
 */
const PALETTE_CATEGORY = 'jupyter-ci';

/**
 * The id of the plugin whose settings (labextension/schema/plugin.json) hold
 * the user's jupyter-ci settings.
 */
const SETTINGS_PLUGIN = 'jupyter-ci:plugin';

/**
 * The command that opens the jupyter-ci side panel; its id names the user's
 * settings (labextension/schema/plugin.json). The panel itself is the chat
 * panel, added with the notebook side below.
 */
const panelPlugin: JupyterFrontEndPlugin<void> = {
  id: SETTINGS_PLUGIN,
  description: 'The command that opens the jupyter-ci side panel.',
  autoStart: true,
  optional: [ICommandPalette],
  activate: (app: JupyterFrontEnd, palette: ICommandPalette | null): void => {
    app.commands.addCommand(CommandIDs.openPanel, {
      label: 'Open jupyter-ci panel',
      caption: 'Show the jupyter-ci side panel',
      icon: args => (args['isPalette'] ? undefined : jupyterCIIcon),
      execute: () => {
        app.shell.activateById(PANEL_ID);
      }
    });
    if (palette) {
      palette.addItem({
        command: CommandIDs.openPanel,
        category: PALETTE_CATEGORY
      });
    }
  }
};

/**
 * The notebook side of jupyter-ci: the websocket to the server, the bridge
 * that answers its calls, the `%%ci` handoff (stamp, claim, Run All), status
 * outputs and their renderer, cell decorations, review in the notebook, and
 * `jupyter-ci:ask`.
 *
 * Works wherever notebooks open (JupyterLab, Notebook 7); on pages without a
 * notebook tracker only the renderers are registered.
 */
const notebookPlugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-ci:notebook',
  description: 'Runs jupyter-ci requests in notebooks: %%ci and the bridge.',
  autoStart: true,
  requires: [IRenderMimeRegistry],
  optional: [
    INotebookTracker,
    ISettingRegistry,
    ICommandPalette,
    ILayoutRestorer,
    IDefaultFileBrowser
  ],
  activate: (
    app: JupyterFrontEnd,
    rendermime: IRenderMimeRegistry,
    tracker: INotebookTracker | null,
    registry: ISettingRegistry | null,
    palette: ICommandPalette | null,
    restorer: ILayoutRestorer | null,
    fileBrowser: IDefaultFileBrowser | null
  ): void => {
    const settings = new UserSettings(registry, SETTINGS_PLUGIN);
    const index = tracker ? new NotebookIndex(tracker) : null;
    const connection = new CIConnection({
      notebookPaths: () => index?.openPaths() ?? []
    });
    const runs = new RunTracker(connection);
    rendermime.addFactory(
      statusRendererFactory(runs, fileOpener(app.commands))
    );
    rendermime.addFactory(handoffRendererFactory);
    if (!index) {
      return;
    }

    const streamer = new SourceStreamer(() => settings.streamInterval);
    const decorations = new CellDecorations(index);
    const timings = new CallTimings();
    const statusOutputs = new StatusOutputs(index, runs);
    const userOptions = (): Record<string, unknown> => settings.runOptions();
    const bridge = new NotebookBridge({
      connection,
      index,
      runs,
      streamer,
      decorations,
      timings,
      userOptions
    });
    new RunDecorations({
      connection,
      index,
      runs,
      streamer,
      decorations,
      ownsRun: runId => bridge.ownsRun(runId)
    });
    new FixInView(index, runs);
    new AgentActivity(index, runs);
    const placement = new CellPlacement(index, runs);
    new HandoffController({
      index,
      connection,
      runs,
      statusOutputs,
      userOptions
    });

    index.pathsChanged.connect(() => connection.subscribe());
    connection.notices.connect((_sender, error) => {
      console.warn(`jupyter-ci server: ${error.message}`);
    });
    watchPanels(index.tracker, panel => {
      addRunIndicator(panel, runs);
      Private.badgeGeneratedCells(panel, decorations);
      plainTextCICells(panel);
    });

    addAskCommand(app.commands, {
      index,
      connection,
      runs,
      placement,
      userOptions
    });
    const chat = addChatPanel(app, {
      index,
      connection,
      runs,
      placement,
      rendermime,
      registry,
      settingsPluginId: SETTINGS_PLUGIN,
      restorer,
      palette,
      fileBrowser,
      userOptions
    });
    const review = new CellReview({
      index,
      runs,
      connection,
      show: panel => app.shell.activateById(panel.id),
      panelShowing: path =>
        chat.isVisible && chat.controller.state.path === path,
      commands: app.commands,
      placement
    });
    // The panel shows (its `after-show` is handled after hooks: look then) or
    // switches notebooks.
    MessageLoop.installMessageHook(chat, (_handler, message) => {
      if (message.type === 'after-show') {
        void Promise.resolve().then(() => review.panelChanged());
      }
      return true;
    });
    chat.controller.changed.connect(() => review.panelChanged());
    app.commands.addCommand(CommandIDs.timings, {
      label: 'jupyter-ci: timings of the latest calls (for benchmarks)',
      execute: args => {
        const all = timings.all();
        if (args['clear'] === true) {
          timings.clear();
        }
        return all;
      }
    });
    if (palette) {
      palette.addItem({ command: CommandIDs.ask, category: PALETTE_CATEGORY });
    }

    // Connects in the background: activation never waits for the server.
    connection.start();
  }
};

namespace Private {
  /**
   * Badge the generated cells of a notebook once it is loaded, and as its
   * cells change.
   */
  export function badgeGeneratedCells(
    panel: NotebookPanel,
    decorations: CellDecorations
  ): void {
    let timer = 0;
    const scan = (): void => {
      window.clearTimeout(timer);
      timer = window.setTimeout(() => decorations.scan(panel), 100);
    };
    void panel.context.ready.then(() => {
      decorations.scan(panel);
      panel.content.model?.cells.changed.connect(scan);
    });
    panel.disposed.connect(() => window.clearTimeout(timer));
  }
}

export default [panelPlugin, notebookPlugin];
