/**
 * The PostgreSQL side of the store (main-store.ts), loaded only when `store.kind` is postgres.
 */
import { hostname } from 'node:os';
import type { StoreConfig } from './config/store-schema.js';
import type { Stores } from './main-store.js';
import { copySqliteToPg } from './store/copy.js';
import { openDbReadOnly } from './store/db.js';
import { PgActStore } from './store/postgres/acts.js';
import { PgBudgets } from './store/postgres/budgets.js';
import { PgDriveAudit } from './store/postgres/drive-audit.js';
import { PgInbox } from './store/postgres/inbox.js';
import { PgLedgerStore } from './store/postgres/ledger.js';
import { latestVersion, openPg, schemaVersionPg } from './store/postgres/migrate.js';
import { redactUrl } from './store/postgres/pg.js';
import { PgScanCursors } from './store/postgres/scan-files.js';
import { PgSessionStore } from './store/postgres/sessions.js';
import { PgTokenStore } from './store/postgres/tokens.js';

export async function openPostgresStores(
  store: Extract<StoreConfig, { kind: 'postgres' }>,
  scrub: (text: string) => string,
  migrate: boolean,
): Promise<Stores> {
  const host = store.host ?? hostname();
  const db = await openPg(store.url, {
    max: store.pool,
    applicationName: `the-loop ${host} ${process.pid}`,
    migrate,
  });
  const ledger = new PgLedgerStore(db);
  const scanCursors = new PgScanCursors(db, { host });
  return {
    kind: 'postgres',
    where: redactUrl(db.url),
    sessions: new PgSessionStore(db, { scrub }),
    ledger,
    acts: new PgActStore(db, { scrub }),
    budgets: new PgBudgets(db),
    scanCursors,
    tokens: new PgTokenStore(db),
    drives: new PgDriveAudit(db, { scrub }),
    inbox: (masking) => new PgInbox(db, masking),
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
