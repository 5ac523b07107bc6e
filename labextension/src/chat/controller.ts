import { Dialog, Notification, showDialog } from '@jupyterlab/apputils';
import { NotebookPanel } from '@jupyterlab/notebook';
import { Contents } from '@jupyterlab/services';
import { ISignal, Signal } from '@lumino/signaling';

import { editedSource } from '../cellReview';
import { CIConnection } from '../connection';
import { FileOpener } from '../files';
import { Lifecycle } from '../lifecycle';
import { NotebookIndex } from '../notebooks';
import { CellPlacement } from '../placement';
import type { IPreview, IRunInfo, Mode } from '../protocol';
import { RunTracker } from '../runs';
import {
  IChatStatus,
  clearConversation,
  downloadConversation,
  fetchChatStatus
} from './api';
import { ChatAttachments } from './attachments';
import { BoundNotebook } from './boundNotebook';
import { attachmentName, type Attachment } from './input';
import { ChatModel } from './model';
import { IPanelPrefs, PanelPrefs } from './prefs';
import type { ReviewAnswer } from './review';
import { IRequestFields, buildRequest } from './request';

/**
 * What the panel shows besides the conversation.
 */
export interface IChatState {
  /**
   * The notebook the panel is bound to (the one in focus), or null.
   */
  path: string | null;
  status: IChatStatus | null;
  statusError: string | null;
  prefs: IPanelPrefs;
  attachments: readonly Attachment[];
  draft: string;
  /**
   * The active run on the notebook (any tab, any origin), or null.
   */
  activeRun: IRunInfo | null;
  sending: boolean;
  preview: IPreview | null;
  previewing: boolean;
  /**
   * Requests sent from this panel, oldest first (for ↑ and ↓).
   */
  history: readonly string[];
}

/**
 * The chat panel's logic: binds it to the notebook in focus and turns the
 * user's actions into requests on the tab's connection to the server. What
 * the panel does in that notebook (`notebook`) and what goes with its next
 * request (`attachments`) have their own modules.
 */
export class ChatController extends Lifecycle {
  constructor(options: ChatController.IOptions) {
    super();
    this.index = options.index;
    this.connection = options.connection;
    this.runs = options.runs;
    this.model = this.own(new ChatModel(options.connection, options.runs));
    this.prefs = options.prefs;
    this.placement = options.placement;
    this._userOptions = options.userOptions;
    const path = (): string | null => this._state.path;
    this.notebook = new BoundNotebook({
      index: this.index,
      placement: this.placement,
      model: this.model,
      path,
      openFile: options.openFile ?? null
    });
    this.attachments = new ChatAttachments({
      path,
      notebook: () => this.notebook.panel,
      contents: options.contents ?? null,
      notice: (at, text) => this.model.addNotice(at, text),
      changed: attachments => this._update({ attachments })
    });
    this.listen(this.index.tracker.currentChanged, this._onCurrent);
    this.listen(this.index.pathsChanged, this._onCurrent);
    this.listen(this.connection.runsChanged, this._onRuns);
    this.listen(this.prefs.changed, this._onPrefs);
    this._state = {
      path: null,
      status: null,
      statusError: null,
      prefs: this.prefs.prefs,
      attachments: [],
      draft: '',
      activeRun: null,
      sending: false,
      preview: null,
      previewing: false,
      history: []
    };
    this._onCurrent();
  }

  readonly index: NotebookIndex;
  readonly connection: CIConnection;
  readonly runs: RunTracker;
  readonly model: ChatModel;
  readonly prefs: PanelPrefs;
  readonly placement: CellPlacement;
  /**
   * The notebook the panel is bound to, as the panel acts on it.
   */
  readonly notebook: BoundNotebook;
  /**
   * What goes with the next request of each notebook.
   */
  readonly attachments: ChatAttachments;

  /**
   * Emitted whenever something the panel shows changes.
   */
  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /**
   * The panel's state (a new object after each change).
   */
  get state(): IChatState {
    return this._state;
  }

