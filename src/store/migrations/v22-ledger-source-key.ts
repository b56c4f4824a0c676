import type { Migration } from './index.js';

/**
 * The ledger's unique key as an index of its own, `usage_ledger_source (source_id, meter)`, instead
 * of the table's inline `UNIQUE (meter, source_id)`:
 * - source id first: every lookup compared the same 'transcript' before the (random) id that tells
 *   rows apart — a third of the key's comparisons (~25% of an imported row's insert);
 * - a named index can be dropped and made again, which an inline constraint cannot: a transcript
 *   import into an empty ledger writes its rows without it and builds it once at the end
 *   (store/sqlite/ledger-bulk.ts), in the same transaction.
 * `ON CONFLICT (meter, source_id)` still names it (SQLite matches the columns in any order).
 *
 * SQLite cannot drop a table's constraint: the table is made again (its documented rebuild), every
 * row copied with its id, the AUTOINCREMENT counter carried over (ids are never reused, also those of
 * rows deleted at the end: the rollup's mark counts on it), its indexes and the rollup's triggers
 * made again as they were (migrations 5, 8, 10, 19, 20). ~1 s per 200,000 rows, once.
 */
export const ledgerSourceKey: Migration = {
  version: 22,
  name: 'ledger-source-key',
  // Nothing references the ledger, but with foreign keys on, DROP TABLE first deletes every row.
  rebuildsTables: true,
  sql: `
CREATE TABLE usage_ledger_v22 (
  id                    INTEGER PRIMARY KEY AUTOINCREMENT,
  meter                 TEXT NOT NULL,
  source_id             TEXT NOT NULL,
  at                    TEXT NOT NULL,
  session_id            TEXT,
  work_item             TEXT,
  turn_id               INTEGER,
  engine                TEXT,
  runner                TEXT,
  model                 TEXT,
  input_tokens          INTEGER NOT NULL,
  output_tokens         INTEGER NOT NULL,
  cache_read_tokens     INTEGER NOT NULL,
  cache_creation_tokens INTEGER NOT NULL,
  reasoning_tokens      INTEGER NOT NULL,
  -- NULL: not priced (unknown model). Never 0 for unknown.
  cost_usd              REAL,
  cost_basis            TEXT CHECK (cost_basis IN ('engine-reported', 'list-price')),
  price_key             TEXT,
  payer_kind            TEXT NOT NULL CHECK (payer_kind IN ('api-key', 'subscription', 'cloud', 'unknown')),
  payer_id              TEXT,
  recorded_at           TEXT NOT NULL,
  partial               INTEGER NOT NULL DEFAULT 0,
  cache_creation_1h_tokens INTEGER NOT NULL DEFAULT 0
);
INSERT INTO usage_ledger_v22 (id, meter, source_id, at, session_id, work_item, turn_id, engine, runner, model,
  input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, reasoning_tokens, cost_usd, cost_basis,
  price_key, payer_kind, payer_id, recorded_at, partial, cache_creation_1h_tokens)
SELECT id, meter, source_id, at, session_id, work_item, turn_id, engine, runner, model,
  input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, reasoning_tokens, cost_usd, cost_basis,
  price_key, payer_kind, payer_id, recorded_at, partial, cache_creation_1h_tokens
FROM usage_ledger ORDER BY id;
-- The counter as it was (at least the largest id: rows deleted at the end keep their ids unused).
DELETE FROM sqlite_sequence WHERE name = 'usage_ledger_v22';
INSERT INTO sqlite_sequence (name, seq) SELECT 'usage_ledger_v22', seq FROM sqlite_sequence WHERE name = 'usage_ledger';
DROP TABLE usage_ledger;
ALTER TABLE usage_ledger_v22 RENAME TO usage_ledger;
CREATE UNIQUE INDEX usage_ledger_source ON usage_ledger (source_id, meter);
CREATE INDEX usage_ledger_at ON usage_ledger (at);
CREATE INDEX usage_ledger_session ON usage_ledger (session_id) WHERE session_id IS NOT NULL;
CREATE INDEX usage_ledger_work_item ON usage_ledger (work_item) WHERE work_item IS NOT NULL;
CREATE INDEX usage_ledger_turn ON usage_ledger (turn_id) WHERE turn_id IS NOT NULL;
CREATE INDEX usage_ledger_unpriced ON usage_ledger (model) WHERE cost_usd IS NULL;
-- The rollup's triggers (migration 20), dropped with the old table.
CREATE TRIGGER usage_hours_on_update AFTER UPDATE ON usage_ledger BEGIN
  INSERT INTO usage_hours_dirty (hour)
    SELECT h FROM (SELECT substr(OLD.at, 1, 13) AS h UNION SELECT substr(NEW.at, 1, 13))
    WHERE h NOT IN (SELECT hour FROM usage_hours_dirty);
END;
CREATE TRIGGER usage_hours_on_delete AFTER DELETE ON usage_ledger BEGIN
  INSERT INTO usage_hours_dirty (hour)
    SELECT substr(OLD.at, 1, 13) WHERE substr(OLD.at, 1, 13) NOT IN (SELECT hour FROM usage_hours_dirty);
END;
`,
};
