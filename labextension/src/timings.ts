/**
 * How long the tab took to answer one call (for benchmarks: the Lab path's
 * own cost, without the kernel's time).
 */
export interface ICallTiming {
  callId: string;
  runId: string;
  method: string;
  /**
   * When the call arrived and when its answer left, epoch milliseconds.
   */
  received: number;
  answered: number;
  /**
   * The kernel's own time for a run_cell (execute_input to reply), seconds.
   */
  kernelSeconds: number | null;
}

/**
 * A bounded record of the latest call timings. Kept in memory only; read
 * through the `jupyter-ci:call-timings` command.
 */
export class CallTimings {
  constructor(capacity = 2000) {
    this._capacity = capacity;
  }

  /**
   * Now, in epoch milliseconds with sub-millisecond precision.
   */
  static now(): number {
    return performance.timeOrigin + performance.now();
  }

  add(timing: ICallTiming): void {
    this._timings.push(timing);
    if (this._timings.length > this._capacity) {
      this._timings.splice(0, this._timings.length - this._capacity);
    }
  }

  /**
   * The recorded timings, oldest first.
   */
  all(): ICallTiming[] {
    return [...this._timings];
  }

  clear(): void {
    this._timings.length = 0;
  }

  private readonly _capacity: number;
  private readonly _timings: ICallTiming[] = [];
}
