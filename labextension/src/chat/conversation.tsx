import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import * as React from 'react';

import { AnswerActions } from './answerActions';
import { ChatController } from './controller';
import { useFollowNewest } from './follow';
import { ICodeActions, Markdown } from './markdown';
import { ChatEntry, IConversationView } from './model';
import { RunSteps } from './runView';
import { usageLine } from './steps';

/**
 * The conversation of the bound notebook: messages, runs and its usage. It
 * follows the newest message unless the user has scrolled up.
 */
export function Conversation(props: {
  controller: ChatController;
  conversation: IConversationView | null;
  rendermime: IRenderMimeRegistry;
  actions: ICodeActions;
  /**
   * How many requests the panel has sent: each one follows the newest
   * message again, even if the user had scrolled up.
   */
  sent: number;
}): React.ReactElement {
  const { controller, conversation, rendermime, actions, sent } = props;
  const log = React.useRef<HTMLDivElement>(null);
  useFollowNewest(log, sent);
  const entries = conversation?.entries ?? [];
  return (
    <div
      ref={log}
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
    </div>
  );
}

/**
 * One entry: the user's request, the model's reply, a notice, or a run.
 */
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
          {entry.streaming ? null : (
            <AnswerActions
              onInsert={() => controller.notebook.insertMarkdown(entry.text)}
            />
          )}
        </div>
      );
    case 'notice':
      return (
        <div className="jp-jupyter-ci-message jp-mod-notice" data-role="notice">
          {entry.text}
        </div>
      );
    case 'run':
      return (
        <RunSteps
          progress={entry.progress}
          controller={controller}
          rendermime={rendermime}
          actions={actions}
        />
      );
  }
}
