import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { ISignal, Signal } from '@lumino/signaling';

import type { Mode } from '../protocol';
import { followSettings } from '../settings';

/**
 * The panel's choices that are also the user's settings (the settings
 * registry keeps them per user): the default model, the mode and whether
 * outputs are shared with the model. Null means "the server's setting".
 */
export interface IPanelPrefs {
  model: string | null;
  mode: Mode | null;
  shareOutputs: boolean | null;
}

/**
 * Reads and writes the panel's choices in the settings registry.
 */
export class PanelPrefs {
  constructor(registry: ISettingRegistry | null, pluginId: string) {
    followSettings(registry, pluginId, this._read)
      .then(settings => {
        this._settings = settings;
      })
      .catch(() => undefined);
  }

  /**
   * The current choices.
   */
  get prefs(): IPanelPrefs {
    return this._prefs;
  }

  /**
   * Emitted when a choice changes (in the panel or the settings editor).
   */
  get changed(): ISignal<this, IPanelPrefs> {
    return this._changed;
  }

  /**
   * Change a choice; it is saved as the user's setting when the registry is
   * there (the panel uses it at once either way).
   */
  set<K extends keyof IPanelPrefs>(name: K, value: IPanelPrefs[K]): void {
    this._prefs = { ...this._prefs, [name]: value };
    this._changed.emit(this._prefs);
    const key = Private.KEYS[name];
    void this._settings?.set(key, value).catch(() => undefined);
  }

  private readonly _read = (settings: ISettingRegistry.ISettings): void => {
    const model = settings.get('model').composite;
    const mode = settings.get('mode').composite;
    const share = settings.get('share_outputs').composite;
    this._prefs = {
      model: typeof model === 'string' && model ? model : null,
      mode:
        mode === 'auto' || mode === 'review' || mode === 'insert' ? mode : null,
      shareOutputs: typeof share === 'boolean' ? share : null
    };
    this._changed.emit(this._prefs);
  };

  private _settings: ISettingRegistry.ISettings | null = null;
  private _prefs: IPanelPrefs = { model: null, mode: null, shareOutputs: null };
  private readonly _changed = new Signal<this, IPanelPrefs>(this);
}

namespace Private {
  export const KEYS: Record<keyof IPanelPrefs, string> = {
    model: 'model',
    mode: 'mode',
    shareOutputs: 'share_outputs'
  };
}
