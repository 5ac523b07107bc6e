import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { Button } from '@jupyterlab/ui-components';
import { ISignal } from '@lumino/signaling';
import * as React from 'react';

import { FocusOrigin } from '../focusReturn';
import { ChatController, IChatState } from './controller';
import { Conversation } from './conversation';
import { Header, StatusLine } from './header';
import { ChatInput } from './input';
import { ICodeActions } from './markdown';
import { IConversationView } from './model';
import { PreviewView } from './preview';
import { SetupCard } from './setup';

/**
 * Whether the panel is shown, and when it is shown again (while it is
 * hidden, changes are not rendered: the panel renders once when shown).
 */
export interface IShown {
  isVisible(): boolean;
  shownAgain: ISignal<unknown, void>;
}

/**
 * Subscribe to a signal for `useSyncExternalStore`: at once while the panel
 * is shown (`frame` false) or at most once per animation frame (`frame`
 * true), and once when shown again after changes while hidden.
 */
function subscriber(
  signal: ISignal<unknown, unknown>,
  shown: IShown,
  frame: boolean
): (onChange: () => void) => () => void {
  return (onChange: () => void) => {
    let pending = 0;
    let missed = false;
    const listener = (): void => {
      if (!shown.isVisible()) {
        missed = true;
      } else if (!frame) {
        onChange();
      } else if (!pending) {
        pending = window.requestAnimationFrame(() => {
          pending = 0;
          onChange();
        });
      }
    };
    const onShown = (): void => {
      if (missed) {
        missed = false;
        onChange();
      }
    };
    signal.connect(listener);
    shown.shownAgain.connect(onShown);
    return () => {
      signal.disconnect(listener);
      shown.shownAgain.disconnect(onShown);
      window.cancelAnimationFrame(pending);
    };
  };
}

/**
 * The panel's state, rendered at once (the input is a controlled textarea).
 */
function useChatState(controller: ChatController, shown: IShown): IChatState {
  const subscribe = React.useMemo(
    () => subscriber(controller.changed, shown, false),
    [controller, shown]
  );
  return React.useSyncExternalStore(subscribe, () => controller.state);
}

/**
 * The conversation shown, rendered at most once per animation frame: a run
 * sends several events per step and streams tokens, and only the latest
 * matters.
 */
function useConversation(
  controller: ChatController,
  path: string | null,
  shown: IShown
): IConversationView | null {
  const subscribe = React.useMemo(
    () => subscriber(controller.model.changed, shown, true),
    [controller, shown]
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
  shown: IShown;
}): React.ReactElement {
  const { controller, rendermime, shown } = props;
  const state = useChatState(controller, shown);
  const conversation = useConversation(controller, state.path, shown);
  const actions = React.useMemo<ICodeActions>(
    () => ({ insertBelow: code => controller.notebook.insertBelow(code) }),
    [controller]
  );
  React.useEffect(() => {
    void controller.refreshStatus();
  }, [controller]);
  // Stop is replaced by Send once the run ends: the focus goes back to where
  // it was before (by default the request box), not to the page's body.
  const compose = React.useRef<HTMLDivElement>(null);
  const focusOrigin = React.useMemo(() => new FocusOrigin(), []);

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
          key={state.path}
          sent={state.history.length}
          controller={controller}
          conversation={conversation}
          rendermime={rendermime}
          actions={actions}
          hidden={state.preview !== null}
        />
      )}
      {state.preview ? (
        <PreviewView
          preview={state.preview}
          onClose={() => {
            controller.closePreview();
            // Back to the button that opened it.
            compose.current
              ?.querySelector<HTMLButtonElement>(
                '[data-testid="jupyter-ci-preview-button"]'
              )
              ?.focus();
          }}
        />
      ) : null}
      <div className="jp-jupyter-ci-compose" ref={compose}>
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
          onRemoveAttachment={item => controller.attachments.remove(item)}
        />
        <div
          className="jp-jupyter-ci-compose-actions"
          onFocus={event => focusOrigin.entered(event, event.currentTarget)}
        >
          <Button
            type="button"
            className="jp-jupyter-ci-button"
            minimal
            data-testid="jupyter-ci-attach-cells"
            aria-label="Attach the selected cells to the next request"
            title="Attach the selected cells"
            disabled={state.path === null}
            onClick={() => controller.attachments.attachSelectedCells()}
          >
            Attach cells
          </Button>
          <Button
            type="button"
            className="jp-jupyter-ci-button"
            minimal
            data-testid="jupyter-ci-preview-button"
            aria-label="Preview exactly what the next request sends"
            title="Preview what the next request sends"
            disabled={state.path === null || noModel || state.previewing}
            onClick={() => void controller.showPreview()}
          >
            Preview
          </Button>
          {state.activeRun ? (
            <Button
              type="button"
              className="jp-jupyter-ci-button jp-mod-styled jp-mod-warn"
              data-testid="jupyter-ci-stop"
              aria-label="Stop the run: abort the model and interrupt the kernel"
              onClick={event => {
                void controller.stop();
                focusOrigin.restore(
                  event.currentTarget.parentElement,
                  compose.current?.querySelector<HTMLTextAreaElement>(
                    '[data-testid="jupyter-ci-input"]'
                  ) ?? null
                );
              }}
            >
              Stop
            </Button>
          ) : (
            <Button
              type="button"
              className="jp-jupyter-ci-button jp-mod-styled jp-mod-accept"
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
            </Button>
          )}
        </div>
      </div>
    </div>
  );
}
