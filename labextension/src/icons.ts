import { LabIcon } from '@jupyterlab/ui-components';

import jupyterCISvgstr from '#style/icons/jupyter-ci.svg';

/**
 * The jupyter-ci icon: a notebook page with a run-again arrow.
 */
export const jupyterCIIcon = new LabIcon({
  name: 'jupyter-ci:icon',
  svgstr: jupyterCISvgstr
});
