import type { Migration } from './index.js';

const NOW = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')";

/**
 * One identity per work item. GitHub compares owner and repository names without regard to case,
 * and slugs were not injective (`octo/a-b` and `octo/a_b` read the same): work items are now held in
 * lower case in every table, and a slug belongs to one work item.
 *
 * Sessions keep their slugs: the tmux sessions, worktrees and state directories named after them
 * are still found. Two active sessions that the old rules let share an identity cannot both stay
 * active: the oldest does, the others are closed, saying why (their next delivery starts a session
 * of their own). Nothing is deleted.
 */
export const workItemIdentity: Migration = {
  version: 12,
  name: 'work-item-identity',
  sql: `
-- One work item in two letter cases (the old routing kept them apart): the oldest session stays.
UPDATE sessions SET status = 'closed', closed_at = ${NOW}, updated_at = ${NOW},
  close_reason = 'closed when work items became case-insensitive: session ' || (
    SELECT o.id FROM sessions o WHERE o.status = 'active' AND lower(o.work_item) = lower(sessions.work_item)
      ORDER BY o.created_at, o.rowid LIMIT 1
  ) || ' of the same work item stays active'
WHERE status = 'active' AND EXISTS (
  SELECT 1 FROM sessions o WHERE o.status = 'active' AND lower(o.work_item) = lower(sessions.work_item)
    AND (o.created_at < sessions.created_at OR (o.created_at = sessions.created_at AND o.rowid < sessions.rowid))
);
-- Two work items on one slug (one worktree, tmux session and state directory): the oldest stays.
UPDATE sessions SET status = 'closed', closed_at = ${NOW}, updated_at = ${NOW},
  close_reason = 'closed when slugs became one per work item: it shared ' || slug || ' with ' || (
    SELECT o.work_item || ' (session ' || o.id || ')' FROM sessions o
      WHERE o.status = 'active' AND o.slug = sessions.slug AND lower(o.work_item) <> lower(sessions.work_item)
      ORDER BY o.created_at, o.rowid LIMIT 1
  ) || ', which stays active'
WHERE status = 'active' AND EXISTS (
  SELECT 1 FROM sessions o WHERE o.status = 'active' AND o.slug = sessions.slug
    AND lower(o.work_item) <> lower(sessions.work_item)
    AND (o.created_at < sessions.created_at OR (o.created_at = sessions.created_at AND o.rowid < sessions.rowid))
);
-- A session that is not active holds no capability token.
UPDATE gateway_tokens SET revoked_at = ${NOW}
WHERE revoked_at IS NULL AND session_id IN (SELECT id FROM sessions WHERE status <> 'active');
-- Every work item in its canonical case (work items are ASCII: lower() is exact).
UPDATE sessions SET work_item = lower(work_item) WHERE work_item <> lower(work_item);
UPDATE deliveries SET work_item = lower(work_item) WHERE work_item <> lower(work_item);
UPDATE usage_ledger SET work_item = lower(work_item) WHERE work_item <> lower(work_item);
UPDATE unmetered_drives SET work_item = lower(work_item) WHERE work_item <> lower(work_item);
UPDATE acts SET work_item = lower(work_item) WHERE work_item <> lower(work_item);
-- A new session's slug is checked against every session holding it.
CREATE INDEX sessions_slug ON sessions (slug);
`,
};
