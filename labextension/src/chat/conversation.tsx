import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import * as React from 'react';

import { AnswerActions } from './answerActions';
import { ChatController } from './controller';
import { useFollowNewest } from './follow';
import { ICodeActions, Markdown } from './markdown';
import { ChatEntry, IConversationView } from './model';
import { RunSteps } from './runView';
import { IRunProgress, usageLine } from './steps';

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
  /**
   * Whether the Preview shows in its place (it keeps its state meanwhile).
   */
  hidden?: boolean;
}): React.ReactElement {
  const { controller, conversation, rendermime, actions, sent } = props;
  const log = React.useRef<HTMLDivElement>(null);
  useFollowNewest(log, sent);
  const entries = conversation?.entries ?? [];
  const runs = new Map<string, IRunProgress>();
  for (const entry of entries) {
    if (entry.kind === 'run') {
      runs.set(entry.key, entry.progress);
    }
  }
  return (
    <div
      ref={log}
      className="jp-jupyter-ci-conversation"
      data-testid="jupyter-ci-conversation"
      role="log"
      aria-live="polite"
      hidden={props.hidden}
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
          isAnswer={isAnswer(entry, runs)}
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
 * Whether an entry is a run's final answer (what Insert as Markdown is for),
 * not the few words that introduce its code. A message of a run the panel
 * does not show is taken as one.
 */
function isAnswer(entry: ChatEntry, runs: Map<string, IRunProgress>): boolean {
  if (entry.kind !== 'assistant' || entry.streaming) {
    return false;
  }
  const run = entry.runId ? runs.get(entry.runId) : undefined;
  if (!run) {
    return true;
  }
  return run.finished && run.answer.trim() === entry.text.trim();
}

/**
 * One entry: the user's request, the model's reply, a notice, or a run.
 */
function Entry(props: {
  entry: ChatEntry;
  controller: ChatController;
  rendermime: IRenderMimeRegistry;
  actions: ICodeActions;
  isAnswer: boolean;
}): React.ReactElement {
  const { entry, controller, rendermime, actions } = props;
  switch (entry.kind) {
    case 'user':
      return (
        <div className="jp-jupyter-ci-message jp-mod-user" data-role="user">
          <div className="jp-jupyter-ci-author">You</div>
          <div className="jp-jupyter-ci-user-text">{entry.text}</div>
          {entry.attachments && entry.attachments.length > 0 ? (
            <ul
              className="jp-jupyter-ci-attachments jp-mod-sent"
              aria-label="Attached to this request"
              data-testid="jupyter-ci-sent-attachments"
            >
              {entry.attachments.map(name => (
                <li key={name}>
                  <span className="jp-jupyter-ci-chip">{name}</span>
                </li>
              ))}
            </ul>
          ) : null}
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
          {!props.isAnswer ? null : (
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
