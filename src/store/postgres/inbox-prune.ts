import type { PruneOptions, PruneReport } from '../../core/ports/inbox.js';
import { FINISHED_STATUSES, isPrunable, retentionCutoff } from '../../inbox/retention.js';
import type { Row } from '../sqlite/inbox-rows.js';
import type { Queryable } from './pg.js';

/** SQL list of the finished statuses, from the one constant the retention decision uses. */
const FINISHED_SQL = FINISHED_STATUSES.map((s) => `'${s}'`).join(', ');

/**
 * The rows a prune batch may take, oldest first, in the order of the partial index of unpruned rows
 * (`deliveries_unpruned`), so a batch stops after `LIMIT` matches instead of reading the whole
 * history. `LIMIT NULL` is no limit (a dry run counts every prunable row).
 */
export const PRUNABLE_SQL = `SELECT seq, status, received_at, updated_at FROM deliveries
  WHERE pruned_at IS NULL AND received_at < $1 AND status IN (${FINISHED_SQL}) AND updated_at < $2
  ORDER BY received_at, seq LIMIT $3`;

/**
 * Empty bytes rather than NULL (the column is NOT NULL, as SQLite's). Guarded again in SQL: only a
 * finished, unpruned row is ever changed — another host pruning at once waits on the row's lock,
 * then finds it pruned and counts nothing (each body is counted by the one host that dropped it).
 */
const PRUNE_SQL = `UPDATE deliveries SET body = ''::bytea, plan = NULL, pruned_at = $1
  WHERE seq = $2 AND pruned_at IS NULL AND status IN (${FINISHED_SQL})`;

/** A prune transaction stops once the bodies it dropped reach this size. */
const PRUNE_BATCH_BYTES = 64 * 1024 * 1024;

/**
 * One prune batch of the inbox (the caller runs it in one transaction, or none for a dry run): the
 * bodies of finished deliveries older than the retention go, and their stored plans (which hold the
 * rendered prompt, outside text too); their rows stay. SQLite's `pruneBatch`, asynchronous.
 */
export async function pruneBatch(
  q: Queryable,
  options: PruneOptions & { now: Date; dryRun: boolean },
): Promise<PruneReport> {
  const { now, dryRun } = options;
  const cutoff = retentionCutoff(now, options.retainDays);
  if (cutoff === undefined) return { cutoff: null, pruned: 0, bytes: 0, more: false, dryRun };
  const maxRows = dryRun ? Number.POSITIVE_INFINITY : (options.limit ?? 100);
  const maxBytes = dryRun ? Number.POSITIVE_INFINITY : (options.maxBytes ?? PRUNE_BATCH_BYTES);
  // One more than a batch takes: whether more is left is known without reading every row.
  const rows = await prunable(q, cutoff, Number.isFinite(maxRows) ? maxRows + 1 : null);
  let done = 0;
  let pruned = 0;
  let bytes = 0;
  for (const seq of rows) {
    if (done >= maxRows || (done > 0 && bytes >= maxBytes)) break;
    done++;
    const size =
      (await q.row<{ n: number }>('SELECT octet_length(body) AS n FROM deliveries WHERE seq = $1', [seq]))
        ?.n ?? 0;
    const changed = dryRun ? 1 : await q.run(PRUNE_SQL, [now.toISOString(), seq]);
    pruned += changed;
    bytes += changed * size;
  }
  return { cutoff, pruned, bytes, more: rows.length > done, dryRun };
}

/**
 * Rows whose body may go, oldest first, at most `limit` (null: all): the SQL narrows (by index, and
 * only as far as a batch needs), the decision decides.
 */
async function prunable(q: Queryable, cutoff: string, limit: number | null): Promise<number[]> {
  const rows = await q.rows<Pick<Row, 'seq' | 'status' | 'received_at' | 'updated_at'>>(PRUNABLE_SQL, [
    cutoff,
    cutoff,
    limit,
  ]);
  return rows
    .filter((r) =>
      isPrunable(
        { status: r.status, receivedAt: r.received_at, updatedAt: r.updated_at, prunedAt: null },
        cutoff,
      ),
    )
    .map((r) => r.seq);
}
