/**
 * Wake-ups across hosts (issue 17): a write that makes work runnable (a delivery accepted into a
 * work item's line, retried, put back) sends a `NOTIFY the_loop_inbox` in its own transaction:
 * PostgreSQL delivers it to every `LISTEN`ing connection when the transaction commits, never if it
 * rolls back. A listener still polls slowly as a backstop (a notification is lost while it is
 * disconnected).
 *
 * The payload is a hint only, of a fixed size: the sha256 of the work item (64 hex characters; not md5, which a FIPS-mode server refuses), one
 * per work item per transaction (PostgreSQL folds duplicates). Never the work item itself: a payload
 * is limited to 8000 bytes, and a longer work item (a hostile or odd payload routed to one) would
 * fail the arrival's transaction, so the webhook would be refused and redelivered forever. A listener
 * wakes on the channel and reads the inbox; it needs nothing from the payload.
 */
import type { Queryable } from './pg.js';

/** The channel the inbox notifies on; the payload is the sha256 of the work item whose line has work. */
export const INBOX_CHANNEL = 'the_loop_inbox';

/** Notify each work item once (its sha256), delivered when the caller's transaction commits. */
export async function notifyInbox(q: Queryable, workItems: readonly (string | null)[]): Promise<void> {
  const items = [...new Set(workItems.filter((w): w is string => w !== null))];
  if (items.length === 0) return;
  await q.rows(
    `SELECT pg_notify($1::text, encode(sha256(convert_to(w, 'UTF8')), 'hex')) FROM unnest($2::text[]) AS w`,
    [INBOX_CHANNEL, items],
  );
}
