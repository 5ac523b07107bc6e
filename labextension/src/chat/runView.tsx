import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import * as React from 'react';

import { ChatController } from './controller';
import { ICodeActions } from './markdown';
import { ReviewCard } from './review';
import { RunFiles } from './runFiles';
import { RunCells } from './runCells';
import { IRunProgress, usageLine } from './steps';

/**
 * A run's progress: its steps (each linking to its cell), its cells with
 * their code, its error, the review card while a cell waits, and what the
 * run used.
 */
export function RunSteps(props: {
  progress: IRunProgress;
  controller: ChatController;
  rendermime: IRenderMimeRegistry;
  actions: ICodeActions;
}): React.ReactElement {
  const { progress, controller, rendermime, actions } = props;
  const usage = usageLine(progress.usage);
  return (
    <div
      className="jp-jupyter-ci-run"
      data-testid="jupyter-ci-run"
      data-state={progress.state}
      data-finished={progress.finished}
      aria-busy={!progress.finished}
    >
      <ol className="jp-jupyter-ci-steps" aria-label="Progress of the run">
        {progress.steps.map((step, index) => (
          <li
            key={index}
            className={`jp-jupyter-ci-step jp-mod-${step.status}`}
            data-testid="jupyter-ci-step"
          >
            {step.cellId ? (
              <button
                type="button"
                className="jp-jupyter-ci-link"
                aria-label={`${step.label}: show the cell`}
                onClick={() => controller.notebook.showCell(step.cellId!)}
              >
                {step.label}
              </button>
            ) : (
              <span>{step.label}</span>
            )}
          </li>
        ))}
      </ol>
      <RunCells
        progress={progress}
        rendermime={rendermime}
        actions={actions}
        onShowCell={cellId => controller.notebook.showCell(cellId)}
      />
      {progress.files.length > 0 ? (
        <RunFiles
          files={progress.files}
          folder={controller.notebook.filesFolder()}
          onOpen={path => controller.notebook.openFile(path)}
        />
      ) : null}
      {progress.error ? (
        <div className="jp-jupyter-ci-error" role="alert">
          {progress.error}
        </div>
      ) : null}
      {progress.review ? (
        <ReviewCard
          key={`${progress.review.cellId}-${progress.attempt}`}
          proposal={controller.notebook.withCellSource(progress.review)}
          reason={progress.reason}
          onShowCell={() =>
            controller.notebook.showCell(progress.review!.cellId)
          }
          onAnswer={answer =>
            void controller.review(
              progress.runId,
              progress.review!.cellId,
              answer
            )
          }
        />
      ) : null}
      {usage ? (
        <div className="jp-jupyter-ci-usage" data-testid="jupyter-ci-run-usage">
          {`This run: ${usage}`}
        </div>
      ) : null}
    </div>
  );
}
