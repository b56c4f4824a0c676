import { join } from 'node:path';
import { type LoadedConfig, loadConfig } from './config/load.js';
import { createLogger, fileSink, type Logger, SecretScrubber } from './log/logger.js';
import { ProcessRunner } from './runners/process/process-runner.js';
import type { Runner } from './runners/runner.js';
import { SqliteSessionStore } from './sessions/registry.js';
import { TurnService } from './sessions/turn-service.js';
import type { SessionStore } from './sessions/types.js';
import { type Db, openDb } from './store/db.js';

/**
 * Composition root: the only place concrete adapters (SQLite, the process runner, the log file)
 * are wired to the core. Everything it creates is released by `dispose()`.
 */
export interface App {
  loaded: LoadedConfig;
  logger: Logger;
  scrubber: SecretScrubber;
  db: Db;
  store: SessionStore;
  runners: Record<string, Runner>;
  turns: TurnService;
  dispose(): void;
}

export interface AppOptions {
  cwd: string;
  env: Readonly<Record<string, string | undefined>>;
  configPath?: string | undefined;
  dataDir?: string | undefined;
}

export const registryPath = (dataDir: string) => join(dataDir, 'the-loop.db');

const pidAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
};

export function createApp(options: AppOptions): App {
  const loaded = loadConfig(options);
  const scrubber = new SecretScrubber();
  for (const value of loaded.secretValues) scrubber.add(value);
  const logger = createLogger({
    level: loaded.config.log.level,
    sinks: [fileSink(loaded.logFile)],
    scrub: scrubber.scrub,
    fields: { pid: process.pid },
  });
  const db = openDb(registryPath(loaded.dataDir));
  const store = new SqliteSessionStore(db, { scrub: scrubber.scrub });
  const lost = store.recoverLostTurns(pidAlive);
  if (lost > 0) logger.warn('marked turns of dead processes as lost', { count: lost });
  const runners: Record<string, Runner> = { process: new ProcessRunner() };
  const { defaults, limits } = loaded.config;
  const turns = new TurnService({
    store,
    runners,
    engines: loaded.engines,
    defaults: {
      engine: defaults.engine,
      runner: defaults.runner,
      cwd: defaults.cwd ?? options.cwd,
      backstopMs: defaults.backstopSeconds * 1000,
      killGraceMs: defaults.killGraceSeconds * 1000,
      maxLineBytes: limits.maxLineBytes,
    },
    env: options.env,
    addSecret: (value) => scrubber.add(value),
    scrub: scrubber.scrub,
    logger,
  });
  return {
    loaded,
    logger,
    scrubber,
    db,
    store,
    runners,
    turns,
    dispose: () => {
      if (db.open) db.close();
    },
  };
}
