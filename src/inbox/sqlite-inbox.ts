import type { Statement } from 'better-sqlite3';
import { LoopError } from '../core/errors.js';
import type {
  DeliveryRecord,
  DeliveryStatus,
  Inbox,
  NewDelivery,
  PruneOptions,
  PruneReport,
  RouteAction,
} from '../core/ports/inbox.js';
import type { Db } from '../store/db.js';
import { FINISHED_STATUSES, isPrunable, retentionCutoff } from './retention.js';

interface Row {
  seq: number;
  id: string;
  source: 'github' | 'manual';
  event: string;
  action: string | null;
  received_at: string;
  status: DeliveryStatus;
  route: RouteAction | null;
  work_item: string | null;
  reason: string | null;
  attempts: number;
  turn_id: number | null;
  error: string | null;
  updated_at: string;
  pruned_at: string | null;
}

const COLUMNS =
  'seq, id, source, event, action, received_at, status, route, work_item, reason, attempts, turn_id, error, updated_at, pruned_at';
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
/** SQL list of the finished statuses, from the one constant the retention decision uses. */

const toRecord = (r: Row): DeliveryRecord => ({
  seq: r.seq,
  id: r.id,
  source: r.source,
  event: r.event,
  action: r.action,
  receivedAt: r.received_at,
  status: r.status,
  route: r.route,
  workItem: r.work_item,
  reason: r.reason,
  attempts: r.attempts,
  turnId: r.turn_id,
  error: r.error,
  updatedAt: r.updated_at,
  prunedAt: r.pruned_at,
});

/** The inbox on SQLite: the unique delivery id makes a redelivery a no-op, even when concurrent. */
export class SqliteInbox implements Inbox {
  private readonly insert;
  /** Statements compiled once each (the daemon runs them for every delivery). */
  private readonly stmts = new Map<string, Statement>();
  private q(sql: string): Statement {
    let statement = this.stmts.get(sql);
    if (!statement) {
      statement = this.db.prepare(sql);
      this.stmts.set(sql, statement);
    }
    return statement;
  }

