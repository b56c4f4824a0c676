import type { Statement } from 'better-sqlite3';
import type { PruneOptions, PruneReport } from '../../core/ports/inbox.js';
import { FINISHED_STATUSES, isPrunable, retentionCutoff } from '../../inbox/retention.js';
import type { Row } from './inbox-rows.js';

/** SQL list of the finished statuses, from the one constant the retention decision uses. */
const FINISHED_SQL = FINISHED_STATUSES.map((s) => `'${s}'`).join(', ');

/**
 * The rows a prune batch may take, oldest first, served by the partial index of unpruned rows alone
 * (covering: no row and no body is read) and in its order (no sort), so a batch stops after `LIMIT`
 * matches instead of reading the whole history. `+status` keeps the planner off the status index,
 * whose plan sorts every finished row for each batch (quadratic over a long history).
 */
export const PRUNABLE_SQL = `SELECT seq, status, received_at, updated_at FROM deliveries
  WHERE pruned_at IS NULL AND received_at < ? AND +status IN (${FINISHED_SQL}) AND updated_at < ?
  ORDER BY received_at, seq LIMIT ?`;

/** A prune transaction stops once the bodies it dropped reach this size. */
const PRUNE_BATCH_BYTES = 64 * 1024 * 1024;

/**
 * One prune batch of the inbox (the caller runs it in one write transaction, or none for a dry run):
 * the bodies of finished deliveries older than the retention go, and their stored plans (which hold
 * the rendered prompt, outside text too); their rows stay.
 */
export function pruneBatch(
  q: (sql: string) => Statement,
  options: PruneOptions & { now: Date; dryRun: boolean },
): PruneReport {
  const { now, dryRun } = options;
  const cutoff = retentionCutoff(now, options.retainDays);
  if (cutoff === undefined) return { cutoff: null, pruned: 0, bytes: 0, more: false, dryRun };
  // One batch is one write transaction: small enough that another process's commit (the daemon
  // accepting a webhook) waits well within its busy_timeout.
  const maxRows = dryRun ? Number.POSITIVE_INFINITY : (options.limit ?? 100);
  const maxBytes = dryRun ? Number.POSITIVE_INFINITY : (options.maxBytes ?? PRUNE_BATCH_BYTES);
  // One more than a batch takes: whether more is left is known without reading every row.
  const rows = prunable(q, cutoff, Number.isFinite(maxRows) ? maxRows + 1 : -1);
  let done = 0;
  let pruned = 0;
  let bytes = 0;
  for (const seq of rows) {
    if (done >= maxRows || (done > 0 && bytes >= maxBytes)) break;
    done++;
    // octet_length reads the size from the record header, not the body's pages.
    const size = (q('SELECT octet_length(body) AS n FROM deliveries WHERE seq = ?').get(seq) as { n: number })
      .n;
    // '' rather than NULL: the column is NOT NULL, and changing that would copy every body.
    // Guarded again in SQL: only a finished, unpruned row is ever changed.
    const changed = dryRun
      ? 1
      : q(
          `UPDATE deliveries SET body = '', plan = NULL, pruned_at = ? WHERE seq = ? AND pruned_at IS NULL AND status IN (${FINISHED_SQL})`,
        ).run(now.toISOString(), seq).changes;
    pruned += changed;
    bytes += changed * size;
  }
  return { cutoff, pruned, bytes, more: rows.length > done, dryRun };
}

/**
 * Rows whose body may go, oldest first, at most `limit` (-1: all): the SQL narrows (by index, and
 * only as far as a batch needs — a pass never reads the whole history), the decision decides.
 */
function prunable(q: (sql: string) => Statement, cutoff: string, limit: number): number[] {
  // Served by the partial index of unpruned rows alone (it covers these columns): no row is read,
  // so no body either.
  const rows = q(PRUNABLE_SQL).all(cutoff, cutoff, limit) as Pick<
    Row,
    'seq' | 'status' | 'received_at' | 'updated_at'
  >[];
  return rows
    .filter((r) =>
      isPrunable(
        { status: r.status, receivedAt: r.received_at, updatedAt: r.updated_at, prunedAt: null },
        cutoff,
      ),
    )
    .map((r) => r.seq);
}
