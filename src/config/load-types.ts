import type { EnginePreset } from '../engines/preset.js';
import type { Config } from './schema.js';

export interface LoadedConfig {
  /** The file read, or null when none exists and defaults are used. */
  path: string | null;
  config: Config;
  /** Absolute data directory. */
  dataDir: string;
  /** The git work tree the data dir is in (null: none, as it should be). */
  dataDirWorkTree: string | null;
  /** In the state home: the config directory the data dir belongs to (see `prepareDataDir`). */
  dataDirOrigin: string | null;
  /** Said on stderr by the commands that open the data dir (e.g. it is inside a work tree). */
  warnings: string[];
  /** Key paths of secrets written into the config file itself rather than as env:NAME. */
  literalSecrets: string[];
  logFile: string;
  /** Every engine, built-in presets merged with config, validated. */
  engines: Record<string, EnginePreset>;
  /** Values read through `env:NAME`: treated as secrets everywhere. */
  secretValues: string[];
}

export interface LoadOptions {
  cwd: string;
  env: Readonly<Record<string, string | undefined>>;
  /** `--config`; else THE_LOOP_CONFIG; else `.the-loop/config.yaml` under cwd. */
  configPath?: string | undefined;
  /**
   * `--data-dir`; else THE_LOOP_DATA_DIR; else config `dataDir`; else a registry already beside the
   * config file; else the config file's directory — or, when that is inside a git work tree,
   * `$XDG_STATE_HOME/the-loop/<name>-<digest>` (see data-dir.ts).
   */
  dataDir?: string | undefined;
}
