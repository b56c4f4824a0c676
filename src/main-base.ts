import { join } from 'node:path';
import type { ActStore } from './acts/audit.js';
import { prepareDataDir } from './config/data-dir.js';
import { loadConfigCached } from './config/load-cache.js';
import type { LoadedConfig } from './config/load-types.js';
import type { Inbox } from './core/ports/inbox.js';
import { scrubberFor } from './guard/scrubber.js';
import { Ledger } from './ledger/ledger.js';
import { pricesFromConfig, priceTable } from './ledger/pricing.js';
import { createLogger, fileSink, type Logger, type SecretScrubber } from './log/logger.js';
import { type Db, openDb } from './store/db.js';
import { SqliteActStore } from './store/sqlite/acts.js';
import { SqliteBudgets } from './store/sqlite/budgets.js';
import { SqliteDriveAudit } from './store/sqlite/drive-audit.js';
import { SqliteInbox } from './store/sqlite/inbox.js';
import { SqliteLedgerStore } from './store/sqlite/ledger.js';
import { SqliteScanCursors } from './store/sqlite/scan-files.js';
import { SqliteSessionStore } from './store/sqlite/sessions.js';
import { SqliteTokenStore } from './store/sqlite/tokens.js';

/**
 * What every command opens: the config, the log (scrubbed), the registry database and its stores
 * (sessions, ledger, acts, budgets, scan cursors, tokens) — and nothing of the runners, the
 * dispatcher or the server, so the commands that only read or fill the ledger (`usage`, `usage
 * scan`, `acts`) start without loading them. `createApp` builds on it (part of the composition root,
 * beside main.ts).
 */
export interface Base {
  loaded: LoadedConfig;
  logger: Logger;
  scrubber: SecretScrubber;
  db: Db;
  /** The registry's sessions and turns (createApp wraps it: an ended session's tokens are revoked). */
  sessions: SqliteSessionStore;
  ledger: Ledger;
  acts: ActStore;
  budgets: SqliteBudgets;
  scanCursors: SqliteScanCursors;
  /** The gateway's capability tokens (hashes). */
  tokenStore: SqliteTokenStore;
  /** The terminal connector's audit (`the-loop mcp`): every call, its payload as a digest. */
  drives: SqliteDriveAudit;
  dispose(): void;
}

export interface AppOptions {
  cwd: string;
  env: Readonly<Record<string, string | undefined>>;
  configPath?: string | undefined;
  dataDir?: string | undefined;
}

export const registryPath = (dataDir: string) => join(dataDir, 'the-loop.db');

/** The inbox over the base's database: for the commands that read it without the whole app. */
export const openInbox = (base: Base): Inbox => new SqliteInbox(base.db, { scrub: base.scrubber.scrub });

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
  const db = openDb(registryPath(loaded.dataDir));
  const ledger = new Ledger(new SqliteLedgerStore(db), priceTable(pricesFromConfig(loaded.config.pricing)));
  return {
    loaded,
    logger,
    scrubber,
    db,
    sessions: new SqliteSessionStore(db, { scrub: scrubber.scrub }),
    ledger,
    acts: new SqliteActStore(db, { scrub: scrubber.scrub }),
    budgets: new SqliteBudgets(db),
    scanCursors: new SqliteScanCursors(db),
    tokenStore: new SqliteTokenStore(db),
    drives: new SqliteDriveAudit(db, { scrub: scrubber.scrub }),
    dispose: () => {
      if (db.open) db.close();
      logSink.close?.();
    },
  };
}
