import { randomId } from './constants';

/**
 * Who the tab is to the jupyter-ci server: a client id and the secret the
 * server gave it at its first hello.
 */
export interface IClientIdentity {
  id: string;
  secret: string | null;
}

/**
 * The tab's identity, kept across reloads of the same browser tab and never
 * shared by two live pages (ARCHITECTURE.md, Invariants).
 *
 * It lives in the tab's session storage, which a reload keeps (so the
 * reloaded page is the same client, and its runs go on) and which a
 * duplicated tab copies. So a page takes a stored identity only if no other
 * live page holds it: each page holds a Web Lock named by its client id for
 * its life (released when the page goes away, a reload included), or, where
 * Web Locks are missing (a page not served over HTTPS or from localhost),
 * answers claims of its id on a BroadcastChannel. A page that cannot take the
 * stored identity mints a new one.
 */
export class TabIdentity {
  constructor(storage: Storage | null = Private.sessionStorage()) {
    this._storage = storage;
    this._current = { id: randomId(), secret: null };
  }

  /**
   * The client id (final once `take` has resolved).
   */
  get id(): string {
    return this._current.id;
  }

  /**
   * The secret the server gave this client id, if any.
   */
  get secret(): string | null {
    return this._current.secret;
  }

  set secret(value: string | null) {
    this._current.secret = value;
    Private.store(this._storage, this._current);
  }

  /**
   * Whether this page took over the identity of an earlier page of the same
   * tab (a reload), rather than a new one.
   */
  get restored(): boolean {
    return this._restored;
  }

  /**
   * Take the stored identity if no other live page holds it, else a new one.
   */
  take(): Promise<void> {
    this._taking ??= this._take();
    return this._taking;
  }

  /**
   * Another page is this client (the server said so): become a new one.
   */
  async renew(): Promise<void> {
    this._restored = false;
    this._current = { id: randomId(), secret: null };
    await Private.hold(this._current.id, 0);
    Private.store(this._storage, this._current);
  }

  private async _take(): Promise<void> {
    const stored = Private.load(this._storage);
    if (stored && (await Private.hold(stored.id, Private.TAKE_WAIT))) {
      this._current = stored;
      this._restored = true;
      return;
    }
    if (stored) {
      console.info(
        'jupyter-ci: another tab is this client (a duplicated tab); this one gets an id of its own'
      );
    }
    await Private.hold(this._current.id, 0);
    Private.store(this._storage, this._current);
  }

  private readonly _storage: Storage | null;
  private _current: IClientIdentity;
  private _restored = false;
  private _taking: Promise<void> | null = null;
}

namespace Private {
  /**
   * Where the identity is kept in the tab's session storage.
   */
  export const STORAGE_KEY = 'jupyter-ci:client';

  /**
   * How long a page waits for a stored identity (ms): the page it reloaded
   * releases its lock as it goes, usually at once; a live page holding it (a
   * duplicated tab's original) never does, and answers a claim at once.
   */
  export const TAKE_WAIT = 2_000;

  /**
   * The channel on which pages claim ids where Web Locks are missing.
   */
  const CHANNEL = 'jupyter-ci:clients';

  /**
   * Ids this page holds (answered on the channel).
   */
  const held = new Set<string>();
  let channel: BroadcastChannel | null = null;

  export function sessionStorage(): Storage | null {
    try {
      return window.sessionStorage;
    } catch {
      return null; // storage is off: every page is a new client
    }
  }

  export function load(storage: Storage | null): IClientIdentity | null {
    try {
      const value = JSON.parse(storage?.getItem(STORAGE_KEY) ?? 'null') as {
        id?: unknown;
        secret?: unknown;
      } | null;
      if (value && typeof value.id === 'string' && value.id.length >= 8) {
        return {
          id: value.id,
          secret: typeof value.secret === 'string' ? value.secret : null
        };
      }
    } catch {
      // unreadable: a new identity
    }
    return null;
  }

  export function store(
    storage: Storage | null,
    identity: IClientIdentity
  ): void {
    try {
      storage?.setItem(STORAGE_KEY, JSON.stringify(identity));
    } catch {
      // full or off: the next page is a new client
    }
  }

  /**
   * Hold `id` for this page's life; false when another live page holds it
   * (waiting at most `wait` ms for it to be released).
   */
  export function hold(id: string, wait: number): Promise<boolean> {
    const locks = (navigator as Navigator & { locks?: LockManager }).locks;
    if (locks) {
      return new Promise<boolean>(resolve => {
        const controller = new AbortController();
        const timer = window.setTimeout(() => controller.abort(), wait);
        locks
          .request(
            `jupyter-ci-client:${id}`,
            wait > 0 ? { signal: controller.signal } : { ifAvailable: true },
            lock => {
              window.clearTimeout(timer);
              resolve(lock !== null);
              // Held until the page goes away.
              return lock ? new Promise<void>(() => undefined) : undefined;
            }
          )
          .catch(() => resolve(false)); // aborted: another page holds it
      });
    }
    return claim(id, wait);
  }

  /**
   * Claim `id` on the channel: false if a live page answers that it holds it
   * within `wait` ms.
   */
  function claim(id: string, wait: number): Promise<boolean> {
    if (typeof BroadcastChannel === 'undefined') {
      held.add(id);
      return Promise.resolve(true);
    }
    channel ??= open();
    const nonce = Math.random().toString(36).slice(2);
    const own = channel;
    return new Promise<boolean>(resolve => {
      const listener = (event: MessageEvent): void => {
        const data = event.data as { taken?: string; nonce?: string };
        if (data?.taken === id && data.nonce === nonce) {
          finish(false);
        }
      };
      const finish = (free: boolean): void => {
        window.clearTimeout(timer);
        own.removeEventListener('message', listener);
        if (free) {
          held.add(id);
        }
        resolve(free);
      };
      const timer = window.setTimeout(() => finish(true), wait);
      own.addEventListener('message', listener);
      own.postMessage({ claim: id, nonce });
    });
  }

  function open(): BroadcastChannel {
    const opened = new BroadcastChannel(CHANNEL);
    opened.addEventListener('message', (event: MessageEvent) => {
      const data = event.data as { claim?: string; nonce?: string };
      if (typeof data?.claim === 'string' && held.has(data.claim)) {
        opened.postMessage({ taken: data.claim, nonce: data.nonce });
      }
    });
    return opened;
  }
}
