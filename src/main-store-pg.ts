/**
 * The PostgreSQL side of the store (main-store.ts), loaded only when `store.kind` is postgres.
 */
import { hostname } from 'node:os';
import type { StoreConfig } from './config/store-schema.js';
import type { Abandoned, Fence } from './core/ports/hosts.js';
import { LeaseKeeper } from './hosts/keeper.js';
import type { Stores } from './main-store.js';
import { copySqliteToPg } from './store/copy.js';
import { openDb } from './store/db.js';
import { PgActStore } from './store/postgres/acts.js';
import { PgBudgets } from './store/postgres/budgets.js';
import { PgDriveAudit } from './store/postgres/drive-audit.js';
import { PgHostStore } from './store/postgres/hosts.js';
import { PgInbox } from './store/postgres/inbox.js';
import { PgLedgerStore } from './store/postgres/ledger.js';
import { latestVersion, openPg, schemaVersionPg } from './store/postgres/migrate.js';
import { redactUrl } from './store/postgres/pg.js';
import { PgScanCursors } from './store/postgres/scan-files.js';
import { PgSessionStore } from './store/postgres/sessions.js';
import { PgTokenStore } from './store/postgres/tokens.js';

type PgStoreConfig = Extract<StoreConfig, { kind: 'postgres' }>;

/** The settings of this host's lease keeper (the heartbeat: a fifth of the lease unless set). */
export function keeperSettings(store: PgStoreConfig, host: string) {
  return {
    host,
    leaseSeconds: store.leaseSeconds,
    heartbeatSeconds: store.heartbeatSeconds ?? Math.max(0.5, store.leaseSeconds / 5),
  };
}

/** What a dead host left on a work item, settled by whichever store offers it. */
type Interrupting = { interruptAbandoned?(abandoned: Abandoned): Promise<unknown> };

export async function openPostgresStores(
  store: PgStoreConfig,
  scrub: (text: string) => string,
  options: { daemon?: boolean; concurrency?: number } = {},
): Promise<Stores> {
  const host = store.host ?? hostname();
  const db = await openPg(store.url, { max: store.pool, applicationName: `the-loop ${host} ${process.pid}` });
  const ledger = new PgLedgerStore(db);
  const scanCursors = new PgScanCursors(db, { host });
  const hosts = new PgHostStore(db);
  // The daemon's writes for a work item are fenced by the epoch of the lease it holds on it.
  const keeper = options.daemon ? new LeaseKeeper(hosts, keeperSettings(store, host)) : undefined;
  const fence: { fence?: Fence } = keeper ? { fence: keeper } : {};
  const sessions = new PgSessionStore(db, { scrub, ...fence } as ConstructorParameters<
    typeof PgSessionStore
  >[1]);
  const inbox = (masking: { scrub: (text: string) => string }) =>
    new PgInbox(db, { ...masking, ...fence } as ConstructorParameters<typeof PgInbox>[1]);
  return {
    kind: 'postgres',
    where: redactUrl(db.url),
    url: db.url,
    sessions,
    ledger,
    acts: new PgActStore(db, { scrub }),
    budgets: new PgBudgets(db),
    scanCursors,
    tokens: new PgTokenStore(db),
    drives: new PgDriveAudit(db, { scrub }),
    inbox,
    hosts,
    ...(keeper ? { keeper } : {}),
    interruptAbandoned: async (abandoned) => {
      const own = [sessions as Interrupting, inbox({ scrub }) as Interrupting].find(
        (s) => s.interruptAbandoned,
      );
      if (!own?.interruptAbandoned) throw new Error('this store cannot settle an abandoned work item yet');
      await own.interruptAbandoned(abandoned);
    },
    watchStores: () => ({ ledger, cursors: scanCursors, close: () => {} }),
    schema: async () => ({ version: await schemaVersionPg(db), latest: latestVersion() }),
    copyFromSqlite: async (path, options) => {
      // Opening migrates an older registry to this version first (the copy needs the same columns).
      const sqlite = openDb(path);
      try {
        return await copySqliteToPg(sqlite, db, { host, ...options });
      } finally {
        sqlite.close();
      }
    },
    close: () => db.close(),
  };
}
