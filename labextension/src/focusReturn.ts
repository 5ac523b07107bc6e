/**
 * Where the keyboard focus was before it entered a group of controls, so it
 * can go back there when the control used goes away: Stop is disabled while
 * the run stops and then hidden or replaced, and a focused control that
 * disappears leaves the focus on the page's body.
 */
export class FocusOrigin {
  /**
   * Call with each `focusin` event of the group (React: `onFocus`).
   */
  entered(event: { relatedTarget: EventTarget | null }, group: Element): void {
    const from = event.relatedTarget;
    if (from instanceof HTMLElement && !group.contains(from)) {
      this._origin = from;
    } else if (from === null) {
      this._origin = null;
    }
  }

  /**
   * Give the focus back to where it came from (or to `fallback` when that
   * is gone or unknown), if it is in `group` or has fallen to the body.
   */
  restore(group: Element | null, fallback: HTMLElement | null): void {
    const active = document.activeElement;
    const lost =
      active === null ||
      active === document.body ||
      (group !== null && group.contains(active));
    if (!lost) {
      return; // the user has moved on
    }
    const origin = this._origin;
    const target = origin && Private.focusable(origin) ? origin : fallback;
    target?.focus({ preventScroll: true });
  }

  private _origin: HTMLElement | null = null;
}

namespace Private {
  /**
   * Whether focus can go back to an element: still in the page, shown and
   * enabled.
   */
  export function focusable(element: HTMLElement): boolean {
    return (
      element.isConnected &&
      element.getClientRects().length > 0 &&
      !(element as HTMLButtonElement).disabled
    );
  }
}
