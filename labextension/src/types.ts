/**
 * Shapes of the data exchanged with the jupyter-ci server extension.
 */

/**
 * The reply of `GET <baseUrl>/jupyter-ci/status`.
 */
export interface IStatusResponse {
  /**
   * The version of the installed jupyter-ci Python package.
   */
  version: string;
  /**
   * The configured model name (e.g. `openai/gpt-4o-mini`), or `null` when no
   * model is configured.
   */
  model: string | null;
}

/**
 * Whether a decoded JSON value has the shape of a status reply.
 */
export function isStatusResponse(value: unknown): value is IStatusResponse {
  if (typeof value !== 'object' || value === null) {
    return false;
  }
  const record = value as Record<string, unknown>;
  return (
    typeof record.version === 'string' &&
    (record.model === null || typeof record.model === 'string')
  );
}
