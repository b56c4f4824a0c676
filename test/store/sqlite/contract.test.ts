/**
 * The port contract suites (test/store/contract/) against the SQLite store: a registry file in a
 * temporary directory, the stores built over it the way the composition root builds them (base.ts,
 * and main.ts for the inbox), a second connection to the same file for another process, the file
 * reopened for a restart.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { type Db, openDb } from '../../../src/store/db.js';
import { SqliteActStore } from '../../../src/store/sqlite/acts.js';
import { SqliteBudgets } from '../../../src/store/sqlite/budgets.js';
import { SqliteInbox } from '../../../src/store/sqlite/inbox.js';
import { SqliteLedgerStore } from '../../../src/store/sqlite/ledger.js';
import { SqliteScanCursors } from '../../../src/store/sqlite/scan-files.js';
import { SqliteSessionStore } from '../../../src/store/sqlite/sessions.js';
import { SqliteTokenStore } from '../../../src/store/sqlite/tokens.js';
import { actsContract } from '../contract/acts.contract.js';
import { budgetsContract } from '../contract/budgets.contract.js';
import { cursorsContract } from '../contract/cursors.contract.js';
import type { Ports, StoreFactory, StoreHandle, StoreOptions } from '../contract/factory.js';
import { inboxContract } from '../contract/inbox.contract.js';
import { ledgerContract } from '../contract/ledger.contract.js';
import { sessionsContract } from '../contract/sessions.contract.js';
import { tokensContract } from '../contract/tokens.contract.js';

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** Every SQLite store over one connection, as base.ts (and main.ts, the inbox) construct them. */
function portsOver(db: Db, { scrub }: StoreOptions): Ports {
  return {
    sessions: new SqliteSessionStore(db, { scrub }),
    inbox: new SqliteInbox(db, { scrub }),
    ledger: new SqliteLedgerStore(db),
    acts: new SqliteActStore(db, { scrub }),
    budgets: new SqliteBudgets(db),
    tokens: new SqliteTokenStore(db),
    cursors: new SqliteScanCursors(db),
  };
}

function sqliteHandle(dir: string, options: StoreOptions): StoreHandle {
  const path = join(dir, 'the-loop.db');
  const connections = [openDb(path)];
  const closeAll = () => {
    for (const db of connections.splice(0)) if (db.open) db.close();
  };
  return {
    ...portsOver(connections[0] as Db, options),
    second: async () => {
      const db = openDb(path);
      connections.push(db);
      return portsOver(db, options);
    },
    reopen: async () => {
      closeAll();
      return sqliteHandle(dir, options);
    },
    dispose: async () => {
      closeAll();
      rmSync(dir, { recursive: true, force: true });
    },
    // The database file and its write-ahead log: every byte the registry holds.
    contents: async () => {
      const files = [path, `${path}-wal`, `${path}-shm`].filter((f) => existsSync(f));
      return Buffer.concat(files.map((f) => readFileSync(f))).toString('latin1');
    },
  };
}

const sqlite: StoreFactory = {
  name: 'SQLite',
  open: async (options) => {
    const dir = mkdtempSync(join(tmpdir(), 'the-loop-contract-'));
    dirs.push(dir);
    return sqliteHandle(dir, options);
  },
};

sessionsContract(sqlite);
inboxContract(sqlite);
ledgerContract(sqlite);
actsContract(sqlite);
budgetsContract(sqlite);
tokensContract(sqlite);
cursorsContract(sqlite);
