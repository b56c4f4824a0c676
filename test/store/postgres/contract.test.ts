/**
 * The port contract suites (test/store/contract/) against the PostgreSQL store: each test gets a
 * database of its own in the run's private cluster (test/helpers/global-postgres.ts), a copy of a
 * migrated template; a second pool on it is another host, and closing every pool then opening the
 * same database again is a restart.
 */
import { afterAll } from 'vitest';
import { PgActStore } from '../../../src/store/postgres/acts.js';
import { PgBudgets } from '../../../src/store/postgres/budgets.js';
import { PgDriveAudit } from '../../../src/store/postgres/drive-audit.js';
import { PgGithubStatus } from '../../../src/store/postgres/github-status.js';
import { PgInbox } from '../../../src/store/postgres/inbox.js';
import { PgLedgerStore } from '../../../src/store/postgres/ledger.js';
import { openPg } from '../../../src/store/postgres/migrate.js';
import type { Pg } from '../../../src/store/postgres/pg.js';
import { PgScanCursors } from '../../../src/store/postgres/scan-files.js';
import { PgSessionStore } from '../../../src/store/postgres/sessions.js';
import { PgTokenStore } from '../../../src/store/postgres/tokens.js';
import { freshDatabase } from '../../helpers/postgres.js';
import { actsContract } from '../contract/acts.contract.js';
import { budgetsContract } from '../contract/budgets.contract.js';
import { cursorsContract } from '../contract/cursors.contract.js';
import { drivesContract } from '../contract/drives.contract.js';
import type { Ports, StoreFactory, StoreHandle, StoreOptions } from '../contract/factory.js';
import { githubStatusContract } from '../contract/github-status.contract.js';
import { inboxContract } from '../contract/inbox.contract.js';
import { ledgerContract } from '../contract/ledger.contract.js';
import { sessionsContract } from '../contract/sessions.contract.js';
import { tokensContract } from '../contract/tokens.contract.js';

/** Every PostgreSQL store over one pool, as the composition root builds them. */
function portsOver(db: Pg, { scrub, now }: StoreOptions): Ports {
  return {
    sessions: new PgSessionStore(db, { scrub }),
    inbox: new PgInbox(db, { scrub }),
    ledger: new PgLedgerStore(db),
    acts: new PgActStore(db, { scrub }),
    budgets: new PgBudgets(db),
    tokens: new PgTokenStore(db),
    cursors: new PgScanCursors(db),
    drives: new PgDriveAudit(db, { scrub }),
    githubStatus: new PgGithubStatus(db, { scrub, now }),
  };
}

/** Every table's rows as JSON text, byte columns as PostgreSQL's escape format (ASCII as it is). */
async function dump(db: Pg): Promise<string> {
  const columns = await db.rows<{ table_name: string; column_name: string; data_type: string }>(
    `SELECT table_name, column_name, data_type FROM information_schema.columns
      WHERE table_schema = 'public' ORDER BY table_name, ordinal_position`,
  );
  const tables = new Map<string, string[]>();
  for (const c of columns) {
    const expr =
      c.data_type === 'bytea' ? `encode("${c.column_name}", 'escape')` : `"${c.column_name}"::text`;
    tables.set(c.table_name, [...(tables.get(c.table_name) ?? []), expr]);
  }
  const parts: string[] = [];
  for (const [table, exprs] of tables) {
    const rows = await db.rows<{ r: string }>(
      `SELECT concat_ws(' ', ${exprs.join(', ')}) AS r FROM "${table}"`,
    );
    parts.push(...rows.map((row) => row.r));
  }
  return parts.join('\n');
}

const drops: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const drop of drops.splice(0)) await drop();
});

async function pgHandle(url: string, drop: () => Promise<void>, options: StoreOptions): Promise<StoreHandle> {
  const pools = [await openPg(url, { max: 4 })];
  const closeAll = async () => {
    for (const db of pools.splice(0)) await db.close();
  };
  return {
    ...portsOver(pools[0] as Pg, options),
    second: async () => {
      const db = await openPg(url, { max: 4 });
      pools.push(db);
      return portsOver(db, options);
    },
    reopen: async () => {
      await closeAll();
      return pgHandle(url, drop, options);
    },
    dispose: async () => {
      await closeAll();
      await drop();
    },
    contents: async () => dump(pools[0] as Pg),
  };
}

const postgres: StoreFactory = {
  name: 'PostgreSQL',
  open: async (options) => {
    const database = await freshDatabase();
    drops.push(database.drop);
    return pgHandle(database.url, database.drop, options);
  },
};

sessionsContract(postgres);
inboxContract(postgres);
ledgerContract(postgres);
actsContract(postgres);
budgetsContract(postgres);
tokensContract(postgres);
cursorsContract(postgres);
drivesContract(postgres);
githubStatusContract(postgres);
