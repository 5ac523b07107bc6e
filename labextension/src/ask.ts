import { InputDialog, Notification } from '@jupyterlab/apputils';
import { CommandRegistry } from '@lumino/commands';
import type { ReadonlyPartialJSONObject } from '@lumino/coreutils';

import { CIConnection, RequestRefusedError } from './connection';
import { CommandIDs } from './constants';
import { NotebookIndex } from './notebooks';
import { CellPlacement } from './placement';
import { IRunView, RunTracker } from './runs';
import { makeStatus, statusFromRun } from './statusData';

/**
 * What `jupyter-ci:ask` needs.
 */
export interface IAskOptions {
  index: NotebookIndex;
  connection: CIConnection;
  runs: RunTracker;
  /**
   * Where a request's new cells go.
   */
  placement: CellPlacement;
  userOptions: () => Record<string, unknown>;
}

/**
 * Register `jupyter-ci:ask`: a request for the current notebook, written in
 * a dialog (or given as the `prompt` argument), answered after the previous
 * run's cells as the panel's requests are (or after `anchor_cell_id`), with its progress and a Stop action in a
 * notification. The chat panel reuses the same path.
 *
 * Resolves with `{run_id}` once the server accepted the request, or
 * `{error}` / `{note}` when it did not start one.
 */
export function addAskCommand(
  commands: CommandRegistry,
  options: IAskOptions
): void {
  const { index } = options;
  commands.addCommand(CommandIDs.ask, {
    label: 'Ask jupyter-ci…',
    caption:
      'Turn a request into cells of the current notebook, run in its kernel',
    isEnabled: () => index.tracker.currentWidget !== null,
    execute: args => Private.ask(options, args)
  });
}

namespace Private {
  export async function ask(
    options: IAskOptions,
    args: ReadonlyPartialJSONObject
  ): Promise<Record<string, string>> {
    const { index, connection, runs } = options;
    const panel = index.tracker.currentWidget;
    if (!panel) {
      return { error: 'no notebook' };
    }
    let prompt = typeof args['prompt'] === 'string' ? args['prompt'] : '';
    if (!prompt) {
      const answer = await InputDialog.getText({
        title: 'Ask jupyter-ci',
        label: 'What should this notebook do?',
        placeholder: 'plot the iris data'
      });
      if (!answer.button.accept || !answer.value?.trim()) {
        return { error: 'cancelled' };
      }
      prompt = answer.value.trim();
    }
    await panel.sessionContext.ready;
    const kernel = panel.sessionContext.session?.kernel;
    if (!kernel) {
      Notification.error('jupyter-ci: the notebook has no kernel to run in.');
      return { error: 'no kernel' };
    }
    const anchor =
      typeof args['anchor_cell_id'] === 'string'
        ? args['anchor_cell_id']
        : options.placement.anchor(panel);
    const requestOptions =
      typeof args['options'] === 'object' && args['options'] !== null
        ? (args['options'] as Record<string, unknown>)
        : {};
    const path = panel.context.path;
    const id = Notification.emit(
      makeStatus({ state: 'starting' }).text,
      'in-progress',
      { autoClose: false }
    );
    let runId: string;
    try {
      const reply = await connection.request(
        {
          request: 'start_run',
          notebook_path: path,
          kernel_id: kernel.id,
          prompt,
          options: requestOptions,
          anchor_cell_id: anchor,
          handoff_nonce: null,
          origin: 'panel',
          user_options: options.userOptions()
        },
        { queueTimeout: 30_000 }
      );
      if (!reply.run_id) {
        const note = reply.note ?? 'nothing to do';
        Notification.update({
          id,
          message: makeStatus({ state: 'reused', note }).text,
          type: 'info',
          autoClose: 8000
        });
        return { note };
      }
      runId = reply.run_id;
    } catch (error) {
      const message =
        error instanceof RequestRefusedError || error instanceof Error
          ? error.message
          : String(error);
      const refused = makeStatus({
        state: 'refused',
        error:
          error instanceof RequestRefusedError
            ? error.error
            : { code: 'disconnected', message }
      });
      Notification.update({
        id,
        message: refused.text,
        type: 'error',
        autoClose: 8000
      });
      return { error: message };
    }
    follow(options, id, runs.track(runId, path, anchor));
    return { run_id: runId };
  }

  /**
   * Keep the notification current until the run ends.
   */
  function follow(options: IAskOptions, id: string, start: IRunView): void {
    const { runs, connection } = options;
    const base = makeStatus({ run_id: start.runId, state: 'generating' });
    let shown = '';
    const stop = {
      label: 'Stop',
      caption: 'Stop this jupyter-ci run',
      callback: () => {
        void connection
          .request({ request: 'stop_run', run_id: start.runId })
          .catch(() => undefined);
      }
    };
    const show = (view: IRunView): void => {
      const line = statusFromRun(base, view).text;
      if (line === shown) {
        return;
      }
      shown = line;
      const finished = view.finished !== null;
      Notification.update({
        id,
        message: line,
        type: !finished
          ? 'in-progress'
          : view.state === 'done'
            ? 'success'
            : 'error',
        autoClose: finished ? 8000 : false,
        actions: finished ? [] : [stop]
      });
    };
    const onChanged = (_sender: RunTracker, view: IRunView): void => {
      if (view.runId !== start.runId) {
        return;
      }
      show(view);
      if (view.finished) {
        runs.changed.disconnect(onChanged);
      }
    };
    runs.changed.connect(onChanged);
    show(start);
  }
}
