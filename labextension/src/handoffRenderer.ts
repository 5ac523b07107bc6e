import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { HANDOFF_MIME } from './protocol';

/**
 * Shows a `%%ci` handoff output as a small chip. It only displays: the claim
 * happens on the kernel connection that sent the request (see
 * `KernelWatcher`), never here, because renderers run again whenever a
 * notebook is reopened.
 */
export class HandoffRenderer extends Widget implements IRenderMime.IRenderer {
  constructor() {
    super();
    this.addClass('jp-jupyter-ci-HandoffChip');
    this.node.textContent = 'handed to jupyter-ci';
    this.node.title =
      'This %%ci request was handed to the jupyter-ci extension of the tab that ran it.';
  }

  renderModel(): Promise<void> {
    return Promise.resolve();
  }
}

/**
 * The factory of handoff chips.
 */
export const handoffRendererFactory: IRenderMime.IRendererFactory = {
  safe: true,
  mimeTypes: [HANDOFF_MIME],
  defaultRank: 20,
  createRenderer: () => new HandoffRenderer()
};
