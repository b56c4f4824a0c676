/**
 * Wake-ups across hosts (issue 17): a write that makes work runnable (a delivery accepted into a
 * work item's line, retried, put back) sends `NOTIFY the_loop_inbox, '<work item>'` in its own
 * transaction: PostgreSQL delivers it to every `LISTEN`ing connection when the transaction commits,
 * never if it rolls back. One payload per work item per transaction (PostgreSQL folds duplicates).
 * A listener still polls slowly as a backstop (a notification is lost while it is disconnected).
 */
import type { Queryable } from './pg.js';

/** The channel the inbox notifies on; the payload is the work item whose line has work. */
export const INBOX_CHANNEL = 'the_loop_inbox';

/** Notify each work item once, delivered when the caller's transaction commits. */
export async function notifyInbox(q: Queryable, workItems: readonly (string | null)[]): Promise<void> {
  const items = [...new Set(workItems.filter((w): w is string => w !== null))];
  if (items.length === 0) return;
  await q.rows(`SELECT pg_notify($1::text, w) FROM unnest($2::text[]) AS w`, [INBOX_CHANNEL, items]);
}