  /**
   * Ask the server for its status (models, setup).
   */
  async refreshStatus(): Promise<void> {
    this._update({ statusError: null });
    try {
      const status = await fetchChatStatus();
      this._update({ status, statusError: null });
    } catch (error) {
      this._update({
        status: null,
        statusError: error instanceof Error ? error.message : String(error)
      });
    }
  }

  setDraft(draft: string): void {
    const path = this._state.path;
    if (path) {
      this._drafts.set(path, draft);
    }
    this._update({ draft });
  }

  /**
   * Send a request from the panel (with the attachments) to the bound
   * notebook.
   */
  async send(text: string, fixCellId: string | null = null): Promise<void> {
    const panel = this.notebook.panel;
    const path = this._state.path;
    if (!panel || !path) {
      return;
    }
    this._update({
      sending: true,
      history: [...this._state.history, text],
      draft: '',
      preview: null
    });
    this._drafts.set(path, '');
    try {
      const request = await this._request(panel, text, fixCellId);
      if (!request) {
        this.model.addNotice(path, 'The notebook has no kernel to run in.');
        return;
      }
      const prompt = request.prompt;
      const attached = this.attachments.of(path).map(attachmentName);
      try {
        const reply = await this.connection.request(
          {
            request: 'start_run',
            ...request,
            handoff_nonce: null,
            origin: 'panel'
          },
          { queueTimeout: 30_000 }
        );
        const runId = reply.run_id ?? null;
        this.model.addRequest(path, prompt, runId, attached);
        if (runId) {
          this.runs.track(runId, path, request.anchor_cell_id);
        } else if (reply.note) {
          this.model.addNotice(path, reply.note);
        }
        this.attachments.sent(path);
      } catch (error) {
        this.model.addRequest(path, prompt, null, attached);
        this.model.addNotice(
          path,
          `Not started: ${error instanceof Error ? error.message : String(error)}`
        );
      }
    } finally {
      this._update({ sending: false });
    }
  }

  /**
   * Stop the notebook's active run (the server aborts the model's stream and
   * interrupts the kernel).
   */
  async stop(): Promise<void> {
    const run = this._state.activeRun;
    if (!run) {
      return;
    }
    try {
      await this.connection.request({
        request: 'stop_run',
        run_id: run.run_id
      });
    } catch (error) {
      Notification.error(
        `jupyter-ci could not stop the run: ${error instanceof Error ? error.message : String(error)}`
      );
    }
  }

  /**
   * Answer a cell waiting for review. Run sends the user's version: the one
   * edited in the card, else the cell's code if they changed it in the
   * notebook.
   */
  async review(
    runId: string,
    cellId: string,
    answer: ReviewAnswer
  ): Promise<void> {
    const path = this._state.path;
    const proposed = this.runs.get(runId)?.review;
    const source =
      answer.decision !== 'run'
        ? null
        : (answer.source ??
          (proposed?.cellId === cellId
            ? editedSource(this.index, path, proposed)
            : null));
    try {
      await this.connection.request({
        request: 'review',
        run_id: runId,
        cell_id: cellId,
        decision: answer.decision,
        source,
        ...(answer.decision === 'reject' && answer.comment
          ? { comment: answer.comment }
          : {})
      });
    } catch (error) {
      if (path) {
        this.model.addNotice(
          path,
          `Review not sent: ${error instanceof Error ? error.message : String(error)}`
        );
      }
    }
  }

  /**
   * Show what the next request (the draft) would send to the model.
   */
  async showPreview(): Promise<void> {
    const panel = this.notebook.panel;
    const path = this._state.path;
    if (!panel || !path) {
      return;
    }
    this._update({ previewing: true });
    try {
      const request = await this._request(
        panel,
        this._state.draft.trim() || '(your next request)',
        null
      );
      if (!request) {
        this.model.addNotice(path, 'The notebook has no kernel to run in.');
        return;
      }
      const reply = await this.connection.request(
        { request: 'preview', ...request },
        { queueTimeout: 30_000 }
      );
      this._update({ preview: reply.preview ?? null });
    } catch (error) {
      this.model.addNotice(
        path,
        `No preview: ${error instanceof Error ? error.message : String(error)}`
      );
    } finally {
      this._update({ previewing: false });
    }
  }

