import { mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { Ledger } from './ledger/ledger.js';
import { pricesFromConfig, priceTable } from './ledger/pricing.js';
import { transcriptDirCandidates } from './ledger/scan-jobs.js';
import { TranscriptWatcher, type WatchStatus } from './ledger/watch.js';
import { watchRoots } from './ledger/watch-plan.js';
import type { AppOptions, Base } from './main-base.js';

/**
 * The daemon's transcript watcher, wired (part of the composition root): the trees it watches from
 * the config (`usage.watch`, `usage.watchClaude`) and the environment, and a database connection of
 * its own — its import sets the connection's pragmas for the length of a write (synchronous NORMAL,
 * a small cache), which must never apply to the daemon's other writes.
 */
export interface UsageWatch {
  /** Start watching (nothing to watch: nothing opened). Says what is watched and what is missing. */
  start(): UsageWatchStatus;
  stop(): Promise<void>;
}

/** What the watcher watches, and the `usage.watch` entries it cannot (e.g. `~/x` without HOME). */
export type UsageWatchStatus = WatchStatus & { errors: string[] };

export function createUsageWatch(base: Base, options: Pick<AppOptions, 'cwd' | 'env'>): UsageWatch {
  let watcher: TranscriptWatcher | undefined;
  let own: ReturnType<Base['stores']['watchStores']> | undefined;
  return {
    start() {
      const { loaded, logger } = base;
      const { usage } = loaded.config;
      const homeEngines = Object.entries(loaded.engines)
        .filter(([, preset]) => preset.interactive?.transcript === 'claude-jsonl' && preset.sandbox.home)
        .map(([name]) => name);
      const { roots, errors } = watchRoots({
        watch: usage.watch,
        configDir: loaded.path ? dirname(loaded.path) : resolve(options.cwd, '.the-loop'),
        home: options.env.HOME,
        watchClaude: usage.watchClaude,
        claudeDirs: transcriptDirCandidates(options.env),
        dataDir: loaded.dataDir,
        homeEngines,
      });
      for (const error of errors) logger.warn('usage.watch: not watched', { error });
      if (roots.length === 0) return { watching: [], missing: [], dirs: 0, errors };
      // The sessions' homes are made on their first turn: watched from before, so none is missed.
      if (roots.some((r) => r.origin === 'sessions'))
        mkdirSync(join(loaded.dataDir, 'homes'), { recursive: true, mode: 0o700 });
      own = base.stores.watchStores();
      const ledger = new Ledger(own.ledger, priceTable(pricesFromConfig(loaded.config.pricing)));
      watcher = new TranscriptWatcher(
        {
          ledger,
          cursors: own.cursors,
          sessions: base.sessions,
          logger: logger.child({ part: 'usage-watch' }),
        },
        roots,
        { recheckMs: usage.recheckSeconds * 1000 },
      );
      return { ...watcher.start(), errors };
    },
    async stop() {
      await watcher?.stop();
      watcher = undefined;
      own?.close();
      own = undefined;
    },
  };
}
