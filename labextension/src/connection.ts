import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';
import { ISignal, Signal } from '@lumino/signaling';

import { TabIdentity } from './identity';
import { Lifecycle } from './lifecycle';
import { API_NAMESPACE } from './request';
import type {
  Call,
  CallReply,
  ClientMessage,
  ClientRequest,
  ICallProgress,
  IErrorInfo,
  IHelloRequest,
  IRequestAccepted,
  IRunInfo,
  ISubscribeRequest,
  RequestReply,
  RunEvent,
  ServerMessage
} from './protocol';

/**
 * Where the tab's websocket to the jupyter-ci server is.
 */
export type ConnectionStatus = 'connecting' | 'connected' | 'disconnected';

type WithoutRequestId<T> = T extends unknown ? Omit<T, 'request_id'> : never;

/**
 * A request the tab may send (hello and subscribe are the connection's own).
 */
export type OutgoingRequest = WithoutRequestId<
  Exclude<ClientRequest, IHelloRequest | ISubscribeRequest>
>;

/**
 * The server refused a request; `error` says why and what to do.
 */
export class RequestRefusedError extends Error {
  constructor(
    readonly error: IErrorInfo,
    readonly runId: string | null
  ) {
    super(error.message);
    this.name = 'RequestRefusedError';
  }
}

/**
 * The request was sent, but the connection dropped before the server replied
 * (or the connection was not there in time to send it).
 */
export class ConnectionLostError extends Error {
  /**
   * @param neverConnected - the socket could not be (re)opened in time
   */
  constructor(neverConnected = false) {
    super(
      neverConnected
        ? 'JupyterLab cannot reach the jupyter-ci server extension.'
        : 'The connection to the jupyter-ci server was lost.'
    );
    this.name = 'ConnectionLostError';
  }
}

/**
 * The tab's websocket to `<baseUrl>/jupyter-ci/ws`.
 *
 * Says hello first (and again after every reconnect, with the same client
 * id: the tab's identity, which a reload keeps), reconnects with backoff
 * when the socket drops, numbers requests and
 * resolves them with the server's reply, asks for the run events it missed
 * while away (`replay`), drops events it has already seen, and hands calls,
 * events and notices to listeners through signals. Requests made while the
 * socket is down wait until it is back; call replies are dropped then (the
 * server resends unanswered calls, which the bridge answers from its cache).
 */
export class CIConnection extends Lifecycle {
  constructor(options: CIConnection.IOptions) {
    super();
    this._identity = options.identity ?? new TabIdentity();
    this._settings = options.settings ?? ServerConnection.makeSettings();
    this._notebookPaths = options.notebookPaths;
    this._maxBackoff = options.maxBackoff ?? 5000;
  }

  /**
   * Who this tab is to the server: kept across reloads of the browser tab
   * (a duplicated tab, or a tab whose id another page took, gets its own).
   */
  get clientId(): string {
    return this._identity.id;
  }

  /**
   * The socket's state.
   */
  get status(): ConnectionStatus {
    return this._status;
  }

  /**
   * Emitted when the socket's state changes.
   */
  get statusChanged(): ISignal<this, ConnectionStatus> {
    return this._statusChanged;
  }

  /**
   * Calls from runs this tab owns (each is answered with `reply`).
   */
  get calls(): ISignal<this, Call> {
    return this._calls;
  }

  /**
   * Run events, each once, for runs of this tab and of notebooks it has open.
   */
  get events(): ISignal<this, RunEvent> {
    return this._events;
  }

  /**
   * The active and queued runs of the server, as last announced.
   */
  get runs(): readonly IRunInfo[] {
    return this._runs;
  }

  /**
   * Emitted with the runs whenever they change.
   */
  get runsChanged(): ISignal<this, readonly IRunInfo[]> {
    return this._runsChanged;
  }

