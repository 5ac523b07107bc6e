import * as React from 'react';

import { shownFiles } from '../files';
import type { IChangedFile } from '../protocol';

/**
 * The files a run's cells created or changed, under the run in the panel:
 * each opens in JupyterLab, and can be downloaded.
 */
export function RunFiles(props: {
  files: readonly IChangedFile[];
  folder: string | null;
  onOpen: (path: string) => void;
}): React.ReactElement {
  const { files, folder, onOpen } = props;
  return (
    <ul
      className="jp-jupyter-ci-Files"
      data-testid="jupyter-ci-files"
      aria-label="Files this run created or changed"
    >
      {shownFiles(files, folder).map(file => (
        <li
          key={file.path}
          className="jp-jupyter-ci-Files-item"
          data-path={file.path}
        >
          <button
            type="button"
            className="jp-jupyter-ci-link jp-jupyter-ci-Files-open"
            title={`Open ${file.path} in JupyterLab`}
            onClick={() => onOpen(file.path)}
          >
            {file.name}
          </button>
          <span className="jp-jupyter-ci-Files-detail">{` (${file.detail}) `}</span>
          <a
            className="jp-jupyter-ci-Files-download"
            href={file.download}
            download={file.name.split('/').pop()}
            aria-label={`Download ${file.name}`}
          >
            download
          </a>
        </li>
      ))}
    </ul>
  );
}
