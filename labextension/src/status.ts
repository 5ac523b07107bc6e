import { IDisposable } from '@lumino/disposable';
import { ISignal, Signal } from '@lumino/signaling';

import { requestAPI } from './request';
import { IStatusResponse, isStatusResponse } from './types';

/**
 * What the panel knows about the jupyter-ci server.
 */
export type StatusState =
  | { readonly kind: 'loading' }
  | { readonly kind: 'ready'; readonly status: IStatusResponse }
  | { readonly kind: 'error'; readonly message: string };

/**
 * Fetch the server status; the default asks `GET /jupyter-ci/status`.
 */
export type StatusFetcher = () => Promise<IStatusResponse>;

/**
 * Ask the server extension for its status and check the reply's shape.
 */
export async function fetchStatus(): Promise<IStatusResponse> {
  const reply = await requestAPI<unknown>('status');
  if (!isStatusResponse(reply)) {
    throw new Error(
      'jupyter-ci server sent a status reply of an unexpected shape.'
    );
  }
  return reply;
}

/**
 * Holds the latest server status and tells listeners when it changes.
 *
 * Only the newest request counts: a slow reply to an older `refresh()` is
 * dropped.
 */
export class ServerStatusModel implements IDisposable {
  constructor(options: ServerStatusModel.IOptions = {}) {
    this._fetch = options.fetchStatus ?? fetchStatus;
  }

  /**
   * The current state.
   */
  get state(): StatusState {
    return this._state;
  }

  /**
   * Emitted with the new state whenever it changes.
   */
  get stateChanged(): ISignal<this, StatusState> {
    return this._stateChanged;
  }

  get isDisposed(): boolean {
    return this._isDisposed;
  }

  /**
   * Fetch the status again. Never rejects: failures become an `error` state.
   */
  async refresh(): Promise<void> {
    if (this._isDisposed) {
      return;
    }
    const request = ++this._latestRequest;
    this._setState({ kind: 'loading' });
    let next: StatusState;
    try {
      next = { kind: 'ready', status: await this._fetch() };
    } catch (error) {
      next = { kind: 'error', message: Private.describe(error) };
    }
    if (request === this._latestRequest && !this._isDisposed) {
      this._setState(next);
    }
  }

  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    Signal.clearData(this);
  }

  private _setState(state: StatusState): void {
    this._state = state;
    this._stateChanged.emit(state);
  }

  private readonly _fetch: StatusFetcher;
  private _state: StatusState = { kind: 'loading' };
  private _latestRequest = 0;
  private _isDisposed = false;
  private readonly _stateChanged = new Signal<this, StatusState>(this);
}

/**
 * The namespace for `ServerStatusModel` statics.
 */
export namespace ServerStatusModel {
  export interface IOptions {
    /**
     * How to fetch the status; `fetchStatus` by default (tests swap it).
     */
    fetchStatus?: StatusFetcher;
  }
}

namespace Private {
  export function describe(error: unknown): string {
    if (error instanceof Error && error.message) {
      return error.message;
    }
    return `Could not get the jupyter-ci server status: ${String(error)}`;
  }
}
