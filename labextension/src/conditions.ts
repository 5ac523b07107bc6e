/**
 * Promises that resolve when a condition holds, checked again whenever the
 * owner says its state changed (`check`), at the latest after a timeout, or
 * at once when the owner goes away (`releaseAll`).
 */
export class Conditions {
  /**
   * Resolves once `condition()` holds (or after `timeout` ms, or on
   * `releaseAll`).
   */
  until(condition: () => boolean, timeout: number): Promise<void> {
    if (this._released || condition()) {
      return Promise.resolve();
    }
    return new Promise<void>(resolve => {
      const waiter = (force: boolean): boolean => {
        if (!force && !condition()) {
          return false;
        }
        window.clearTimeout(timer);
        resolve();
        return true;
      };
      const timer = window.setTimeout(() => {
        this._waiters.delete(waiter);
        resolve();
      }, timeout);
      this._waiters.add(waiter);
    });
  }

  /**
   * The owner's state changed: resolve the waits whose condition now holds.
   */
  check(): void {
    this._wake(false);
  }

  /**
   * Resolve every wait, now and from now on.
   */
  releaseAll(): void {
    this._released = true;
    this._wake(true);
  }

  private _wake(force: boolean): void {
    for (const waiter of [...this._waiters]) {
      if (waiter(force)) {
        this._waiters.delete(waiter);
      }
    }
  }

  private readonly _waiters = new Set<(force: boolean) => boolean>();
  private _released = false;
}
