import type { ActStore } from './acts/audit.js';
import { prepareDataDir } from './config/data-dir.js';
import { loadConfigCached } from './config/load-cache.js';
import type { LoadedConfig } from './config/load-types.js';
import type { BudgetStore } from './core/ports/budgets.js';
import type { DriveAuditStore } from './core/ports/drives.js';
import type { Inbox } from './core/ports/inbox.js';
import type { ScanCursorStore } from './core/ports/ledger.js';
import type { TokenStore } from './core/ports/tokens.js';
import { scrubberFor } from './guard/scrubber.js';
import { Ledger } from './ledger/ledger.js';
import { pricesFromConfig, priceTable } from './ledger/pricing.js';
import { createLogger, fileSink, type Logger, type SecretScrubber } from './log/logger.js';
import { openStores, type RegistryStore, type Stores } from './main-store.js';

/**
 * What every command opens: the config, the log (scrubbed), the store (SQLite or PostgreSQL) and its ports
 * (sessions, ledger, acts, budgets, scan cursors, tokens) — and nothing of the runners, the
 * dispatcher or the server, so the commands that only read or fill the ledger (`usage`, `usage
 * scan`, `acts`) start without loading them. `createApp` builds on it (part of the composition root,
 * beside main.ts).
 */
export interface Base {
  loaded: LoadedConfig;
  logger: Logger;
  scrubber: SecretScrubber;
  /** The store the ports below are over (main-store.ts). */
  stores: Stores;
  /** The registry's sessions and turns (createApp wraps it: an ended session's tokens are revoked). */
  sessions: RegistryStore;
  ledger: Ledger;
  acts: ActStore;
  budgets: BudgetStore;
  scanCursors: ScanCursorStore;
  /** The gateway's capability tokens (hashes). */
  tokenStore: TokenStore;
  /** The terminal connector's audit (`the-loop mcp`): every call, its payload as a digest. */
  drives: DriveAuditStore;
  /** Release the store and the log (the store's connections close in the background). */
  dispose(): void;
}

export interface AppOptions {
  cwd: string;
  env: Readonly<Record<string, string | undefined>>;
  configPath?: string | undefined;
  dataDir?: string | undefined;
  /** Migrate a PostgreSQL store to this version (the daemon, `store migrate`); SQLite always is. */
  migrateStore?: boolean | undefined;
  /**
   * The daemon (`serve`): on PostgreSQL its session store and inbox are fenced by this host's lease
   * keeper. Other commands write unfenced, as on SQLite.
   */
  daemon?: boolean | undefined;
}

export { registryPath } from './main-store.js';

/** The inbox over the base's store: for the commands that read it without the whole app. */
export const openInbox = (base: Base): Inbox => base.stores.inbox({ scrub: base.scrubber.scrub });

export async function openBase(options: AppOptions): Promise<Base> {
  // Through the validated-config cache: a command on an unchanged config loads no schema.
  const loaded = await loadConfigCached(options);
  // Created (0700) before anything is written in it; inside a work tree, git-ignored first.
  prepareDataDir(loaded.dataDir, loaded.dataDirWorkTree, loaded.dataDirOrigin);
  const scrubber = scrubberFor(loaded, options.env);
  const logSink = fileSink(loaded.logFile);
  const logger = createLogger({
    level: loaded.config.log.level,
    sinks: [logSink],
    scrub: scrubber.scrub,
    fields: { pid: process.pid },
  });
  let stores: Stores;
  try {
    stores = await openStores(loaded, scrubber.scrub, {
      migrate: options.migrateStore,
      daemon: options.daemon,
    });
  } catch (error) {
    logSink.close?.();
    throw error;
  }
  const ledger = new Ledger(stores.ledger, priceTable(pricesFromConfig(loaded.config.pricing)));
  return {
    loaded,
    logger,
    scrubber,
    stores,
    sessions: stores.sessions,
    ledger,
    acts: stores.acts,
    budgets: stores.budgets,
    scanCursors: stores.scanCursors,
    tokenStore: stores.tokens,
    drives: stores.drives,
    dispose: () => {
      stores.close().catch((error: unknown) => logger.warn('store: close failed', { error: String(error) }));
      logSink.close?.();
    },
  };
}
