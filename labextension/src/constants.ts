import { UUID } from '@lumino/coreutils';

import { CI_CELL_PATTERN } from './protocol';

/**
 * Names shared by the notebook side of the labextension (the protocol's own
 * constants are in `./protocolConstants`).
 */

/**
 * The mime type of the status output jupyter-ci keeps in a `%%ci` cell (an
 * `IStatusData`, next to a `text/plain` line for other frontends).
 */
export const STATUS_MIME = 'application/vnd.jupyter-ci.status+json';

/**
 * The exception class the magic raises after a handoff, so the kernel stops
 * the cells queued after the `%%ci` cell.
 */
export const HANDOFF_ERROR_NAME = 'JupyterCIHandoff';

/**
 * The error name of a cell the kernel held back because it was sent in the
 * same batch as a handing-off `%%ci` but reached the kernel after it.
 */
export const HELD_BACK_ERROR_NAME = 'JupyterCIHeldBack';

/**
 * Request metadata that tells the kernel a cell is run by jupyter-ci itself
 * (a generated cell, or the continuation of a held-back batch): it must run,
 * never be held back.
 */
export const RESUME_METADATA_KEY = 'jupyter_ci_resume';

/**
 * The metadata key of jupyter-ci on cells: the stamp of a `%%ci` cell
 * (`{client}`), or the hint on a generated cell (`{run_id, ...}`).
 */
export const METADATA_KEY = 'jupyter_ci';

/**
 * The command ids jupyter-ci registers.
 */
export namespace CommandIDs {
  export const openPanel = 'jupyter-ci:open-panel';
  export const ask = 'jupyter-ci:ask';
  export const timings = 'jupyter-ci:call-timings';
}

/**
 * Whether a cell's source is a `%%ci` cell magic (the protocol's one rule:
 * the magic opens the cell, after blank lines at most; `%%cipher` is not).
 */
export function isCICell(source: string): boolean {
  return CI_CELL_PATTERN.test(source);
}

/**
 * A random id (the tab's client id, request ids).
 */
export function randomId(): string {
  return UUID.uuid4();
}
