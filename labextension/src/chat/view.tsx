import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { ReactWidget, refreshIcon } from '@jupyterlab/ui-components';
import type { Drag } from '@lumino/dragdrop';
import { Message } from '@lumino/messaging';
import * as React from 'react';

import { jupyterCIIcon } from '../icons';
import type { Mode } from '../protocol';
import { ChatController, IChatState } from './controller';
import { ChatInput } from './input';
import { ICodeActions, Markdown } from './markdown';
import { ChatEntry, IConversationView } from './model';
import { PreviewView } from './preview';
import { ReviewCard } from './review';
import { ModelPicker, SetupCard } from './setup';
import { IRunProgress, usageLine } from './steps';

/**
 * The id of the jupyter-ci side panel (used by `shell.activateById`).
 */
export const PANEL_ID = 'jupyter-ci-panel';

/**
 * The mime type of the paths the file browser drags.
 */
const CONTENTS_MIME = 'application/x-jupyter-icontents';

/**
 * The jupyter-ci chat side panel: the conversation of the notebook in focus.
 */
export class ChatPanel extends ReactWidget {
  constructor(options: ChatPanel.IOptions) {
    super();
    this._controller = options.controller;
    this._rendermime = options.rendermime;
    this.id = PANEL_ID;
    this.title.icon = jupyterCIIcon;
    this.title.caption = 'jupyter-ci';
    this.addClass('jp-jupyter-ci-panel');
    this.node.tabIndex = -1;
  }

  get controller(): ChatController {
    return this._controller;
  }

  /**
   * Lumino drag events: files dragged from the file browser are attached.
   */
  handleEvent(event: Event): void {
    const drag = event as Drag.Event;
    switch (event.type) {
      case 'lm-dragenter':
      case 'lm-dragover':
        if (drag.mimeData?.hasData(CONTENTS_MIME)) {
          event.preventDefault();
          event.stopPropagation();
          drag.dropAction = drag.proposedAction;
          this.addClass('jp-mod-dropTarget');
        }
        break;
      case 'lm-dragleave':
        this.removeClass('jp-mod-dropTarget');
        break;
      case 'lm-drop': {
        this.removeClass('jp-mod-dropTarget');
        const paths: unknown = drag.mimeData?.getData(CONTENTS_MIME);
        if (Array.isArray(paths)) {
          event.preventDefault();
          event.stopPropagation();
          drag.dropAction = drag.proposedAction;
          this._controller.attachFiles(
            paths.filter((p): p is string => typeof p === 'string')
          );
        }
        break;
      }
      default:
        break;
    }
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    for (const type of [
      'lm-dragenter',
      'lm-dragover',
      'lm-dragleave',
      'lm-drop'
    ]) {
      this.node.addEventListener(type, this);
    }
  }

  protected onBeforeDetach(msg: Message): void {
    for (const type of [
      'lm-dragenter',
      'lm-dragover',
      'lm-dragleave',
      'lm-drop'
    ]) {
      this.node.removeEventListener(type, this);
    }
    super.onBeforeDetach(msg);
  }

  protected onActivateRequest(msg: Message): void {
    super.onActivateRequest(msg);
    const target =
      this.node.querySelector<HTMLTextAreaElement>('textarea') ?? this.node;
    target.focus();
  }

  protected render(): React.ReactElement {
    return (
      <ChatView controller={this._controller} rendermime={this._rendermime} />
    );
  }

  private readonly _controller: ChatController;
  private readonly _rendermime: IRenderMimeRegistry;
}

/**
 * The namespace for `ChatPanel` statics.
 */
export namespace ChatPanel {
  export interface IOptions {
    controller: ChatController;
    rendermime: IRenderMimeRegistry;
  }
}

function useChatState(controller: ChatController): IChatState {
  const subscribe = React.useCallback(
    (onChange: () => void) => {
      const listener = (): void => onChange();
      controller.changed.connect(listener);
      return () => {
        controller.changed.disconnect(listener);
      };
    },
    [controller]
  );
  return React.useSyncExternalStore(subscribe, () => controller.state);
}