  /**
   * Errors the server reports outside a request's reply.
   */
  get notices(): ISignal<this, IErrorInfo> {
    return this._notices;
  }

  /**
   * Open the socket (no-op when already started).
   */
  start(): void {
    if (this._started || this.isDisposed) {
      return;
    }
    this._started = true;
    void this._identity.take().then(() => this._open());
  }

  /**
   * Send a request and resolve with the server's acceptance.
   *
   * A request made while the socket is down waits for it; with
   * `queueTimeout` (ms) it gives up if the socket is not back by then.
   *
   * @throws {RequestRefusedError} when the server refuses it
   * @throws {ConnectionLostError} when the socket drops before the reply, or
   *   is not back within `queueTimeout`
   */
  request(
    request: OutgoingRequest,
    options: { queueTimeout?: number } = {}
  ): Promise<IRequestAccepted> {
    return new Promise<IRequestAccepted>((resolve, reject) => {
      const message = {
        ...request,
        request_id: `${this.clientId.slice(0, 8)}-${++this._requests}`
      } as ClientRequest;
      const pending: Private.IPending = { message, resolve, reject };
      if (this._ready) {
        this._sendRequest(pending);
        return;
      }
      this._queue.push(pending);
      if (options.queueTimeout !== undefined) {
        window.setTimeout(() => {
          const index = this._queue.indexOf(pending);
          if (index >= 0) {
            this._queue.splice(index, 1);
            reject(new ConnectionLostError(true));
          }
        }, options.queueTimeout);
      }
    });
  }

  /**
   * Answer a call (a result, a failure, or `started` progress).
   */
  reply(message: CallReply | ICallProgress): void {
    if (this._ready) {
      this._send(message);
    }
  }

  /**
   * Tell the server which notebooks the tab has open now.
   */
  subscribe(): void {
    if (!this._ready) {
      return; // the next hello carries them
    }
    const message: ISubscribeRequest = {
      request: 'subscribe',
      notebook_paths: this._notebookPaths()
    };
    this._send(message);
  }

  /**
   * Whether the run is this client's but an earlier page of the tab started
   * it (this page was reloaded meanwhile).
   */
  isAdopted(runId: string): boolean {
    return this._adopted.has(runId);
  }

  /**
   * Follow a run's events across reconnects (the runs this tab starts, and
   * any it shows); `replayNow`: also ask now for the events it already had
   * (a run this page did not see start).
   */
  follow(runId: string, replayNow = false): void {
    if (this._seen.has(runId)) {
      return;
    }
    this._seen.set(runId, { max: 0, seqs: new Set(), finished: false });
    if (replayNow && this._ready) {
      // Connected already: its events so far now (else at the next hello).
      this._replay(runId, 0);
    }
  }

  protected onDispose(): void {
    window.clearTimeout(this._retryTimer);
    const socket = this._socket;
    this._socket = null;
    socket?.close();
    this._failSent();
    for (const pending of this._queue.splice(0)) {
      pending.reject(new ConnectionLostError());
    }
  }

  // --- socket ---------------------------------------------------------------

  private _open(): void {
    if (this.isDisposed) {
      return;
    }
    this._setStatus('connecting');
    const settings = this._settings;
    let url = URLExt.join(settings.wsUrl, API_NAMESPACE, 'ws');
    if (settings.appendToken && settings.token) {
      url += `?token=${encodeURIComponent(settings.token)}`;
    }
    let socket: WebSocket;
    try {
      socket = new settings.WebSocket(url);
    } catch {
      this._retry();
      return;
    }
    this._socket = socket;
    socket.onopen = () => {
      if (socket === this._socket) {
        this._hello();
      }
    };
    socket.onmessage = (event: MessageEvent) => {
      if (socket === this._socket && typeof event.data === 'string') {
        this._receive(event.data);
      }
    };
    socket.onclose = (event: CloseEvent) => {
      if (event.code === Private.CLOSE_POLICY) {
        // The server ended it for what this page did (too slow to read its
        // messages, too many hellos): reconnecting replays what was missed.
        console.warn(
          `jupyter-ci: the server closed the connection: ${event.reason}`
        );
      }
      if (socket === this._socket) {
        this._socket = null;
        this._ready = false;
        this._failSent();
        this._setStatus('disconnected');
        this._retry();
      }
    };
  }

