import type { Migration } from './index.js';

/**
 * The active sessions, newest first: `sessions list` (and every listing of the active sessions)
 * reads them in this order. Without it each listing sorted them in a temporary B-tree, then
 * grouped their turns in another and sorted the groups again (~20M instructions for 1,000 active
 * sessions; with it the rows come out of the index in order and no temporary B-tree is made).
 * Partial: a closed session has no entry.
 */
export const activeSessionsByAge: Migration = {
  version: 21,
  name: 'active-sessions-by-age',
  sql: `
CREATE INDEX sessions_active_created ON sessions (created_at) WHERE status = 'active';
`,
};
