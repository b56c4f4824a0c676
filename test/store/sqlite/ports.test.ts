/**
 * The port contract suites (test/store/contracts/) against the SQLite store: a registry file in a
 * temporary directory, reopened for a restart, a second connection for another process.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { openDb } from '../../../src/store/db.js';
import { SqliteActStore } from '../../../src/store/sqlite/acts.js';
import { SqliteBudgets } from '../../../src/store/sqlite/budgets.js';
import { SqliteLedgerStore } from '../../../src/store/sqlite/ledger.js';
import { SqliteScanCursors } from '../../../src/store/sqlite/scan-files.js';
import { SqliteSessionStore } from '../../../src/store/sqlite/sessions.js';
import { SqliteTokenStore } from '../../../src/store/sqlite/tokens.js';
import { actsContract } from '../contracts/acts.contract.js';
import { budgetsContract, cursorsContract, tokensContract } from '../contracts/budgets-tokens.contract.js';
import { ledgerContract } from '../contracts/ledger.contract.js';
import type { OpenWorld, PortWorld } from '../contracts/world.js';

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function sqliteWorld(path: string, scrub: (text: string) => string): PortWorld {
  const db = openDb(path);
  const others: PortWorld[] = [];
  return {
    sessions: new SqliteSessionStore(db, { scrub }),
    ledger: new SqliteLedgerStore(db),
    acts: new SqliteActStore(db, { scrub }),
    budgets: new SqliteBudgets(db),
    tokens: new SqliteTokenStore(db),
    cursors: new SqliteScanCursors(db),
    reopen: async () => {
      db.close();
      return sqliteWorld(path, scrub);
    },
    another: async () => {
      const other = sqliteWorld(path, scrub);
      others.push(other);
      return other;
    },
    close: async () => {
      for (const other of others) await other.close();
      if (db.open) db.close();
    },
  };
}

const open: OpenWorld = async ({ scrub }) => {
  const dir = mkdtempSync(join(tmpdir(), 'the-loop-ports-'));
  dirs.push(dir);
  return sqliteWorld(join(dir, 'the-loop.db'), scrub);
};

ledgerContract(open);
actsContract(open);
budgetsContract(open);
tokensContract(open);
cursorsContract(open);
