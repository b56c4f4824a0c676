import type { Migration } from './index.js';

/**
 * Retention (`inbox.retainDays`): the body of a finished delivery is dropped after a while, its row
 * (id, event, route, work item, outcome, turn) kept. `body` stays NOT NULL — making it nullable
 * would rebuild a table of bodies up to 25 MB each — so a pruned row holds '' and says when it was
 * pruned. The partial index serves the prune pass without reading a row, so no body either.
 */
export const inboxRetention: Migration = {
  version: 13,
  name: 'inbox-retention',
  sql: `
ALTER TABLE deliveries ADD COLUMN pruned_at TEXT;
-- In arrival order (received_at, seq), so a batch reads no more entries than it takes; pruned_at is
-- in the columns (always NULL there) so that the index covers the query alone.
CREATE INDEX deliveries_unpruned ON deliveries (received_at, seq, status, updated_at, pruned_at) WHERE pruned_at IS NULL;
`,
};
