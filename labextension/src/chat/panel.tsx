import { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import { ReactWidget } from '@jupyterlab/ui-components';
import type { Drag } from '@lumino/dragdrop';
import { Message } from '@lumino/messaging';
import { Signal } from '@lumino/signaling';
import * as React from 'react';

import { jupyterCIIcon } from '../icons';
import { ChatController } from './controller';
import { ChatView, IShown } from './view';

/**
 * The id of the jupyter-ci side panel (used by `shell.activateById`).
 */
export const PANEL_ID = 'jupyter-ci-panel';

/**
 * The mime type of the paths the file browser drags.
 */
const CONTENTS_MIME = 'application/x-jupyter-icontents';

/**
 * The jupyter-ci chat side panel: the conversation of the notebook in focus.
 */
export class ChatPanel extends ReactWidget {
  constructor(options: ChatPanel.IOptions) {
    super();
    this._controller = options.controller;
    this._rendermime = options.rendermime;
    this.id = PANEL_ID;
    this.title.icon = jupyterCIIcon;
    this.title.caption = 'jupyter-ci';
    this.addClass('jp-jupyter-ci-panel');
    this.node.tabIndex = -1;
  }

  get controller(): ChatController {
    return this._controller;
  }

  /**
   * Drag events: files dragged from the file browser (Lumino drags) are
   * attached; files dropped from outside JupyterLab (native drags) are
   * uploaded next to the notebook, then attached.
   */
  handleEvent(event: Event): void {
    if (!event.type.startsWith('lm-')) {
      this._onNativeDrag(event as DragEvent);
      return;
    }
    const drag = event as Drag.Event;
    switch (event.type) {
      case 'lm-dragenter':
      case 'lm-dragover':
        if (drag.mimeData?.hasData(CONTENTS_MIME)) {
          event.preventDefault();
          event.stopPropagation();
          drag.dropAction = drag.proposedAction;
          this.addClass('jp-mod-dropTarget');
        }
        break;
      case 'lm-dragleave':
        this.removeClass('jp-mod-dropTarget');
        break;
      case 'lm-drop': {
        this.removeClass('jp-mod-dropTarget');
        const paths: unknown = drag.mimeData?.getData(CONTENTS_MIME);
        if (Array.isArray(paths)) {
          event.preventDefault();
          event.stopPropagation();
          drag.dropAction = drag.proposedAction;
          this._controller.attachments.attachFiles(
            paths.filter((p): p is string => typeof p === 'string')
          );
        }
        break;
      }
      default:
        break;
    }
  }

  private _onNativeDrag(event: DragEvent): void {
    const transfer = event.dataTransfer;
    if (!transfer || !Array.from(transfer.types).includes('Files')) {
      return;
    }
    switch (event.type) {
      case 'dragenter':
      case 'dragover':
        event.preventDefault();
        event.stopPropagation();
        transfer.dropEffect = 'copy';
        this.addClass('jp-mod-dropTarget');
        break;
      case 'dragleave':
        this.removeClass('jp-mod-dropTarget');
        break;
      case 'drop':
        event.preventDefault();
        event.stopPropagation();
        this.removeClass('jp-mod-dropTarget');
        void this._controller.attachments.uploadAndAttach(
          Array.from(transfer.files)
        );
        break;
      default:
        break;
    }
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    for (const type of Private.DRAG_EVENTS) {
      this.node.addEventListener(type, this);
    }
  }

  protected onBeforeDetach(msg: Message): void {
    for (const type of Private.DRAG_EVENTS) {
      this.node.removeEventListener(type, this);
    }
    super.onBeforeDetach(msg);
  }

  /**
   * Activated (its icon, *Open jupyter-ci panel*, a command that shows it):
   * the keyboard focus goes to the request box.
   */
  protected onActivateRequest(msg: Message): void {
    super.onActivateRequest(msg);
    this._focusInput();
  }

  /**
   * Put the focus in the request box, and keep it there while the activation
   * settles: the box may not be rendered yet (the panel's first show), and
   * the command palette gives the focus back to the main area's widget once
   * its command has run, a frame or two later. Any key or click of the user's
   * ends this at once; a box that takes no input (no notebook, no model)
   * leaves the focus on the panel itself.
   */
  private _focusInput(): void {
    this._focusing?.();
    const started = performance.now();
    let steady = 0;
    let frame = 0;
    const stop = (): void => {
      window.cancelAnimationFrame(frame);
      document.removeEventListener('keydown', stop, true);
      document.removeEventListener('pointerdown', stop, true);
      if (this._focusing === stop) {
        this._focusing = null;
      }
    };
    const step = (): void => {
      if (
        this.isDisposed ||
        !this.isVisible ||
        performance.now() - started > Private.FOCUS_SETTLE_MS
      ) {
        stop();
        return;
      }
      const box = this.node.querySelector<HTMLTextAreaElement>(
        '[data-testid="jupyter-ci-input"]'
      );
      const target = box && !box.disabled ? box : this.node;
      if (document.activeElement === target) {
        steady += 1;
      } else {
        steady = 0;
        target.focus({ preventScroll: true });
      }
      if (box && steady >= Private.FOCUS_STEADY_FRAMES) {
        stop();
        return;
      }
      frame = window.requestAnimationFrame(step);
    };
    document.addEventListener('keydown', stop, true);
    document.addEventListener('pointerdown', stop, true);
    this._focusing = stop;
    step();
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    this._shownAgain.emit();
  }

  protected render(): React.ReactElement {
    return (
      <ChatView
        controller={this._controller}
        rendermime={this._rendermime}
        shown={this._shown}
      />
    );
  }

  private _focusing: (() => void) | null = null;
  private readonly _shownAgain = new Signal<this, void>(this);
  private readonly _shown: IShown = {
    isVisible: () => this.isVisible,
    shownAgain: this._shownAgain
  };
  private readonly _controller: ChatController;
  private readonly _rendermime: IRenderMimeRegistry;
}

/**
 * The namespace for `ChatPanel` statics.
 */
export namespace ChatPanel {
  export interface IOptions {
    controller: ChatController;
    rendermime: IRenderMimeRegistry;
  }
}

namespace Private {
  /**
   * How long the focus is kept in the request box after an activation, at
   * most, and for how many frames in a row it must have stayed there.
   */
  export const FOCUS_SETTLE_MS = 1000;
  export const FOCUS_STEADY_FRAMES = 10;

  /**
   * Lumino's drag events (from the file browser) and the browser's own (from
   * the desktop).
   */
  export const DRAG_EVENTS = [
    'lm-dragenter',
    'lm-dragover',
    'lm-dragleave',
    'lm-drop',
    'dragenter',
    'dragover',
    'dragleave',
    'drop'
  ];
}
