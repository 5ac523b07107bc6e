/**
 * Constants of jupyter-ci's protocol that its JSON Schema does not define as
 * values (the types are generated into `./protocol`). They mirror
 * `PROTOCOL_VERSION` and `HANDOFF_MIME` in `jupyter_ci/protocol.py`.
 */
import type { IHandoff } from './protocol';

/**
 * The protocol's version, as in a handoff's `version` (typed from the schema,
 * so a new version there fails to compile until this changes too).
 */
export const PROTOCOL_VERSION: IHandoff['version'] = 1;

/**
 * The mime type of the `%%ci` magic's handoff output (an `IHandoff`).
 */
export const HANDOFF_MIME = 'application/vnd.jupyter-ci.handoff+json';
