import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import * as React from 'react';

import { ChatController, IChatState } from './controller';
import { Conversation } from './conversation';
import { Header, StatusLine } from './header';
import { ChatInput } from './input';
import { ICodeActions } from './markdown';
import { IConversationView } from './model';
import { PreviewView } from './preview';
import { SetupCard } from './setup';

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
          disabled={
            state.path === null
              ? 'Open a notebook to ask jupyter-ci'
              : noModel
                ? 'Configure a model first (see above)'
                : null
          }
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
