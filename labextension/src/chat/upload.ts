import { PathExt } from '@jupyterlab/coreutils';
import { Contents } from '@jupyterlab/services';

/**
 * Files larger than this are not uploaded from the panel (bytes): the file
 * browser's upload, which sends large files in chunks, is the way for them.
 */
export const MAX_UPLOAD_BYTES = 50 * 1024 * 1024;

/**
 * What became of files dropped on the panel from outside JupyterLab.
 */
export interface IUploadResult {
  /**
   * Where each uploaded file now is, under the server's root.
   */
  uploaded: string[];
  /**
   * A sentence for each file that was not uploaded, saying why.
   */
  refused: string[];
}

/**
 * Upload files (dropped from the desktop) into `folder`, never over an
 * existing file: a name already taken gets a number ("data (1).csv").
 */
export async function uploadFiles(
  contents: Contents.IManager,
  folder: string,
  files: readonly File[]
): Promise<IUploadResult> {
  const result: IUploadResult = { uploaded: [], refused: [] };
  for (const file of files) {
    if (file.size > MAX_UPLOAD_BYTES) {
      result.refused.push(
        `${file.name} is larger than ${MAX_UPLOAD_BYTES / 1024 / 1024} MB: upload it with the file browser, then attach it.`
      );
      continue;
    }
    try {
      const path = await freePath(contents, folder, file.name);
      await contents.save(path, {
        type: 'file',
        format: 'base64',
        content: await base64Of(file)
      });
      result.uploaded.push(path);
    } catch (error) {
      const why = error instanceof Error ? error.message : String(error);
      result.refused.push(`${file.name} could not be uploaded: ${why}`);
    }
  }
  return result;
}

/**
 * `folder/name`, or `folder/stem (n).ext` for the first n not taken.
 */
async function freePath(
  contents: Contents.IManager,
  folder: string,
  name: string
): Promise<string> {
  const extension = PathExt.extname(name);
  const stem = extension ? name.slice(0, -extension.length) : name;
  for (let n = 0; n < 1000; n++) {
    const candidate = PathExt.join(
      folder,
      n === 0 ? name : `${stem} (${n})${extension}`
    );
    if (!(await exists(contents, candidate))) {
      return candidate;
    }
  }
  throw new Error(`too many files named like ${name} in ${folder || '/'}`);
}

async function exists(
  contents: Contents.IManager,
  path: string
): Promise<boolean> {
  try {
    await contents.get(path, { content: false });
    return true;
  } catch (error) {
    const status = (error as { response?: { status?: number } }).response
      ?.status;
    if (status === 404) {
      return false;
    }
    throw error;
  }
}

/**
 * The file's bytes as base64 (what the contents API takes for binary files).
 */
async function base64Of(file: File): Promise<string> {
  const bytes = new Uint8Array(await file.arrayBuffer());
  let binary = '';
  const chunk = 0x8000;
  for (let i = 0; i < bytes.length; i += chunk) {
    binary += String.fromCharCode(...bytes.subarray(i, i + chunk));
  }
  return btoa(binary);
}
