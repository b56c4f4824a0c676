import { existsSync, readFileSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { LoopError } from '../core/errors.js';
import type { LoadOptions } from './load-types.js';

export const DEFAULT_CONFIG_PATH = '.the-loop/config.yaml';
/** A config file is a few KB; anything this large is a mistake (or an attack on the parser). */
export const MAX_CONFIG_BYTES = 1024 * 1024;

/** The config file a load reads: its absolute path, and its text (null: none, defaults apply). */
export interface ConfigFile {
  path: string;
  /** The path when the file exists, else null. */
  found: string | null;
  text: string | null;
}

/**
 * `--config`, else THE_LOOP_CONFIG, else `.the-loop/config.yaml` under cwd — read. A file named
 * explicitly must exist; the default one may be missing (the defaults apply).
 */
export function readConfigText(options: LoadOptions): ConfigFile {
  const explicit = options.configPath ?? options.env.THE_LOOP_CONFIG;
  const path = resolve(options.cwd, explicit ?? DEFAULT_CONFIG_PATH);
  if (!existsSync(path)) {
    if (explicit) {
      throw new LoopError('config-missing', `config file not found: ${path}`, {
        hint: 'Create one with `the-loop config init`, or fix --config / THE_LOOP_CONFIG.',
      });
    }
    return { path, found: null, text: null };
  }
  const size = statSync(path).size;
  if (size > MAX_CONFIG_BYTES) {
    throw new LoopError(
      'config-invalid',
      `${path}: ${size} bytes is too large for a config file (max ${MAX_CONFIG_BYTES})`,
    );
  }
  return { path, found: path, text: readFileSync(path, 'utf8') };
}
