/**
 * The PostgreSQL side of the store (main-store.ts), loaded only when `store.kind` is postgres.
 */
import { hostname } from 'node:os';
import type { StoreConfig } from './config/store-schema.js';
import { LoopError } from './core/errors.js';
import type { Fence } from './core/ports/hosts.js';
import { LeaseKeeper } from './hosts/keeper.js';
import type { InboxMasking, Stores } from './main-store.js';
import { copySqliteToPg } from './store/copy.js';
import { openDbReadOnly } from './store/db.js';
import { PgAbandon } from './store/postgres/abandon.js';
import { PgActStore } from './store/postgres/acts.js';
import { PgBudgets } from './store/postgres/budgets.js';
import { PgDriveAudit } from './store/postgres/drive-audit.js';
import { PgGithubStatus } from './store/postgres/github-status.js';
import { PgHostStore } from './store/postgres/hosts.js';
import { PgInbox } from './store/postgres/inbox.js';
import { PgLedgerStore } from './store/postgres/ledger.js';
import { latestVersion, openPg, schemaVersionPg } from './store/postgres/migrate.js';
import { type Pg, redactUrl } from './store/postgres/pg.js';
import { PgScanCursors } from './store/postgres/scan-files.js';
import { PgSessionFiles } from './store/postgres/session-files.js';
import { PgSessionStore } from './store/postgres/sessions.js';
import { PgTokenStore } from './store/postgres/tokens.js';
import { acceptsWithoutPassword } from './store/postgres/trust-probe.js';

type PgStoreConfig = Extract<StoreConfig, { kind: 'postgres' }>;

/** The settings of this host's lease keeper (the heartbeat: a fifth of the lease unless set). */
export function keeperSettings(store: PgStoreConfig, host: string) {
  return {
    host,
    leaseSeconds: store.leaseSeconds,
    heartbeatSeconds: store.heartbeatSeconds ?? Math.max(0.5, store.leaseSeconds / 5),
  };
}

/**
 * A daemon runs engines: it refuses a server that lets the store's user in without a password from
 * this host (trust-probe.ts), since an engine could then sign in too and rewrite the store.
 */
async function refuseTrusting(db: Pg): Promise<void> {
  const user = await acceptsWithoutPassword(db.url);
  if (user === null) return;
  await db.close();
  throw new LoopError(
    'config-invalid',
    `PostgreSQL at ${redactUrl(db.url)} lets ${user} sign in without a password from this host: an engine running here could sign in too and rewrite the store (its holds, the ledger, the acts)`,
    {
      hint: 'Require a password for this role from every host that runs engines: a scram-sha-256 (or md5) line for it in pg_hba.conf instead of trust, then `SELECT pg_reload_conf()`.',
    },
  );
}

export async function openPostgresStores(
  store: PgStoreConfig,
  scrub: (text: string) => string,
  options: { daemon?: boolean; migrate?: boolean; concurrency?: number } = {},
): Promise<Stores> {
  const host = store.host ?? hostname();
  const db = await openPg(store.url, {
    max: store.pool,
    applicationName: `the-loop ${host} ${process.pid}`,
    migrate: options.migrate === true,
  });
  if (options.daemon) await refuseTrusting(db);
  const ledger = new PgLedgerStore(db);
  const scanCursors = new PgScanCursors(db, { host });
  const hosts = new PgHostStore(db);
  // The daemon's writes for a work item are fenced by the epoch of the lease it holds on it.
  const keeper = options.daemon ? new LeaseKeeper(hosts, keeperSettings(store, host)) : undefined;
  const fence: { fence?: Fence } = keeper ? { fence: keeper } : {};
  const sessions = new PgSessionStore(db, { scrub, ...fence });
  const abandon = new PgAbandon(db, { onHostLoss: store.onHostLoss });
  const inbox = (masking: InboxMasking) => new PgInbox(db, { ...masking, ...fence });
  return {
    kind: 'postgres',
    recovery: 'leases',
    where: redactUrl(db.url),
    url: db.url,
    sessions,
    ledger,
    acts: new PgActStore(db, { scrub }),
    budgets: new PgBudgets(db),
    scanCursors,
    tokens: new PgTokenStore(db),
    drives: new PgDriveAudit(db, { scrub }),
    githubStatus: new PgGithubStatus(db, { scrub }),
    inbox,
    hosts,
    hostId: host,
    sessionFiles: new PgSessionFiles(db, host),
    ...(keeper ? { keeper } : {}),
    // A dead host's work item: its running turns interrupted (never re-run), in one transaction.
    interruptAbandoned: async (abandoned) => {
      await abandon.interruptAbandoned(abandoned);
    },
    reapAbandoned: (graceSeconds, onFailed) => abandon.reapAndSettle(graceSeconds, onFailed),
    settleStranded: (held) => abandon.settleStranded(held),
    watchStores: () => ({ ledger, cursors: scanCursors, close: () => {} }),
    schema: async () => ({ version: await schemaVersionPg(db), latest: latestVersion() }),
    copyFromSqlite: async (path, options) => {
      // Read-only: the file is not touched (an older one is refused, not upgraded in place).
      const sqlite = openDbReadOnly(path);
      try {
        return await copySqliteToPg(sqlite, db, { host, ...options });
      } finally {
        sqlite.close();
      }
    },
    close: () => db.close(),
  };
}
