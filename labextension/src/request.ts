import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

/**
 * The URL namespace of the jupyter-ci server extension.
 */
export const API_NAMESPACE = 'jupyter-ci';

/**
 * Call the jupyter-ci server extension and decode its JSON reply.
 *
 * @param endpoint - path below `<baseUrl>/jupyter-ci/`, e.g. `status`
 * @param init - fetch options (method, body, ...)
 * @param settings - server connection settings; the page's by default
 * @returns the decoded JSON body (`undefined` for an empty body)
 *
 * @throws {ServerConnection.NetworkError} when the server cannot be reached
 * @throws {ServerConnection.ResponseError} on a non-2xx reply or a body that
 *   is not JSON; its message carries the server's own message when it sent one
 */
export async function requestAPI<T>(
  endpoint = '',
  init: RequestInit = {},
  settings: ServerConnection.ISettings = ServerConnection.makeSettings()
): Promise<T> {
  const url = URLExt.join(settings.baseUrl, API_NAMESPACE, endpoint);

  let response: Response;
  try {
    response = await ServerConnection.makeRequest(url, init, settings);
  } catch (error) {
    // makeRequest already throws a NetworkError; say what we were doing.
    const reason = error instanceof Error ? error.message : String(error);
    throw new ServerConnection.NetworkError(
      new TypeError(
        `Cannot reach the Jupyter server for jupyter-ci '${endpoint}': ${reason}`
      )
    );
  }

  const text = await response.text();
  let data: unknown = undefined;
  let parsed = text.length === 0;
  if (!parsed) {
    try {
      data = JSON.parse(text);
      parsed = true;
    } catch {
      // Not JSON: an HTML error page from a proxy or a missing route.
    }
  }

  if (!response.ok) {
    throw new ServerConnection.ResponseError(
      response,
      Private.errorMessage(response, endpoint, data)
    );
  }
  if (!parsed) {
    throw new ServerConnection.ResponseError(
      response,
      `jupyter-ci server sent a reply to '${endpoint}' that is not JSON.`
    );
  }
  return data as T;
}

namespace Private {
  /**
   * A readable message for a failed request, preferring the server's own.
   */
  export function errorMessage(
    response: Response,
    endpoint: string,
    data: unknown
  ): string {
    const status = `${response.status}${response.statusText ? ` ${response.statusText}` : ''}`;
    const message = field(data, 'message');
    if (message) {
      return `jupyter-ci server error (${status}): ${message}`;
    }
    if (response.status === 404) {
      return (
        `jupyter-ci server extension not found (${status} for '${endpoint}'). ` +
        'Is the jupyter-ci Python package installed and its server extension enabled?'
      );
    }
    const reason = field(data, 'reason');
    return `jupyter-ci server error (${status}) for '${endpoint}'${reason ? `: ${reason}` : '.'}`;
  }

  /**
   * A non-empty string field of a Jupyter server error reply
   * (`{"message": ..., "reason": ...}`), or `null`.
   */
  function field(data: unknown, key: 'message' | 'reason'): string | null {
    if (typeof data !== 'object' || data === null) {
      return null;
    }
    const value = (data as Record<string, unknown>)[key];
    return typeof value === 'string' && value.trim().length > 0
      ? value.trim()
      : null;
  }
}