  private _retry(): void {
    if (this.isDisposed) {
      return;
    }
    const base = Math.min(this._maxBackoff, 250 * 2 ** this._attempt);
    this._attempt += 1;
    const delay = base * (0.5 + Math.random() / 2);
    window.clearTimeout(this._retryTimer);
    this._retryTimer = window.setTimeout(() => this._open(), delay);
  }

  private _hello(): void {
    const hello: IHelloRequest = {
      request: 'hello',
      request_id: `${this.clientId.slice(0, 8)}-hello-${++this._requests}`,
      client_id: this.clientId,
      protocol_version: 1,
      notebook_paths: this._notebookPaths(),
      page_start: !this._welcomedOnce
    };
    const secret = this._identity.secret;
    if (secret) {
      // The server gave it at the first hello: only this tab can be this client id.
      hello.client_secret = secret;
    }
    const pending: Private.IPending = {
      message: hello,
      resolve: reply => this._welcomed(reply),
      reject: (error: Error) => {
        // Refused or dropped: the socket closes and the next attempt retries,
        // as a new client if another page is this one.
        const taken =
          error instanceof RequestRefusedError &&
          error.error.code === 'client_taken';
        void (taken ? this._identity.renew() : Promise.resolve()).then(() =>
          this._socket?.close()
        );
      }
    };
    this._sendRequest(pending);
  }

  private _welcomed(reply: IRequestAccepted): void {
    if (reply.client_secret) {
      this._identity.secret = reply.client_secret;
    }
    this._welcomedOnce = true;
    this._ready = true;
    this._attempt = 0;
    this._setRuns(reply.runs ?? []);
    this._setStatus('connected');
    for (const pending of this._queue.splice(0)) {
      this._sendRequest(pending);
    }
    // The runs this client owns that the page does not follow yet (it was
    // reloaded): all their events, to show them where they are.
    for (const run of reply.runs ?? []) {
      if (run.owner === this.clientId && !this._seen.has(run.run_id)) {
        this._adopted.add(run.run_id);
        this.follow(run.run_id);
      }
    }
    // Ask for what we missed while away; live events may overlap (deduped).
    for (const [runId, seen] of this._seen) {
      if (!seen.finished) {
        this._replay(runId, seen.max);
      }
    }
  }

  private _replay(runId: string, afterSeq: number): void {
    this.request({ request: 'replay', run_id: runId, after_seq: afterSeq })
      // An unknown run (long gone) has nothing to replay.
      .catch(() => undefined);
  }

  private _sendRequest(pending: Private.IPending): void {
    const id = pending.message.request_id;
    if (id) {
      this._sent.set(id, pending);
    }
    this._send(pending.message);
  }

  private _send(message: ClientMessage): void {
    const socket = this._socket;
    if (socket && socket.readyState === WebSocket.OPEN) {
      socket.send(JSON.stringify(message));
    }
  }

  private _failSent(): void {
    const sent = [...this._sent.values()];
    this._sent.clear();
    for (const pending of sent) {
      pending.reject(new ConnectionLostError());
    }
  }

  // --- receiving --------------------------------------------------------------

  private _receive(text: string): void {
    let message: ServerMessage;
    try {
      message = JSON.parse(text) as ServerMessage;
    } catch {
      return;
    }
    if ('reply_to' in message) {
      this._answered(message);
    } else if ('method' in message) {
      this._calls.emit(message);
    } else if ('notice' in message) {
      if (message.notice === 'runs') {
        this._setRuns(message.runs);
      } else {
        this._notices.emit(message.error);
      }
    } else if ('seq' in message) {
      this._event(message);
    }
  }

