import { PageConfig, PathExt, URLExt } from '@jupyterlab/coreutils';
import type { JupyterFrontEnd } from '@jupyterlab/application';

import type { IChangedFile } from './protocol';

/**
 * Opens a file in JupyterLab by its path from the server's root.
 */
export type FileOpener = (path: string) => void;

/**
 * Opens files with JupyterLab's document manager (each in its default
 * viewer: a CSV as a table, an image as an image, ...).
 */
export function fileOpener(commands: JupyterFrontEnd['commands']): FileOpener {
  return path => {
    void commands.execute('docmanager:open', { path });
  };
}

/**
 * A file a run wrote, as jupyter-ci shows it: where JupyterLab finds it, and
 * how to say it.
 */
export interface IShownFile {
  /**
   * The path relative to the notebook's folder, as the run's event said.
   */
  name: string;
  /**
   * The path from the server's root (what JupyterLab opens).
   */
  path: string;
  /**
   * "created, 1.2 kB".
   */
  detail: string;
  /**
   * The URL that downloads it.
   */
  download: string;
}

/**
 * The folder of a notebook (from the server's root): where the kernel works
 * in JupyterLab, and where a run's file paths start.
 */
export function notebookFolder(notebookPath: string | null): string | null {
  return notebookPath === null ? null : PathExt.dirname(notebookPath);
}

/**
 * The files of a run's `files` event, placed in the notebook's folder.
 */
export function shownFiles(
  files: readonly IChangedFile[],
  folder: string | null
): IShownFile[] {
  return files.map(file => {
    const path = PathExt.join(folder ?? '', file.path);
    return {
      name: file.path,
      path,
      detail: `${file.change}, ${sizeText(file.size)}`,
      download:
        URLExt.join(
          PageConfig.getBaseUrl(),
          'files',
          URLExt.encodeParts(path)
        ) + '?download=1'
    };
  });
}

/**
 * The files as one line of text ("files: clean.csv (created, 1.2 kB)"), for
 * the status output's text/plain twin; '' for none.
 */
export function filesLine(files: readonly IChangedFile[] | null): string {
  if (!files || files.length === 0) {
    return '';
  }
  const named = files.map(
    file => `${file.path} (${file.change}, ${sizeText(file.size)})`
  );
  return `files: ${named.join(', ')}`;
}

/**
 * The files as a list of links: each opens its file in JupyterLab, and a
 * "download" link next to it downloads it.
 */
export function filesList(
  files: readonly IChangedFile[],
  folder: string | null,
  open: FileOpener
): HTMLElement {
  const list = document.createElement('ul');
  list.className = 'jp-jupyter-ci-Files';
  list.dataset.testid = 'jupyter-ci-files';
  list.setAttribute('aria-label', 'Files this run created or changed');
  for (const file of shownFiles(files, folder)) {
    const item = document.createElement('li');
    item.className = 'jp-jupyter-ci-Files-item';
    item.dataset.path = file.path;
    const link = document.createElement('button');
    link.type = 'button';
    link.className = 'jp-jupyter-ci-Files-open';
    link.textContent = file.name;
    link.title = `Open ${file.path} in JupyterLab`;
    link.addEventListener('click', () => open(file.path));
    const detail = document.createElement('span');
    detail.className = 'jp-jupyter-ci-Files-detail';
    detail.textContent = ` (${file.detail}) `;
    const download = document.createElement('a');
    download.className = 'jp-jupyter-ci-Files-download';
    download.href = file.download;
    download.download = PathExt.basename(file.path);
    download.textContent = 'download';
    download.setAttribute('aria-label', `Download ${file.name}`);
    item.append(link, detail, download);
    list.append(item);
  }
  return list;
}

/**
 * A size in bytes as people read it ("812 B", "1.2 kB", "3.4 MB").
 */
export function sizeText(size: number): string {
  if (size < 1000) {
    return `${size} B`;
  }
  const units = ['kB', 'MB', 'GB', 'TB'];
  let value = size;
  let unit = 'B';
  for (const next of units) {
    if (value < 1000) {
      break;
    }
    value /= 1000;
    unit = next;
  }
  return `${value < 10 ? value.toFixed(1) : Math.round(value)} ${unit}`;
}
