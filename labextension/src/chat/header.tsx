import {
  Button,
  HTMLSelect,
  IOptionProps,
  ToolbarButtonComponent,
  refreshIcon
} from '@jupyterlab/ui-components';
import * as React from 'react';

import type { Mode } from '../protocol';
import type { IChatStatus } from './api';
import { ChatController, IChatState } from './controller';

/**
 * The panel's header: the notebook it is bound to, the model, the mode, the
 * share-outputs switch, export and clear.
 */
export function Header(props: {
  controller: ChatController;
  state: IChatState;
}): React.ReactElement {
  const { controller, state } = props;
  const prefs = state.prefs;
  return (
    <div className="jp-jupyter-ci-header">
      <div className="jp-jupyter-ci-header-row">
        <h2 className="jp-jupyter-ci-title">jupyter-ci</h2>
        <span className="jp-jupyter-ci-path" data-testid="jupyter-ci-path">
          {state.path ?? ''}
        </span>
        <ToolbarButtonComponent
          icon={refreshIcon}
          tooltip="Refresh jupyter-ci server status"
          dataset={{ testid: 'jupyter-ci-refresh' }}
          onClick={() => void controller.refreshStatus()}
        />
      </div>
      <div className="jp-jupyter-ci-header-row jp-jupyter-ci-options">
        {state.status ? (
          <ModelPicker
            status={state.status}
            value={prefs.model}
            onChange={model => controller.setModel(model)}
          />
        ) : null}
        <SelectField
          label="Mode"
          name="Mode: auto runs cells, review asks first, insert never runs"
          testid="jupyter-ci-mode"
          value={prefs.mode ?? ''}
          onChange={value => controller.setMode((value || null) as Mode | null)}
          options={[
            { value: '', label: 'server default' },
            'auto',
            'review',
            'insert'
          ]}
        />
        <label className="jp-jupyter-ci-field jp-jupyter-ci-switch">
          <input
            type="checkbox"
            className="jp-mod-styled"
            data-testid="jupyter-ci-share-outputs"
            aria-label="Share output values and data samples with the model"
            checked={prefs.shareOutputs ?? true}
            onChange={event => controller.setShareOutputs(event.target.checked)}
          />
          <span>Share outputs</span>
        </label>
      </div>
      <div className="jp-jupyter-ci-header-row">
        {[
          {
            label: 'Export',
            name: 'Export the conversation as Markdown',
            testid: 'jupyter-ci-export',
            onClick: () => void controller.exportMarkdown()
          },
          {
            label: 'Clear',
            name: 'Clear the conversation',
            testid: 'jupyter-ci-clear',
            onClick: () => void controller.clear()
          }
        ].map(action => (
          <Button
            key={action.testid}
            type="button"
            className="jp-jupyter-ci-button"
            minimal
            small
            data-testid={action.testid}
            aria-label={action.name}
            disabled={state.path === null}
            onClick={action.onClick}
          >
            {action.label}
          </Button>
        ))}
      </div>
    </div>
  );
}

/**
 * Picks the model among those the server configured (the choice is saved as
 * the user's default).
 */
function ModelPicker(props: {
  status: IChatStatus;
  value: string | null;
  onChange: (model: string | null) => void;
}): React.ReactElement | null {
  const { status, value, onChange } = props;
  if (status.models.length === 0) {
    return null;
  }
  const current = value && status.models.includes(value) ? value : '';
  return (
    <SelectField
      label="Model"
      name="Model"
      testid="jupyter-ci-model"
      value={current}
      onChange={model => onChange(model || null)}
      options={[
        { value: '', label: `${status.model ?? ''} (server default)` },
        ...status.models
      ]}
    />
  );
}

/**
 * A select of the header with its label; `name` is its accessible name.
 */
function SelectField(props: {
  label: string;
  name: string;
  testid: string;
  value: string;
  options: (string | IOptionProps)[];
  onChange: (value: string) => void;
}): React.ReactElement {
  const { label, name, testid, value, options, onChange } = props;
  return (
    <label className="jp-jupyter-ci-field">
      <span>{label}</span>
      <HTMLSelect
        className="jp-jupyter-ci-select"
        data-testid={testid}
        aria-label={name}
        value={value}
        onChange={event => onChange(event.target.value)}
        options={options}
      />
    </label>
  );
}

/**
 * The server's status in one line (version and model), or why it cannot be
 * reached.
 */
export function StatusLine(props: {
  controller: ChatController;
  state: IChatState;
}): React.ReactElement {
  const { controller, state } = props;
  if (state.statusError) {
    return (
      <div className="jp-jupyter-ci-error-box">
        <div
          className="jp-jupyter-ci-error"
          data-testid="jupyter-ci-error"
          role="alert"
        >
          {state.statusError}
        </div>
        <Button
          type="button"
          className="jp-jupyter-ci-button"
          minimal
          aria-label="Retry checking the jupyter-ci server"
          data-testid="jupyter-ci-retry"
          onClick={() => void controller.refreshStatus()}
        >
          Retry
        </Button>
      </div>
    );
  }
  if (!state.status) {
    return (
      <div
        className="jp-jupyter-ci-status jp-mod-loading"
        data-testid="jupyter-ci-status"
        role="status"
        aria-busy="true"
      >
        Checking jupyter-ci server…
      </div>
    );
  }
  const { version, model } = state.status;
  const chosen = state.prefs.model ?? model;
  return (
    <div
      className="jp-jupyter-ci-status"
      data-testid="jupyter-ci-status"
      role="status"
    >
      {chosen
        ? `jupyter-ci ${version} — model: ${chosen}`
        : `jupyter-ci ${version} — no model configured`}
      {state.status.storage_problem ? (
        <div className="jp-jupyter-ci-hint">{state.status.storage_problem}</div>
      ) : null}
    </div>
  );
}
