import { UUID } from '@lumino/coreutils';

import { CI_CELL_PATTERN } from './protocol';

/**
 * Names the labextension shares with the kernel side come from the protocol
 * schema (generated into `./protocol`); these are the labextension's own.
 */

/**
 * The command ids jupyter-ci registers.
 */
export namespace CommandIDs {
  export const openPanel = 'jupyter-ci:open-panel';
  export const ask = 'jupyter-ci:ask';
  export const timings = 'jupyter-ci:call-timings';
  export const runReviewed = 'jupyter-ci:run-reviewed-cell-and-select-next';
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