  closePreview(): void {
    this._update({ preview: null });
  }

  /**
   * Clear the notebook's conversation, after the user confirms.
   */
  async clear(): Promise<void> {
    const path = this._state.path;
    if (!path) {
      return;
    }
    const result = await showDialog({
      title: 'Clear the conversation?',
      body: `Forget everything said about ${path} with jupyter-ci? The notebook's cells stay as they are.`,
      buttons: [
        Dialog.cancelButton(),
        Dialog.warnButton({
          label: 'Clear',
          ariaLabel: 'Clear the conversation'
        })
      ]
    });
    if (!result.button.accept) {
      return;
    }
    try {
      await clearConversation(path);
      this.model.cleared(path);
    } catch (error) {
      Notification.error(
        `jupyter-ci could not clear the conversation: ${error instanceof Error ? error.message : String(error)}`
      );
    }
  }

  /**
   * Download the notebook's conversation as a Markdown file.
   */
  async exportMarkdown(): Promise<void> {
    const path = this._state.path;
    if (!path) {
      return;
    }
    try {
      await downloadConversation(path);
    } catch (error) {
      Notification.error(
        `jupyter-ci could not export the conversation: ${error instanceof Error ? error.message : String(error)}`
      );
    }
  }

  setMode(mode: Mode | null): void {
    this.prefs.set('mode', mode);
  }

  setModel(model: string | null): void {
    this.prefs.set('model', model);
  }

  setShareOutputs(share: boolean): void {
    this.prefs.set('shareOutputs', share);
  }

  private _request(
    panel: NotebookPanel,
    text: string,
    fixCellId: string | null
  ): Promise<IRequestFields | null> {
    return buildRequest(panel, {
      text,
      fixCellId,
      anchorCellId: this.notebook.anchor(panel),
      attachments: this._state.attachments,
      prefs: this._state.prefs,
      userOptions: this._userOptions()
    });
  }

  private readonly _onCurrent = (): void => {
    const current = this.index.tracker.currentWidget;
    const path = current && !current.isDisposed ? current.context.path : null;
    if (path !== this._state.path) {
      this._update({
        path,
        draft: path ? (this._drafts.get(path) ?? '') : '',
        attachments: this.attachments.of(path),
        preview: null
      });
      if (path) {
        this.model.conversation(path);
      }
    } else {
      this._onRuns();
    }
  };

  private readonly _onPrefs = (
    _sender: PanelPrefs,
    prefs: IPanelPrefs
  ): void => {
    this._update({ prefs });
  };

  /**
   * The runs changed (a notice per state change of any run): the panel's
   * state changes only if the notebook's active run is another one (the
   * panel shows only whether a run is active, and stops it by its id; the
   * conversation is the model's, which the view follows itself).
   */
  private readonly _onRuns = (): void => {
    const activeRun = this._activeRun();
    if (activeRun?.run_id !== this._state.activeRun?.run_id) {
      this._update({});
    }
  };

  private _activeRun(): IRunInfo | null {
    const path = this._state.path;
    return (
      (path &&
        this.connection.runs.find(
          run => run.notebook_path === path && run.position === 0
        )) ||
      null
    );
  }

  private _update(change: Partial<IChatState>): void {
    this._state = { ...this._state, ...change, activeRun: this._activeRun() };
    this._changed.emit();
  }

  private readonly _userOptions: () => Record<string, unknown>;
  private readonly _drafts = new Map<string, string>();
  private _state: IChatState;
  private readonly _changed = new Signal<this, void>(this);
}

/**
 * The namespace for `ChatController` statics.
 */
export namespace ChatController {
  export interface IOptions {
    index: NotebookIndex;
    connection: CIConnection;
    runs: RunTracker;
    prefs: PanelPrefs;
    /**
     * Where a request's new cells go.
     */
    placement: CellPlacement;
    userOptions: () => Record<string, unknown>;
    /**
     * The server's contents (files dropped from the desktop are uploaded).
     */
    contents?: Contents.IManager;
    /**
     * Opens a file in JupyterLab (the files a run wrote).
     */
    openFile?: FileOpener;
  }
}