function useConversation(
  controller: ChatController,
  path: string | null
): IConversationView | null {
  const subscribe = React.useCallback(
    (onChange: () => void) => {
      const listener = (): void => onChange();
      controller.model.changed.connect(listener);
      return () => {
        controller.model.changed.disconnect(listener);
      };
    },
    [controller]
  );
  return React.useSyncExternalStore(subscribe, () =>
    path ? controller.model.conversation(path) : null
  );
}

/**
 * The whole panel.
 */
export function ChatView(props: {
  controller: ChatController;
  rendermime: IRenderMimeRegistry;
}): React.ReactElement {
  const { controller, rendermime } = props;
  const state = useChatState(controller);
  const conversation = useConversation(controller, state.path);
  const actions = React.useMemo<ICodeActions>(
    () => ({ insertBelow: code => controller.insertBelow(code) }),
    [controller]
  );
  React.useEffect(() => {
    void controller.refreshStatus();
  }, [controller]);

  const noModel = state.status !== null && !state.status.model;
  const busy = state.activeRun !== null || state.sending;
  return (
    <div className="jp-jupyter-ci-chat">
      <Header controller={controller} state={state} />
      <StatusLine controller={controller} state={state} />
      {noModel && state.status ? <SetupCard status={state.status} /> : null}
      {state.path === null ? (
        <div
          className="jp-jupyter-ci-empty"
          data-testid="jupyter-ci-no-notebook"
        >
          Open a notebook to talk with jupyter-ci about it.
        </div>
      ) : (
        <Conversation
          controller={controller}
          conversation={conversation}
          rendermime={rendermime}
          actions={actions}
        />
      )}
      {state.preview ? (
        <PreviewView
          preview={state.preview}
          onClose={() => controller.closePreview()}
        />
      ) : null}
      <div className="jp-jupyter-ci-compose">
        <ChatInput
          history={state.history}
          attachments={state.attachments}
          busy={busy}
          disabled={state.path === null || noModel}
          draft={state.draft}
          onDraft={text => controller.setDraft(text)}
          onSend={text => void controller.send(text)}
          onRemoveAttachment={item => controller.removeAttachment(item)}
        />
        <div className="jp-jupyter-ci-compose-actions">
          <button
            type="button"
            className="jp-jupyter-ci-button"
            data-testid="jupyter-ci-attach-cells"
            aria-label="Attach the selected cells to the next request"
            title="Attach the selected cells"
            disabled={state.path === null}
            onClick={() => controller.attachSelectedCells()}
          >
            Attach cells
          </button>
          <button
            type="button"
            className="jp-jupyter-ci-button"
            data-testid="jupyter-ci-preview-button"
            aria-label="Preview exactly what the next request sends"
            title="Preview what the next request sends"
            disabled={state.path === null || noModel || state.previewing}
            onClick={() => void controller.showPreview()}
          >
            Preview
          </button>
          {state.activeRun ? (
            <button
              type="button"
              className="jp-jupyter-ci-button jp-mod-reject"
              data-testid="jupyter-ci-stop"
              aria-label="Stop the run: abort the model and interrupt the kernel"
              onClick={() => void controller.stop()}
            >
              Stop
            </button>
          ) : (
            <button
              type="button"
              className="jp-jupyter-ci-button jp-mod-accept"
              data-testid="jupyter-ci-send"
              aria-label="Send the request"
              disabled={
                state.path === null ||
                noModel ||
                busy ||
                state.draft.trim() === ''
              }
              onClick={() => void controller.send(state.draft.trim())}
            >
              Send
            </button>
          )}
        </div>
      </div>
    </div>
  );
}

