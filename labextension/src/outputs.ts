import type { ICodeCellModel } from '@jupyterlab/cells';
import type * as nbformat from '@jupyterlab/nbformat';

import type { IOutput, IShowOutputsCall } from './protocol';

/**
 * The most a call reply's outputs may weigh (UTF-8 bytes of their JSON); the
 * server's websocket refuses much larger messages.
 */
export const MAX_OUTPUT_BYTES = 1024 * 1024;

/**
 * Text longer than this (characters) is cut to its head and tail when the
 * outputs are over the cap.
 */
const TEXT_LIMIT = 64 * 1024;
/**
 * Images (base64) larger than this are replaced by a one-line placeholder
 * when the outputs are over the cap.
 */
const IMAGE_LIMIT = 256 * 1024;

/**
 * Outputs made to fit the cap, and whether anything was cut.
 */
export interface ICappedOutputs {
  outputs: IOutput[];
  truncated: boolean;
}

/**
 * The JSON size of a value in UTF-8 bytes.
 */
export function jsonBytes(value: unknown): number {
  return new TextEncoder().encode(JSON.stringify(value)).length;
}

/**
 * Cap a cell's outputs so they fit in `maxBytes` of JSON.
 *
 * Within the cap nothing changes. Over it: long texts (streams, text mime
 * types, tracebacks) keep their head and tail with a line saying how much was
 * cut; big images and other big rich data are replaced by a placeholder; if
 * that is not enough, outputs are dropped from the middle (errors are kept,
 * they matter most to a fix) and a stream output says how many.
 */
export function capOutputs(
  outputs: readonly nbformat.IOutput[],
  maxBytes: number = MAX_OUTPUT_BYTES
): ICappedOutputs {
  const all = outputs.map(output => output as IOutput);
  if (jsonBytes(all) <= maxBytes) {
    return { outputs: all, truncated: false };
  }
  const trimmed = all.map(output => Private.trimOutput(output));
  if (jsonBytes(trimmed) <= maxBytes) {
    return { outputs: trimmed, truncated: true };
  }
  return { outputs: Private.dropOutputs(trimmed, maxBytes), truncated: true };
}

namespace Private {
  /**
   * One output with its long texts cut and its big data replaced.
   */
  export function trimOutput(output: IOutput): IOutput {
    switch (output.output_type) {
      case 'stream':
        return { ...output, text: cutText(joined(output.text)) };
      case 'error':
        return { ...output, traceback: cutLines(output.traceback) };
      case 'display_data':
      case 'execute_result':
      case 'update_display_data':
        return { ...output, data: trimBundle(output.data) };
      default:
        return output;
    }
  }

  /**
   * Keep the outputs that fit, errors first; say how many were left out.
   */
  export function dropOutputs(outputs: IOutput[], maxBytes: number): IOutput[] {
    const budget = maxBytes - 512; // room for the note
    const keep = new Set<number>();
    let used = 2;
    const indices = outputs.map((_output, index) => index);
    const order = [
      ...indices.filter(i => outputs[i].output_type === 'error'),
      ...indices.filter(i => outputs[i].output_type !== 'error')
    ];
    for (const index of order) {
      const size = jsonBytes(outputs[index]) + 1;
      if (used + size <= budget) {
        keep.add(index);
        used += size;
      }
    }
    const kept = outputs.filter((_output, index) => keep.has(index));
    const left = outputs.length - kept.length;
    if (left > 0) {
      kept.push({
        output_type: 'stream',
        name: 'stderr',
        text: `[jupyter-ci: ${left} more output(s) not sent: too large]\n`
      });
    }
    return kept;
  }

  function trimBundle(data: unknown): Record<string, unknown> {
    const bundle: Record<string, unknown> = {};
    if (typeof data !== 'object' || data === null) {
      return bundle;
    }
    const notes: string[] = [];
    for (const [mime, value] of Object.entries(data)) {
      const text = typeof value === 'string' || Array.isArray(value);
      const size = text ? joined(value).length : JSON.stringify(value).length;
      if (mime.startsWith('image/') && size > IMAGE_LIMIT) {
        notes.push(`[${mime} of ${kilobytes(size)} not sent: too large]`);
      } else if (mime.startsWith('text/') && size > TEXT_LIMIT) {
        bundle[mime] = cutText(joined(value));
      } else if (size > TEXT_LIMIT) {
        notes.push(`[${mime} of ${kilobytes(size)} not sent: too large]`);
      } else {
        bundle[mime] = value;
      }
    }
    if (notes.length) {
      const plain =
        typeof bundle['text/plain'] === 'string'
          ? `${bundle['text/plain']}\n`
          : '';
      bundle['text/plain'] = plain + notes.join('\n');
    }
    return bundle;
  }

  /**
   * nbformat allows text as a string or a list of lines.
   */
  function joined(value: unknown): string {
    if (Array.isArray(value)) {
      return value.map(String).join('');
    }
    return typeof value === 'string' ? value : JSON.stringify(value ?? '');
  }

  function cutText(text: string): string {
    if (text.length <= TEXT_LIMIT) {
      return text;
    }
    const head = Math.floor(TEXT_LIMIT * 0.6);
    const tail = TEXT_LIMIT - head;
    const cut = text.length - head - tail;
    return (
      text.slice(0, head) +
      `\n[jupyter-ci: ${cut.toLocaleString('en-US')} characters cut]\n` +
      text.slice(text.length - tail)
    );
  }

  function cutLines(lines: unknown): string[] {
    const all = Array.isArray(lines) ? lines.map(String) : [];
    const text = all.join('\n');
    if (text.length <= TEXT_LIMIT) {
      return all;
    }
    return cutText(text).split('\n');
  }

  function kilobytes(size: number): string {
    return `${Math.round(size / 1024).toLocaleString('en-US')} KB`;
  }
}

/**
 * Make a cell show exactly the outputs the server heard for it after a
 * reload (`show_outputs`: the previous page's execution of it is gone; with
 * real-time collaboration the outputs that page wrote are in the document
 * already): the outputs that differ are replaced, the missing ones added, so
 * a second sight of an output never shows it twice.
 */
export function showOutputs(
  model: ICodeCellModel,
  call: IShowOutputsCall
): void {
  const outputs = model.outputs;
  // The server builds them with nbformat's own rules (its one normaliser).
  const wanted = call.outputs as nbformat.IOutput[];
  model.trusted = true;
  if (outputs.length > wanted.length) {
    outputs.clear(); // cleared by the cell (clear_output): start again
  }
  wanted.forEach((output, index) => {
    if (index >= outputs.length) {
      outputs.add(output);
    } else if (
      JSON.stringify(outputs.get(index).toJSON()) !== JSON.stringify(output)
    ) {
      outputs.set(index, output);
    }
  });
  if (call.execution_count !== null) {
    model.executionCount = call.execution_count;
  }
  model.executionState = call.running ? 'running' : 'idle';
}