  private _answered(reply: RequestReply): void {
    const pending = this._sent.get(reply.reply_to);
    if (!pending) {
      return;
    }
    this._sent.delete(reply.reply_to);
    if (reply.ok) {
      pending.resolve(reply);
    } else {
      pending.reject(
        new RequestRefusedError(reply.error, reply.run_id ?? null)
      );
    }
  }

  private _event(event: RunEvent): void {
    let seen = this._seen.get(event.run_id);
    if (!seen) {
      seen = { max: 0, seqs: new Set(), finished: false };
      this._seen.set(event.run_id, seen);
      this._trimSeen();
    }
    if (seen.seqs.has(event.seq)) {
      return;
    }
    seen.seqs.add(event.seq);
    seen.max = Math.max(seen.max, event.seq);
    if (event.type === 'finished') {
      seen.finished = true;
    }
    this._events.emit(event);
  }

  private _trimSeen(): void {
    // Finished runs are forgotten first, oldest first; a page follows a few.
    if (this._seen.size <= Private.MAX_FOLLOWED) {
      return;
    }
    for (const [runId, seen] of this._seen) {
      if (seen.finished) {
        this._seen.delete(runId);
        return;
      }
    }
  }

  private _setRuns(runs: readonly IRunInfo[]): void {
    this._runs = runs;
    this._runsChanged.emit(runs);
  }

  private _setStatus(status: ConnectionStatus): void {
    if (this._status !== status) {
      this._status = status;
      this._statusChanged.emit(status);
    }
  }

  private readonly _settings: ServerConnection.ISettings;
  private readonly _notebookPaths: () => string[];
  private readonly _maxBackoff: number;
  private _socket: WebSocket | null = null;
  private _status: ConnectionStatus = 'disconnected';
  private _started = false;
  private _ready = false;
  private _welcomedOnce = false;
  private readonly _identity: TabIdentity;
  private _attempt = 0;
  private _retryTimer = 0;
  private _requests = 0;
  private _runs: readonly IRunInfo[] = [];
  private readonly _queue: Private.IPending[] = [];
  private readonly _sent = new Map<string, Private.IPending>();
  private readonly _seen = new Map<string, Private.ISeen>();
  private readonly _adopted = new Set<string>();
  private readonly _statusChanged = new Signal<this, ConnectionStatus>(this);
  private readonly _calls = new Signal<this, Call>(this);
  private readonly _events = new Signal<this, RunEvent>(this);
  private readonly _runsChanged = new Signal<this, readonly IRunInfo[]>(this);
  private readonly _notices = new Signal<this, IErrorInfo>(this);
}

/**
 * The namespace for `CIConnection` statics.
 */
export namespace CIConnection {
  export interface IOptions {
    /**
     * The notebooks the tab has open (sent with hello and subscribe).
     */
    notebookPaths: () => string[];
    /**
     * Who the tab is (kept across reloads of the browser tab by default).
     */
    identity?: TabIdentity;
    /**
     * Server connection settings; the page's by default.
     */
    settings?: ServerConnection.ISettings;
    /**
     * The longest wait between reconnection attempts, in ms (5000).
     */
    maxBackoff?: number;
  }
}

namespace Private {
  /**
   * Runs whose events are remembered for deduplication and replay.
   */
  export const MAX_FOLLOWED = 100;

  /**
   * The close code of a connection the server ended for what the page did
   * (`ws.py`, `CLOSE_POLICY`).
   */
  export const CLOSE_POLICY = 1008;

  export interface IPending {
    message: ClientRequest;
    resolve: (reply: IRequestAccepted) => void;
    reject: (error: Error) => void;
  }

  export interface ISeen {
    max: number;
    seqs: Set<number>;
    finished: boolean;
  }
}
