import { dirname, isAbsolute, resolve } from 'node:path';
import { resolveDataDir } from './data-dir.js';
import type { LoadedConfig, LoadOptions } from './load-types.js';
import type { Config } from './schema.js';

/**
 * The data dir and the log file; the config's relative paths made absolute (relative to the file).
 * Run at every load, cached or not: it reads the file system and the environment (THE_LOOP_DATA_DIR),
 * and it mutates `config` (so it runs after a validated config was cached).
 */
export function placePaths(
  options: LoadOptions,
  found: string | null,
  config: Config,
): Pick<LoadedConfig, 'dataDir' | 'dataDirWorkTree' | 'dataDirOrigin' | 'warnings' | 'logFile'> {
  const baseDir = found ? dirname(found) : resolve(options.cwd, '.the-loop');
  const dataDirOpt = options.dataDir ?? options.env.THE_LOOP_DATA_DIR;
  const place = resolveDataDir({
    explicit: dataDirOpt
      ? resolve(options.cwd, dataDirOpt)
      : config.dataDir
        ? resolve(baseDir, config.dataDir)
        : undefined,
    configDir: baseDir,
    env: options.env,
  });
  const logFile = config.log.file
    ? isAbsolute(config.log.file)
      ? config.log.file
      : resolve(baseDir, config.log.file)
    : resolve(place.dataDir, 'the-loop.log');
  if (config.defaults.cwd) config.defaults.cwd = resolve(baseDir, config.defaults.cwd);
  for (const repo of Object.values(config.repos)) repo.path = resolve(baseDir, repo.path);
  return {
    dataDir: place.dataDir,
    dataDirWorkTree: place.workTree,
    dataDirOrigin: place.origin,
    warnings: place.warnings,
    logFile,
  };
}
