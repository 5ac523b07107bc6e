import type { Cell, ICodeCellModel } from '@jupyterlab/cells';
import type * as nbformat from '@jupyterlab/nbformat';
import { Notebook, NotebookActions } from '@jupyterlab/notebook';

import { answerOutput, readAnswer } from './answerOutput';
import { isCICell } from './constants';
import { Lifecycle } from './lifecycle';
import { STATUS_MIME } from './protocol';
import { NotebookIndex } from './notebooks';
import { IRunView, RunTracker } from './runs';
import {
  IStatusData,
  makeStatus,
  statusFromRun,
  statusOutput
} from './statusData';

/**
 * Keeps the status output of `%%ci` cells current in the tab that owns their
 * runs: the cell's outputs are replaced by one status output, rewritten when
 * the run's state, attempt or outcome changes (never per token), so a saved
 * notebook reads well anywhere. A run that ends with an answer (the model's
 * prose) gets it under the status, as Markdown with a plain-text twin
 * (`answerOutput`); running the `%%ci` again keeps it when the server answers
 * without a run (its cells are there), and a new run replaces it.
 */
export class StatusOutputs extends Lifecycle {
  constructor(index: NotebookIndex, runs: RunTracker) {
    super();
    this._index = index;
    this._runs = runs;
    this.listen(runs.changed, this._onRun);
    this.listen(NotebookActions.executionScheduled, this._onScheduled);
  }

  /**
   * The status last written for a cell (null if none this page).
   */
  get(cellId: string): IStatusData | null {
    return this._written.get(cellId) ?? null;
  }

  /**
   * Replace the cell's outputs with the status (and the answer that goes
   * with it); false if the cell is gone.
   */
  write(cellId: string, data: IStatusData): boolean {
    this._written.set(cellId, data);
    const found = this._index.findCellAnywhere(cellId);
    if (!found || found.model.type !== 'code') {
      return false;
    }
    const outputs = (found.model as ICodeCellModel).outputs;
    const wanted: nbformat.IOutput[] = [statusOutput(data)];
    const answer = this._answerFor(cellId, data);
    if (answer) {
      wanted.push(answerOutput(answer.text, answer.runId));
    }
    const current = Array.from({ length: outputs.length }, (_, i) =>
      outputs.get(i)
    );
    if (
      current.length === wanted.length &&
      current.length > 0 &&
      STATUS_MIME in current[0].data
    ) {
      wanted.forEach((output, i) => {
        if (JSON.stringify(current[i].toJSON()) !== JSON.stringify(output)) {
          outputs.set(i, output);
        }
      });
    } else {
      outputs.clear();
      for (const output of wanted) {
        outputs.add(output);
      }
    }
    return true;
  }

  /**
   * Keep the cell's status following the run until it ends.
   */
  follow(cellId: string, runId: string, base: IStatusData): void {
    this.release(cellId);
    this._answers.delete(cellId); // a new run: its own answer, if any
    this._followed.set(runId, { cellId, base });
    const view = this._runs.get(runId);
    if (view) {
      this._onRun(this._runs, view);
    } else {
      this.write(cellId, base);
    }
  }

  /**
   * Stop following runs for the cell: a newer request of the cell takes its
   * status over.
   */
  release(cellId: string): void {
    for (const [runId, followed] of this._followed) {
      if (followed.cellId === cellId) {
        this._followed.delete(runId);
      }
    }
  }

  /**
   * Change the status of a followed run's cell (e.g. its continuation).
   */
  amend(cellId: string, change: Partial<IStatusData>): void {
    const current = this._written.get(cellId);
    if (!current) {
      return;
    }
    for (const followed of this._followed.values()) {
      if (followed.cellId === cellId) {
        followed.base = { ...followed.base, ...change };
      }
    }
    this.write(cellId, makeStatus({ ...current, ...change }));
  }

  /**
   * The answer shown under a status: the run's, once it has one; the earlier
   * one when the server answered without a run (its cells are there).
   */
  private _answerFor(
    cellId: string,
    data: IStatusData
  ): { text: string; runId: string | null } | null {
    const answer = this._answers.get(cellId);
    if (!answer) {
      return null;
    }
    if (data.state === 'reused') {
      return answer;
    }
    return data.run_id !== null && answer.runId === data.run_id ? answer : null;
  }

  /**
   * A `%%ci` cell is about to run again (its outputs are about to be
   * cleared): remember the answer it shows, in case the server answers
   * without a run.
   */
  private readonly _onScheduled = (
    _sender: unknown,
    args: { notebook: Notebook; cell: Cell }
  ): void => {
    const model = args.cell.model;
    if (model.type !== 'code' || !isCICell(model.sharedModel.getSource())) {
      return;
    }
    const outputs = (model as ICodeCellModel).outputs;
    for (let i = 0; i < outputs.length; i++) {
      const answer = readAnswer(outputs.get(i).toJSON());
      if (answer) {
        this._answers.set(model.id, answer);
        return;
      }
    }
  };

  private readonly _onRun = (_sender: RunTracker, view: IRunView): void => {
    const followed = this._followed.get(view.runId) ?? this._adopt(view);
    if (!followed) {
      return;
    }
    const answer = view.finished?.answer;
    if (answer) {
      this._answers.set(followed.cellId, { text: answer, runId: view.runId });
    }
    const data = statusFromRun(followed.base, view);
    const previous = this._written.get(followed.cellId);
    if (previous && JSON.stringify(previous) === JSON.stringify(data)) {
      return; // a token: nothing to save
    }
    this.write(followed.cellId, data);
    if (view.finished) {
      this._followed.delete(view.runId);
    }
  };

  /**
   * Follow a run an earlier page of this tab claimed for a `%%ci` cell (this
   * page was reloaded): its cell shows the run again once it is here.
   */
  private _adopt(
    view: IRunView
  ): { cellId: string; base: IStatusData } | undefined {
    const cellId = view.anchorCellId;
    if (
      !cellId ||
      view.finished ||
      this._adopted.has(view.runId) ||
      !this._runs.connection.isAdopted(view.runId)
    ) {
      return undefined;
    }
    const found = this._index.findCellAnywhere(cellId);
    if (!found || !isCICell(found.model.sharedModel.getSource())) {
      return undefined;
    }
    this._adopted.add(view.runId);
    const followed = {
      cellId,
      base: makeStatus({ run_id: view.runId, state: view.state })
    };
    this._followed.set(view.runId, followed);
    return followed;
  }

  private readonly _index: NotebookIndex;
  private readonly _runs: RunTracker;
  private readonly _adopted = new Set<string>();
  private readonly _written = new Map<string, IStatusData>();
  /**
   * The answer under each `%%ci` cell, with the run it came from.
   */
  private readonly _answers = new Map<
    string,
    { text: string; runId: string | null }
  >();
  private readonly _followed = new Map<
    string,
    { cellId: string; base: IStatusData }
  >();
}
