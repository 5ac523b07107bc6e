import type { IErrorInfo, IHandoff } from './protocol';
import { PROTOCOL_VERSION } from './protocol';

/**
 * The handoff payload, if it has the fields a claim needs.
 */
export function readHandoff(value: unknown): IHandoff | null {
  if (typeof value !== 'object' || value === null) {
    return null;
  }
  const data = value as Partial<IHandoff>;
  if (
    typeof data.nonce !== 'string' ||
    typeof data.cell_id !== 'string' ||
    typeof data.prompt !== 'string'
  ) {
    return null;
  }
  return {
    version: data.version as IHandoff['version'],
    prompt: data.prompt,
    options: object(data.options),
    cell_id: data.cell_id,
    nonce: data.nonce,
    jupyter_ci_version: String(data.jupyter_ci_version ?? 'unknown'),
    session_options: object(data.session_options),
    regenerate: data.regenerate === true,
    kernel_session: String(data.kernel_session ?? '')
  };
}

function object(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : {};
}

export function versionMismatch(handoff: IHandoff): IErrorInfo {
  return {
    code: 'version_mismatch',
    message:
      `The kernel's jupyter-ci (${handoff.jupyter_ci_version}) speaks handoff ` +
      `version ${String(handoff.version)}; this JupyterLab speaks version ${PROTOCOL_VERSION}.`,
    hint: 'Install the same jupyter-ci version in the kernel’s environment and in JupyterLab’s.'
  };
}
