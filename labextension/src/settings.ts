import { ISettingRegistry } from '@jupyterlab/settingregistry';

/**
 * Milliseconds between two writes of streamed code into a cell, by default.
 */
export const DEFAULT_STREAM_INTERVAL = 50;

/**
 * Load a plugin's settings from the registry and call `read` with them, at
 * once and whenever they change. Resolves with them (null without a
 * registry); rejects when they cannot be loaded.
 */
export async function followSettings(
  registry: ISettingRegistry | null,
  pluginId: string,
  read: (settings: ISettingRegistry.ISettings) => void
): Promise<ISettingRegistry.ISettings | null> {
  if (!registry) {
    return null;
  }
  const settings = await registry.load(pluginId);
  read(settings);
  settings.changed.connect(read);
  return settings;
}

/**
 * The user's jupyter-ci settings, read from the settings registry when it
 * has loaded them (defaults until then; activation never waits for it).
 */
export class UserSettings {
  constructor(registry: ISettingRegistry | null, pluginId: string) {
    followSettings(registry, pluginId, this._read).catch((error: unknown) => {
      console.warn('jupyter-ci: could not load its settings', error);
    });
  }

  /**
   * Milliseconds between two writes of streamed code into a cell.
   */
  get streamInterval(): number {
    return this._streamInterval;
  }

  /**
   * The run options the user set (sent as a request's `user_options`).
   */
  runOptions(): Record<string, unknown> {
    return { ...this._runOptions };
  }

  private readonly _read = (settings: ISettingRegistry.ISettings): void => {
    const interval = settings.get('streamInterval').composite;
    this._streamInterval =
      typeof interval === 'number' && interval >= 0
        ? interval
        : DEFAULT_STREAM_INTERVAL;
    const options: Record<string, unknown> = {};
    for (const name of Private.runOptions(settings.schema)) {
      const value = settings.get(name).composite;
      if (value !== null && value !== undefined) {
        options[name] = value;
      }
    }
    this._runOptions = options;
  };

  private _streamInterval = DEFAULT_STREAM_INTERVAL;
  private _runOptions: Record<string, unknown> = {};
}

namespace Private {
  /**
   * The settings that are the tab's own, not run options.
   */
  const TAB_SETTINGS = new Set(['streamInterval']);

  /**
   * The run options a user may set in JupyterLab's settings: every property
   * of the settings schema but the tab's own, named as the server's options
   * (a request's own options and the kernel's `%ci` settings come first, the
   * server's configuration after). tests/test_settings.py checks them against
   * the server's table of options (jupyter_ci/options.py).
   */
  export function runOptions(schema: ISettingRegistry.ISchema): string[] {
    return Object.keys(schema.properties ?? {}).filter(
      name => !TAB_SETTINGS.has(name)
    );
  }
}
