import type { Migration } from './index.js';

/**
 * The ledger's unpriced rows, by model: rows recorded while the price data did not know their model
 * are looked for at every daemon start and every `usage scan` (to price them once it does), and
 * without this index each look read the whole ledger (~40-130 ms on 200,000 rows). Partial: only
 * unpriced rows have an entry, so a priced row costs nothing more to insert.
 */
export const unpricedIndex: Migration = {
  version: 19,
  name: 'unpriced-index',
  sql: `
CREATE INDEX usage_ledger_unpriced ON usage_ledger (model) WHERE cost_usd IS NULL;
`,
};
