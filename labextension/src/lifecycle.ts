import { DisposableSet, IDisposable } from '@lumino/disposable';
import { ISignal, Signal, Slot } from '@lumino/signaling';

/**
 * The life of a long-lived object of the tab (a tracker, a watcher, a
 * controller), written once.
 *
 * The signals it listens to are connected with the object as their receiver
 * (Lumino's `thisArg`), and what it owns (a helper, a watch) is kept in a
 * `DisposableSet`; `dispose()` disconnects the one and disposes the other,
 * once, then runs the subclass's own cleanup (`onDispose`), then drops every
 * connection left on the object's own signals (`Signal.clearData`).
 */
export abstract class Lifecycle implements IDisposable {
  get isDisposed(): boolean {
    return this._isDisposed;
  }

  dispose(): void {
    if (this._isDisposed) {
      return;
    }
    this._isDisposed = true;
    Signal.disconnectReceiver(this);
    this._owned.dispose();
    this.onDispose();
    Signal.clearData(this);
  }

  /**
   * Connect `slot` to `signal` until this object is disposed.
   */
  protected listen<T, U>(signal: ISignal<T, U>, slot: Slot<T, U>): void {
    signal.connect(slot, this);
  }

  /**
   * Disconnect a slot connected with `listen`.
   */
  protected unlisten<T, U>(signal: ISignal<T, U>, slot: Slot<T, U>): void {
    signal.disconnect(slot, this);
  }

  /**
   * Dispose `item` with this object (in the order they were owned).
   */
  protected own<T extends IDisposable>(item: T): T {
    this._owned.add(item);
    return item;
  }

  /**
   * The rest of the cleanup, after the signals are disconnected and what
   * the object owns is disposed.
   */
  protected onDispose(): void {
    // Nothing more by default.
  }

  private readonly _owned = new DisposableSet();
  private _isDisposed = false;
}
