import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { API_NAMESPACE, requestAPI } from '../request';
import type { IUsage, RunEvent } from '../protocol';

/**
 * The server's status as the chat panel reads it (`GET /jupyter-ci/status`).
 */
export interface IChatStatus {
  version: string;
  /**
   * The default model, or null when none is configured.
   */
  model: string | null;
  /**
   * Every model users may pick (the default first).
   */
  models: string[];
  /**
   * Whether conversations are kept across restarts.
   */
  persistent: boolean;
  storage_problem: string | null;
  /**
   * Models a local Ollama offers (only asked when no model is configured);
   * null when none answers.
   */
  ollama_models: string[] | null;
  /**
   * Why the server's configured model cannot be used (a model string that
   * names no provider); null when it can.
   */
  config_problem: string | null;
  /**
   * With no model: the command lines that start JupyterLab with one (the
   * server's words, which its tests follow); null otherwise.
   */
  setup: IModelSetup | null;
}

/**
 * How to start JupyterLab with a model, as the server says it.
 */
export interface IModelSetup {
  /**
   * A hosted model with its key in the server's environment.
   */
  command: string;
  /**
   * A local OpenAI-compatible server that needs no key.
   */
  local_command: string;
}

/**
 * One message of a notebook's stored conversation.
 */
export interface IStoredMessage {
  /**
   * user, assistant or notice.
   */
  role: string;
  text: string;
  run_id: string | null;
  time: number;
}

/**
 * A run of a stored conversation, with its stored events (tokens are not
 * stored).
 */
export interface IStoredRun {
  run_id: string;
  events: RunEvent[];
}

/**
 * A notebook's conversation as the server stores it.
 */
export interface IStoredConversation {
  conversation_id: string;
  path: string;
  messages: IStoredMessage[];
  /**
   * The latest runs of the conversation (absent from older servers).
   */
  runs?: IStoredRun[];
  usage: IUsage & { runs: number };
  persistent: boolean;
}

/**
 * Read the server's status (model names, never keys).
 */
export async function fetchChatStatus(): Promise<IChatStatus> {
  const reply = await requestAPI<Partial<IChatStatus>>('status');
  return {
    version: String(reply.version ?? ''),
    model: reply.model ?? null,
    models: Array.isArray(reply.models) ? reply.models : [],
    persistent: reply.persistent !== false,
    storage_problem: reply.storage_problem ?? null,
    ollama_models: Array.isArray(reply.ollama_models)
      ? reply.ollama_models
      : null,
    config_problem: reply.config_problem ?? null,
    setup: reply.setup ?? null
  };
}

/**
 * The stored conversation of the notebook at `path`.
 */
export function fetchConversation(path: string): Promise<IStoredConversation> {
  return requestAPI<IStoredConversation>(
    `conversation?path=${encodeURIComponent(path)}`
  );
}

/**
 * Forget the conversation of the notebook at `path` (messages and runs).
 */
export async function clearConversation(path: string): Promise<void> {
  await requestAPI<unknown>(`conversation?path=${encodeURIComponent(path)}`, {
    method: 'DELETE'
  });
}

/**
 * The conversation of the notebook at `path` as Markdown text.
 */
export async function exportConversation(path: string): Promise<string> {
  const settings = ServerConnection.makeSettings();
  const url = URLExt.join(
    settings.baseUrl,
    API_NAMESPACE,
    `conversation/export?path=${encodeURIComponent(path)}`
  );
  const response = await ServerConnection.makeRequest(url, {}, settings);
  if (!response.ok) {
    throw new ServerConnection.ResponseError(
      response,
      `jupyter-ci could not export the conversation (${response.status}).`
    );
  }
  return response.text();
}

/**
 * Save the conversation of the notebook at `path` as a Markdown file (a
 * browser download named after the notebook).
 */
export async function downloadConversation(path: string): Promise<void> {
  const text = await exportConversation(path);
  const name = (path.split('/').pop() ?? '').replace(/\.[^.]*$/, '');
  const url = URL.createObjectURL(new Blob([text], { type: 'text/markdown' }));
  const link = document.createElement('a');
  link.href = url;
  link.download = `${name || 'conversation'}-jupyter-ci.md`;
  document.body.appendChild(link);
  link.click();
  link.remove();
  window.setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
