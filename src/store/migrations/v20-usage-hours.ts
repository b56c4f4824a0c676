import { rebuildAllHours } from '../sqlite/ledger-hours.js';
import type { Migration } from './index.js';

/**
 * The ledger's hourly rollup (store/sqlite/ledger-hours.ts): `usage` sums it for the whole hours of
 * its window instead of every ledger row (a week of 23,000 rows cost ~50 ms a report). Keyed as the
 * report groups but by work item and session (which keep reading the ledger); NOT NULL keys ('' for
 * no cost basis, -1 for no turn), so a key is one row. Filled from the rows already in the ledger
 * (in JS: the dollars are carried with their rounding errors, see ledger-hours.ts), in the
 * migration's transaction: ~0.5 s per 100,000 rows, once. A ledger written meanwhile by an older
 * the-loop (a daemon started before the upgrade) stays right: its changes mark their hours (triggers),
 * its new rows lie past the mark, and the report reads both from the ledger.
 */
export const usageHours: Migration = {
  version: 20,
  name: 'usage-hours',
  sql: `
CREATE TABLE usage_hours (
  hour           TEXT NOT NULL,
  engine         TEXT NOT NULL,
  model          TEXT NOT NULL,
  payer          TEXT NOT NULL,
  basis          TEXT NOT NULL,
  turn_id        INTEGER NOT NULL,
  row_count      INTEGER NOT NULL,
  input          INTEGER NOT NULL,
  output         INTEGER NOT NULL,
  cache_read     INTEGER NOT NULL,
  cache_creation INTEGER NOT NULL,
  reasoning      INTEGER NOT NULL,
  priced         INTEGER NOT NULL,
  cost           REAL NOT NULL,
  cost_err       REAL NOT NULL,
  PRIMARY KEY (hour, engine, model, payer, basis, turn_id)
) WITHOUT ROWID;

-- Hours whose rows changed since the rollup was written: whoever changes or deletes a ledger row
-- marks its hour (an older the-loop too, which knows nothing of the rollup); the report reads these
-- hours from the ledger, the next write of the rollup computes them again.
CREATE TABLE usage_hours_dirty (hour TEXT PRIMARY KEY) WITHOUT ROWID;
-- (NOT IN, not OR IGNORE: a trigger's conflict clause yields to the statement's, an upsert's too.)
CREATE TRIGGER usage_hours_on_update AFTER UPDATE ON usage_ledger BEGIN
  INSERT INTO usage_hours_dirty (hour)
    SELECT h FROM (SELECT substr(OLD.at, 1, 13) AS h UNION SELECT substr(NEW.at, 1, 13))
    WHERE h NOT IN (SELECT hour FROM usage_hours_dirty);
END;
CREATE TRIGGER usage_hours_on_delete AFTER DELETE ON usage_ledger BEGIN
  INSERT INTO usage_hours_dirty (hour)
    SELECT substr(OLD.at, 1, 13) WHERE substr(OLD.at, 1, 13) NOT IN (SELECT hour FROM usage_hours_dirty);
END;
-- The last ledger row the rollup holds: rows after it were inserted by a writer that does not
-- write the rollup (inserts have no trigger: one would make every insert of an import ~3x slower).
CREATE TABLE usage_hours_mark (one INTEGER PRIMARY KEY CHECK (one = 1), last_id INTEGER NOT NULL);
INSERT INTO usage_hours_mark (one, last_id) VALUES (1, 0);
`,
  fill: rebuildAllHours,
};
