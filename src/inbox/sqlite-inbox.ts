import type { Statement } from 'better-sqlite3';
import { LoopError } from '../core/errors.js';
import type { Db } from '../store/db.js';
import type { DeliveryRecord, DeliveryStatus, Inbox, NewDelivery, RouteAction } from './types.js';

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
}

const COLUMNS =
  'seq, id, source, event, action, received_at, status, route, work_item, reason, attempts, turn_id, error, updated_at';

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
      d.body,
      status,
      r?.action ?? null,
      r?.workItem ?? null,
      reason,
      at,
    );
    return info.changes === 1 ? 'accepted' : 'duplicate';
  }

  get(id: string): DeliveryRecord | undefined {
    const row = this.q(`SELECT ${COLUMNS} FROM deliveries WHERE id = ?`).get(id) as Row | undefined;
    return row && toRecord(row);
  }

  body(id: string): string | undefined {
    return (this.q('SELECT body FROM deliveries WHERE id = ?').get(id) as { body: string } | undefined)?.body;
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
    this.q("UPDATE deliveries SET status = 'queued', error = NULL, updated_at = ? WHERE id = ?").run(
      this.now(),
      id,
    );
    return this.get(id) as DeliveryRecord;
  }

  requeue(id: string): void {
    this.q("UPDATE deliveries SET status = 'queued', updated_at = ? WHERE id = ? AND status = 'running'").run(
      this.now(),
      id,
    );
  }
}
