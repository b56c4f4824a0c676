import type { Statement } from 'better-sqlite3';
import { LoopError } from '../../core/errors.js';
import type {
  AcceptOutcome,
  ArrivingDelivery,
  Claim,
  ClaimWrites,
  DeliveryFilter,
  DeliveryRecord,
  Inbox,
  NewDelivery,
  PruneOptions,
  PruneReport,
  RoutedDelivery,
  RoutedTurn,
} from '../../core/ports/inbox.js';
import type { Db } from '../db.js';
import { pruneBatch } from './inbox-prune.js';
import {
  bodyText,
  COLUMNS,
  type Masking,
  parsePlan,
  planOf,
  type Row,
  scrubJson,
  statusOf,
  storedBody,
  toRecord,
} from './inbox-rows.js';

export { PRUNABLE_SQL } from './inbox-prune.js';

/**
 * A claim is won only while its delivery is queued and first in its work item's line: no other
 * delivery of the work item is running, and none queued before it (a retry between a dispatch pass's
 * read and its write puts one back there). Served by the pending index (`+work_item` keeps the
 * planner off the index of a work item's whole history).
 */
const CLAIM_SQL = `UPDATE deliveries SET status = 'running', attempts = attempts + 1, updated_at = ?
  WHERE id = ? AND status = 'queued' AND NOT EXISTS (
    SELECT 1 FROM deliveries e WHERE e.status IN ('queued', 'running') AND +e.work_item = deliveries.work_item
      AND e.seq <> deliveries.seq AND (e.status = 'running' OR e.seq < deliveries.seq))`;