  constructor(
    private readonly db: Db,
    private readonly options: { now?: () => Date; scrub?: (text: string) => string } = {},
  ) {
    this.insert = db.prepare(
      `INSERT INTO deliveries (id, source, event, action, received_at, body, status, route, work_item, reason, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
    );
  }

  private now(): string {
    return (this.options.now?.() ?? new Date()).toISOString();
  }

  batch<T>(fn: () => T): T {
    // IMMEDIATE: take the write lock up front, so a write after a read never fails with
    // SQLITE_BUSY_SNAPSHOT when another process (a CLI) committed in between; busy_timeout waits.
    return this.db.inTransaction ? fn() : this.db.transaction(fn).immediate();
  }

  accept(d: NewDelivery): 'accepted' | 'duplicate' {
    const at = this.now();
    const r = d.route;
    const status = r?.action === 'ignore' ? 'ignored' : r?.action === 'reject' ? 'rejected' : 'queued';
    const reason = r?.reason == null ? null : (this.options.scrub?.(r.reason) ?? r.reason);
    const info = this.insert.run(
      d.id,
      d.source,
      d.event,
      d.action,
      at,
      this.scrubBody(d.body),
      status,
      r?.action ?? null,
      r?.workItem ?? null,
      reason,
      at,
    );
    return info.changes === 1 ? 'accepted' : 'duplicate';
  }

  /**
   * A payload holding a secret (an agent that posted a key to GitHub gets it back in the webhook) is
   * stored with it masked in its string values, re-serialized so that it stays the JSON it was; one
   * without is stored byte for byte. (The signature was checked on the bytes as they came.)
   */
  private scrubBody(body: string): string {
    const scrub = this.options.scrub;
    if (!scrub || scrub(body) === body) return body;
    try {
      return JSON.stringify(
        JSON.parse(body, (_key, value) => (typeof value === 'string' ? scrub(value) : value)),
      );
    } catch {
      return scrub(body);
    }
  }

  get(id: string): DeliveryRecord | undefined {
    const row = this.q(`SELECT ${COLUMNS} FROM deliveries WHERE id = ?`).get(id) as Row | undefined;
    return row && toRecord(row);
  }

  body(id: string): string | undefined {
    const row = this.q('SELECT body, pruned_at FROM deliveries WHERE id = ?').get(id) as
      | { body: string; pruned_at: string | null }
      | undefined;
    // A pruned row holds '' (the column is NOT NULL): never hand that out as if it were the payload.
    return row && row.pruned_at === null ? row.body : undefined;
  }

  readBody(id: string): string {
    const body = this.body(id);
    if (body !== undefined) return body;
    const d = this.get(id);
    if (!d) throw new LoopError('usage', `no delivery ${id}`, { hint: 'See `the-loop events list`.' });
    throw new LoopError(
      'delivery-pruned',
      `the body of delivery ${id} was pruned at ${d.prunedAt} (inbox.retainDays); it cannot be routed or run again`,
      { hint: `\`the-loop events show ${id}\` still shows its metadata and outcome.` },
    );
  }

  list(filter: { status?: DeliveryStatus; workItem?: string; limit?: number } = {}): DeliveryRecord[] {
    const where: string[] = [];
    const args: unknown[] = [];
    if (filter.status) {
      where.push('status = ?');
      args.push(filter.status);
    }
    if (filter.workItem) {
      where.push('work_item = ?');
      args.push(filter.workItem);
    }
    const sql = `SELECT ${COLUMNS} FROM deliveries ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY seq DESC LIMIT ?`;
    return (this.q(sql).all(...args, filter.limit ?? 100) as Row[]).map(toRecord);
  }

  pending(): DeliveryRecord[] {
    return (
      this.q(
        `SELECT ${COLUMNS} FROM deliveries WHERE status IN ('queued', 'running') ORDER BY seq`,
      ).all() as Row[]
    ).map(toRecord);
  }

  setRoute(id: string, route: RouteAction, workItem: string | null, reason: string | null): void {
    const final = route === 'ignore' ? 'ignored' : route === 'reject' ? 'rejected' : null;
    const scrubbed = reason === null ? null : (this.options.scrub?.(reason) ?? reason);
    this.q(
      `UPDATE deliveries SET route = ?, work_item = ?, reason = ?, status = COALESCE(?, status), updated_at = ? WHERE id = ?`,
    ).run(route, workItem, scrubbed, final, this.now(), id);
  }

  noteHeld(id: string, reason: string | null): void {
    this.q(
      "UPDATE deliveries SET reason = ?, updated_at = ? WHERE id = ? AND status = 'queued' AND COALESCE(reason, '') IS NOT COALESCE(?, '')",
    ).run(reason, this.now(), id, reason);
  }

  markRunning(id: string): boolean {
    const info = this.q(
      "UPDATE deliveries SET status = 'running', attempts = attempts + 1, updated_at = ? WHERE id = ? AND status = 'queued'",
    ).run(this.now(), id);
    return info.changes === 1;
  }

  finish(
    id: string,
    result: { status: 'done' | 'failed'; turnId: number | null; error: string | null },
  ): void {
    const error = result.error === null ? null : (this.options.scrub?.(result.error) ?? result.error);
    this.q(
      'UPDATE deliveries SET status = ?, turn_id = COALESCE(?, turn_id), error = ?, updated_at = ? WHERE id = ?',
    ).run(result.status, result.turnId, error, this.now(), id);
  }

  retry(id: string): DeliveryRecord {
    const d = this.get(id);
    if (!d) throw new LoopError('usage', `no delivery ${id}`, { hint: 'See `the-loop events list`.' });
    if (d.status !== 'failed') {
      throw new LoopError('usage', `delivery ${id} is ${d.status}; only failed deliveries can be retried`);
    }
    // Guarded: retention (another process) may have pruned it since it was read.
    const info = this.q(
      "UPDATE deliveries SET status = 'queued', error = NULL, updated_at = ? WHERE id = ? AND status = 'failed' AND pruned_at IS NULL",
    ).run(this.now(), id);
    const after = this.get(id) as DeliveryRecord;
    if (info.changes === 0 && after.prunedAt !== null) {
      throw new LoopError(
        'delivery-pruned',
        `delivery ${id} cannot be retried: its body was pruned at ${after.prunedAt} (inbox.retainDays)`,
        { hint: 'Its payload is gone; trigger the work again on GitHub.' },
      );
    }
    if (info.changes === 0) {
      throw new LoopError(
        'usage',
        `delivery ${id} is ${after.status}; only failed deliveries can be retried`,
      );
    }
    return after;
  }

  requeue(id: string): void {
    this.q("UPDATE deliveries SET status = 'queued', updated_at = ? WHERE id = ? AND status = 'running'").run(
      this.now(),
      id,
    );
  }

  prune(options: PruneOptions): PruneReport {
    const dryRun = options.dryRun ?? false;
    const now = options.now ?? this.options.now?.() ?? new Date();
    const cutoff = retentionCutoff(now, options.retainDays);
    if (cutoff === undefined) return { cutoff: null, pruned: 0, bytes: 0, more: false, dryRun };
    // One batch is one write transaction: small enough that another process's commit (the daemon
    // accepting a webhook) waits well within its busy_timeout.
    const maxRows = dryRun ? Number.POSITIVE_INFINITY : (options.limit ?? 100);
    const maxBytes = dryRun ? Number.POSITIVE_INFINITY : (options.maxBytes ?? PRUNE_BATCH_BYTES);
    const pass = (): PruneReport => {
      // One more than a batch takes: whether more is left is known without reading every row.
      const rows = this.prunable(cutoff, Number.isFinite(maxRows) ? maxRows + 1 : -1);
      let done = 0;
      let pruned = 0;
      let bytes = 0;
      for (const seq of rows) {
        if (done >= maxRows || (done > 0 && bytes >= maxBytes)) break;
        done++;
        // octet_length reads the size from the record header, not the body's pages.
        const size = (
          this.q('SELECT octet_length(body) AS n FROM deliveries WHERE seq = ?').get(seq) as { n: number }
        ).n;
        // '' rather than NULL: the column is NOT NULL, and changing that would copy every body.
        // Guarded again in SQL: only a finished, unpruned row is ever changed.
        const changed = dryRun
          ? 1
          : this.q(
              `UPDATE deliveries SET body = '', pruned_at = ? WHERE seq = ? AND pruned_at IS NULL AND status IN (${FINISHED_SQL})`,
            ).run(now.toISOString(), seq).changes;
        pruned += changed;
        bytes += changed * size;
      }
      return { cutoff, pruned, bytes, more: rows.length > done, dryRun };
    };
    // A dry run only reads: no write lock for it.
    return dryRun ? pass() : this.batch(pass);
  }

  /**
   * Rows whose body may go, oldest first, at most `limit` (-1: all): the SQL narrows (by index, and
   * only as far as a batch needs — a pass never reads the whole history), the decision decides.
   */
  private prunable(cutoff: string, limit: number): number[] {
    // Served by the partial index of unpruned rows alone (it covers these columns): no row is read,
    // so no body either.
    const rows = this.q(PRUNABLE_SQL).all(cutoff, cutoff, limit) as Pick<
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
}
