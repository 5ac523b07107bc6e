import * as React from 'react';

import { filesList } from '../files';
import type { IChangedFile } from '../protocol';

/**
 * The files a run's cells created or changed, under the run in the panel:
 * the same list as under a `%%ci` status (`filesList`), each file opening in
 * JupyterLab, with a download link.
 */
export function RunFiles(props: {
  files: readonly IChangedFile[];
  folder: string | null;
  onOpen: (path: string) => void;
}): React.ReactElement {
  const { files, folder, onOpen } = props;
  const host = React.useRef<HTMLDivElement>(null);
  // The list is built again only when it changes (not on every render of the
  // run, which would take the keyboard focus off its links).
  const open = React.useRef(onOpen);
  React.useEffect(() => {
    open.current = onOpen;
  });
  React.useEffect(() => {
    host.current?.replaceChildren(
      filesList(files, folder, path => open.current(path))
    );
  }, [files, folder]);
  return <div ref={host} />;
}