function Header(props: {
  controller: ChatController;
  state: IChatState;
}): React.ReactElement {
  const { controller, state } = props;
  const prefs = state.prefs;
  return (
    <div className="jp-jupyter-ci-header">
      <div className="jp-jupyter-ci-header-row">
        <h2 className="jp-jupyter-ci-title">jupyter-ci</h2>
        <span className="jp-jupyter-ci-path" data-testid="jupyter-ci-path">
          {state.path ?? ''}
        </span>
        <button
          type="button"
          className="jp-jupyter-ci-icon-button"
          aria-label="Refresh jupyter-ci server status"
          title="Refresh jupyter-ci server status"
          data-testid="jupyter-ci-refresh"
          onClick={() => void controller.refreshStatus()}
        >
          <refreshIcon.react tag="span" className="jp-jupyter-ci-icon" />
        </button>
      </div>
      <div className="jp-jupyter-ci-header-row jp-jupyter-ci-options">
        {state.status ? (
          <ModelPicker
            status={state.status}
            value={prefs.model}
            onChange={model => controller.setModel(model)}
          />
        ) : null}
        <label className="jp-jupyter-ci-field">
          <span>Mode</span>
          <select
            className="jp-jupyter-ci-select"
            data-testid="jupyter-ci-mode"
            aria-label="Mode: auto runs cells, review asks first, insert never runs"
            value={prefs.mode ?? ''}
            onChange={event =>
              controller.setMode((event.target.value || null) as Mode | null)
            }
          >
            <option value="">server default</option>
            <option value="auto">auto</option>
            <option value="review">review</option>
            <option value="insert">insert</option>
          </select>
        </label>
        <label className="jp-jupyter-ci-field jp-jupyter-ci-switch">
          <input
            type="checkbox"
            data-testid="jupyter-ci-share-outputs"
            aria-label="Share output values and data samples with the model"
            checked={prefs.shareOutputs ?? true}
            onChange={event => controller.setShareOutputs(event.target.checked)}
          />
          <span>Share outputs</span>
        </label>
      </div>
      <div className="jp-jupyter-ci-header-row">
        <button
          type="button"
          className="jp-jupyter-ci-button jp-mod-small"
          data-testid="jupyter-ci-export"
          aria-label="Export the conversation as Markdown"
          disabled={state.path === null}
          onClick={() => void controller.exportMarkdown()}
        >
          Export
        </button>
        <button
          type="button"
          className="jp-jupyter-ci-button jp-mod-small"
          data-testid="jupyter-ci-clear"
          aria-label="Clear the conversation"
          disabled={state.path === null}
          onClick={() => void controller.clear()}
        >
          Clear
        </button>
      </div>
    </div>
  );
}

function StatusLine(props: {
  controller: ChatController;
  state: IChatState;
}): React.ReactElement {
  const { controller, state } = props;
  if (state.statusError) {
    return (
      <div className="jp-jupyter-ci-error-box">
        <div
          className="jp-jupyter-ci-error"
          data-testid="jupyter-ci-error"
          role="alert"
        >
          {state.statusError}
        </div>
        <button
          type="button"
          className="jp-jupyter-ci-button"
          aria-label="Retry checking the jupyter-ci server"
          data-testid="jupyter-ci-retry"
          onClick={() => void controller.refreshStatus()}
        >
          Retry
        </button>
      </div>
    );
  }
  if (!state.status) {
    return (
      <div
        className="jp-jupyter-ci-status jp-mod-loading"
        data-testid="jupyter-ci-status"
        role="status"
        aria-busy="true"
      >
        Checking jupyter-ci server…
      </div>
    );
  }
  const { version, model } = state.status;
  const chosen = state.prefs.model ?? model;
  return (
    <div
      className="jp-jupyter-ci-status"
      data-testid="jupyter-ci-status"
      role="status"
    >
      {chosen
        ? `jupyter-ci ${version} — model: ${chosen}`
        : `jupyter-ci ${version} — no model configured`}
      {state.status.storage_problem ? (
        <div className="jp-jupyter-ci-hint">{state.status.storage_problem}</div>
      ) : null}
    </div>
  );
}