/**
 * The inbox on SQLite, the only place with its SQL. The unique delivery id makes a redelivery a
 * no-op, even when concurrent. better-sqlite3 is synchronous: each method does its work at once and
 * returns a settled promise (the port is asynchronous for stores that are not).
 */
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
    private readonly options: Masking & { now?: () => Date } = {},
  ) {
    this.insert = db.prepare(
      `INSERT INTO deliveries (id, source, event, action, received_at, body, status, route, work_item, reason, plan, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
    );
  }

  private now(): string {
    return (this.options.now?.() ?? new Date()).toISOString();
  }

  /**
   * One write transaction. IMMEDIATE: the write lock is taken up front, so a write after a read never
   * fails with SQLITE_BUSY_SNAPSHOT when another process (a CLI) committed in between; busy_timeout waits.
   */
  private tx<T>(fn: () => T): T {
    return this.db.inTransaction ? fn() : this.db.transaction(fn).immediate();
  }

  private scrub(text: string): string {
    return this.options.scrub?.(text) ?? text;
  }

  async acceptMany(deliveries: readonly NewDelivery[]): Promise<AcceptOutcome[]> {
    // One clock reading for the transaction: its deliveries are received (committed) together.
    const at = this.now();
    return this.tx(() => deliveries.map((d) => this.insertOne(d, at)));
  }

  async accept(delivery: NewDelivery): Promise<AcceptOutcome> {
    return this.insertOne(delivery, this.now());
  }

  private insertOne(d: NewDelivery, at: string): AcceptOutcome {
    const r = this.routedColumns(d.routed);
    const info = this.insert.run(
      d.id,
      d.source,
      d.event,
      d.action,
      at,
      storedBody(d.body, d.bodyText, this.options),
      r.status ?? 'queued',
      d.routed.action,
      r.workItem,
      r.reason,
      r.plan,
      at,
    );
    return info.changes === 1 ? 'accepted' : 'duplicate';
  }

  /** A routed result as the row holds it: the plan (outside text) scrubbed like the body. */
  private routedColumns(routed: RoutedDelivery) {
    const plan = planOf(routed);
    return {
      status: statusOf(routed.action),
      workItem: routed.workItem ?? null,
      reason: 'reason' in routed ? this.scrub(routed.reason) : null,
      plan: plan === null ? null : scrubJson(plan, this.options.scrub),
    };
  }

  async acceptArriving(
    deliveries: readonly ArrivingDelivery[],
  ): Promise<Array<RoutedDelivery | 'duplicate'>> {
    const at = this.now();
    // Looked up inside the write transaction: no read transaction of its own (its locks cost more
    // than the lookup), and no commit between the lookup and the insert.
    const known = this.q('SELECT 1 FROM deliveries WHERE id = ?').pluck();
    return this.tx(() =>
      deliveries.map((d) => {
        if (known.get(d.id) !== undefined) return 'duplicate';
        const routed = d.route();
        const stored = this.insertOne({ ...d, routed }, at) === 'accepted';
        return stored ? routed : 'duplicate';
      }),
    );
  }

  async get(id: string): Promise<DeliveryRecord | undefined> {
    return this.read(id);
  }

  private read(id: string): DeliveryRecord | undefined {
    const row = this.q(`SELECT ${COLUMNS} FROM deliveries WHERE id = ?`).get(id) as Row | undefined;
    return row && toRecord(row);
  }

  async body(id: string): Promise<string | undefined> {
    return this.readBodyOf(id);
  }

  private readBodyOf(id: string): string | undefined {
    const row = this.q('SELECT body, pruned_at FROM deliveries WHERE id = ?').get(id) as
      | { body: string | Buffer; pruned_at: string | null }
      | undefined;
    // A pruned row holds '' (the column is NOT NULL): never hand that out as if it were the payload.
    return row && row.pruned_at === null ? bodyText(row.body) : undefined;
  }

  async readBody(id: string): Promise<string> {
    const body = this.readBodyOf(id);
    if (body !== undefined) return body;
    const d = this.read(id);
    if (!d) throw new LoopError('usage', `no delivery ${id}`, { hint: 'See `the-loop events list`.' });
    throw new LoopError(
      'delivery-pruned',
      `the body of delivery ${id} was pruned at ${d.prunedAt} (inbox.retainDays); it cannot be routed or run again`,
      { hint: `\`the-loop events show ${id}\` still shows its metadata and outcome.` },
    );
  }

  async plan(id: string): Promise<RoutedTurn | undefined> {
    const row = this.q('SELECT route, work_item, plan FROM deliveries WHERE id = ?').get(id) as
      | (Pick<Row, 'route' | 'work_item'> & { plan: string | null })
      | undefined;
    if (!row || row.plan === null || row.work_item === null) return undefined;
    if (row.route !== 'start' && row.route !== 'deliver') return undefined;
    return parsePlan(row.route, row.work_item, row.plan);
  }

  async list(filter: DeliveryFilter = {}): Promise<DeliveryRecord[]> {
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

  async pending(): Promise<DeliveryRecord[]> {
    return (
      this.q(
        `SELECT ${COLUMNS} FROM deliveries WHERE status IN ('queued', 'running') ORDER BY seq`,
      ).all() as Row[]
    ).map(toRecord);
  }

  async setRoute(id: string, routed: RoutedDelivery): Promise<void> {
    const r = this.routedColumns(routed);
    this.q(
      'UPDATE deliveries SET route = ?, work_item = ?, reason = ?, plan = ?, status = COALESCE(?, status), updated_at = ? WHERE id = ?',
    ).run(routed.action, r.workItem, r.reason, r.plan, r.status, this.now(), id);
  }

  async applyClaims(writes: ClaimWrites): Promise<Claim[]> {
    return this.tx(() => {
      const at = this.now();
      for (const h of writes.held) {
        const reason = h.reason === null ? null : this.scrub(h.reason);
        this.q(
          "UPDATE deliveries SET held_reason = ?, updated_at = ? WHERE id = ? AND status = 'queued' AND held_reason IS NOT ?",
        ).run(reason, at, h.deliveryId, reason);
      }
      for (const i of writes.ignored) {
        this.q(
          "UPDATE deliveries SET route = 'ignore', reason = ?, held_reason = NULL, status = 'ignored', updated_at = ? WHERE id = ? AND status = 'queued'",
        ).run(this.scrub(i.reason), at, i.deliveryId);
      }
      return writes.claims.filter((c) => this.q(CLAIM_SQL).run(at, c.deliveryId).changes === 1);
    });
  }

  async finish(
    id: string,
    result: { status: 'done' | 'failed'; turnId: number | null; error: string | null },
  ): Promise<void> {
    const error = result.error === null ? null : this.scrub(result.error);
    this.q(
      'UPDATE deliveries SET status = ?, turn_id = COALESCE(?, turn_id), error = ?, updated_at = ? WHERE id = ?',
    ).run(result.status, result.turnId, error, this.now(), id);
  }

  async retry(id: string): Promise<DeliveryRecord> {
    const d = this.read(id);
    if (!d) throw new LoopError('usage', `no delivery ${id}`, { hint: 'See `the-loop events list`.' });
    if (d.status !== 'failed') {
      throw new LoopError('usage', `delivery ${id} is ${d.status}; only failed deliveries can be retried`);
    }
    // Guarded: retention (another process) may have pruned it since it was read.
    const info = this.q(
      "UPDATE deliveries SET status = 'queued', error = NULL, updated_at = ? WHERE id = ? AND status = 'failed' AND pruned_at IS NULL",
    ).run(this.now(), id);
    const after = this.read(id) as DeliveryRecord;
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

  async requeue(id: string): Promise<void> {
    this.q("UPDATE deliveries SET status = 'queued', updated_at = ? WHERE id = ? AND status = 'running'").run(
      this.now(),
      id,
    );
  }

  async prune(options: PruneOptions): Promise<PruneReport> {
    const dryRun = options.dryRun ?? false;
    const now = options.now ?? this.options.now?.() ?? new Date();
    const pass = () => pruneBatch((sql) => this.q(sql), { ...options, now, dryRun });
    // A dry run only reads: no write lock for it.
    return dryRun ? pass() : this.tx(pass);
  }
}