function Conversation(props: {
  controller: ChatController;
  conversation: IConversationView | null;
  rendermime: IRenderMimeRegistry;
  actions: ICodeActions;
}): React.ReactElement {
  const { controller, conversation, rendermime, actions } = props;
  const end = React.useRef<HTMLDivElement>(null);
  const shown = conversation?.entries;
  React.useEffect(() => {
    end.current?.scrollIntoView?.({ block: 'end' });
  }, [shown]);
  const entries = shown ?? [];
  return (
    <div
      className="jp-jupyter-ci-conversation"
      data-testid="jupyter-ci-conversation"
      role="log"
      aria-live="polite"
      aria-label="Conversation with jupyter-ci about this notebook"
    >
      {conversation?.loading && entries.length === 0 ? (
        <div className="jp-jupyter-ci-empty">Loading the conversation…</div>
      ) : null}
      {conversation?.error ? (
        <div className="jp-jupyter-ci-error" role="alert">
          {conversation.error}
        </div>
      ) : null}
      {!conversation?.loading && entries.length === 0 ? (
        <div className="jp-jupyter-ci-empty" data-testid="jupyter-ci-empty">
          Ask for something: it becomes cells of this notebook, run in its
          kernel.
        </div>
      ) : null}
      {entries.map(entry => (
        <Entry
          key={entry.key}
          entry={entry}
          controller={controller}
          rendermime={rendermime}
          actions={actions}
        />
      ))}
      <div
        className="jp-jupyter-ci-usage"
        data-testid="jupyter-ci-conversation-usage"
        aria-label="Usage of the conversation"
      >
        {conversation?.usage && conversation.usage.runs > 0
          ? `Conversation: ${conversation.usage.runs} run(s), ${usageLine(conversation.usage)}`
          : ''}
      </div>
      <div ref={end} />
    </div>
  );
}

function Entry(props: {
  entry: ChatEntry;
  controller: ChatController;
  rendermime: IRenderMimeRegistry;
  actions: ICodeActions;
}): React.ReactElement {
  const { entry, controller, rendermime, actions } = props;
  switch (entry.kind) {
    case 'user':
      return (
        <div className="jp-jupyter-ci-message jp-mod-user" data-role="user">
          <div className="jp-jupyter-ci-author">You</div>
          <div className="jp-jupyter-ci-user-text">{entry.text}</div>
        </div>
      );
    case 'assistant':
      return (
        <div
          className="jp-jupyter-ci-message jp-mod-assistant"
          data-role="assistant"
          aria-busy={entry.streaming}
        >
          <div className="jp-jupyter-ci-author">jupyter-ci</div>
          <Markdown
            text={entry.text}
            rendermime={rendermime}
            actions={actions}
          />
        </div>
      );
    case 'notice':
      return (
        <div className="jp-jupyter-ci-message jp-mod-notice" data-role="notice">
          {entry.text}
        </div>
      );
    case 'run':
      return <RunSteps progress={entry.progress} controller={controller} />;
  }
}

function RunSteps(props: {
  progress: IRunProgress;
  controller: ChatController;
}): React.ReactElement {
  const { progress, controller } = props;
  const usage = usageLine(progress.usage);
  return (
    <div
      className="jp-jupyter-ci-run"
      data-testid="jupyter-ci-run"
      data-state={progress.state}
      data-finished={progress.finished}
      aria-busy={!progress.finished}
    >
      <ol className="jp-jupyter-ci-steps" aria-label="Progress of the run">
        {progress.steps.map((step, index) => (
          <li
            key={index}
            className={`jp-jupyter-ci-step jp-mod-${step.status}`}
            data-testid="jupyter-ci-step"
          >
            {step.cellId ? (
              <button
                type="button"
                className="jp-jupyter-ci-link"
                aria-label={`${step.label}: show the cell`}
                onClick={() => controller.showCell(step.cellId!)}
              >
                {step.label}
              </button>
            ) : (
              <span>{step.label}</span>
            )}
          </li>
        ))}
      </ol>
      {progress.error ? (
        <div className="jp-jupyter-ci-error" role="alert">
          {progress.error}
        </div>
      ) : null}
      {progress.review ? (
        <ReviewCard
          key={`${progress.review.cellId}-${progress.attempt}`}
          proposal={controller.withCellSource(progress.review)}
          onShowCell={() => controller.showCell(progress.review!.cellId)}
          onAnswer={answer =>
            void controller.review(
              progress.runId,
              progress.review!.cellId,
              answer
            )
          }
        />
      ) : null}
      {usage ? (
        <div className="jp-jupyter-ci-usage" data-testid="jupyter-ci-run-usage">
          {`This run: ${usage}`}
        </div>
      ) : null}
    </div>
  );
}
