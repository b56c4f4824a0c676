import { LoopError } from '../../core/errors.js';
import type { Fence } from '../../core/ports/hosts.js';
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
import { bodyText, COLUMNS, type Masking, parsePlan, type Row, toRecord } from '../sqlite/inbox-rows.js';
import { insertDelivery, lockAndFindStored, lockIds, pgText, routedColumns } from './inbox-accept.js';
import { applyClaimWrites, lockLines } from './inbox-claims.js';
import { notifyInbox } from './inbox-notify.js';
import { pruneBatch } from './inbox-prune.js';
import type { Pg, Queryable } from './pg.js';
import { fenceHolds, fenceValues, noteRefused } from './session-fence.js';

export { INBOX_CHANNEL } from './inbox-notify.js';

/** A stored delivery that waits in its work item's line: its work item is notified (inbox-notify.ts). */
const runnable = (d: NewDelivery): string | null =>
  d.routed.action === 'start' || d.routed.action === 'deliver' || d.routed.action === 'close'
    ? (d.routed.workItem ?? null)
    : null;

/**
 * A settling write of a running delivery by a fenced host ($3 not null): only while it is still
 * running and the host holds its work item's ($4) lease at the epoch ($5). Without a fence, as on
 * one host.
 */
const FENCED_SETTLE = `($3::text IS NULL OR (status = 'running' AND work_item = $4::text AND ${fenceHolds('$4', '$3', '$5')}))`;

/**
 * The inbox on PostgreSQL (the `deliveries` table: its only reader and writer), for several hosts
 * sharing one database. The body is BYTEA (bytes as they came, or a text body's UTF-8), the plan
 * JSON text, both scrubbed exactly as SQLite's inbox does (its pure row helpers are shared).
 *
 * Across hosts: arrivals are stored and routed once per id (inbox-accept.ts), claims serialized per
 * work item (inbox-claims.ts); every other write is one guarded UPDATE (the row's lock, then its
 * WHERE checked again on the row as committed), so two hosts at once each change a row only when
 * it is still in the state the write expects.
 *
 * With a `fence` (several hosts), a claim is taken, and a running delivery finished or put back,
 * only while this host holds the work item's lease at its epoch: a host whose lease was taken
 * cannot settle a delivery its new owner runs. Writes that make work runnable (accepting into a
 * line, retry, requeue) notify the work item on `INBOX_CHANNEL` when they commit.
 */
export class PgInbox implements Inbox {
  constructor(
    private readonly db: Pg,
    private readonly options: Masking & { now?: () => Date; fence?: Fence | undefined } = {},
  ) {}

  private now(): string {
    return (this.options.now?.() ?? new Date()).toISOString();
  }

  private scrub = (text: string): string => this.options.scrub?.(text) ?? text;

  async acceptMany(deliveries: readonly NewDelivery[]): Promise<AcceptOutcome[]> {
    if (deliveries.length === 0) return [];
    // One clock reading for the transaction: its deliveries are received (committed) together.
    const at = this.now();
    return this.db.tx(async (q) => {
      await lockIds(
        q,
        deliveries.map((d) => d.id),
      );
      await lockLines(
        q,
        deliveries.map((d) => pgText(d.routed.workItem ?? null)),
      );
      const outcomes: AcceptOutcome[] = [];
      const wake: Array<string | null> = [];
      for (const d of deliveries) {
        const stored = await insertDelivery(q, d, at, this.options);
        outcomes.push(stored ? 'accepted' : 'duplicate');
        if (stored) wake.push(runnable(d));
      }
      await notifyInbox(q, wake);
      return outcomes;
    });
  }

  async accept(delivery: NewDelivery): Promise<AcceptOutcome> {
    return (await this.acceptMany([delivery]))[0] as AcceptOutcome;
  }

  async acceptArriving(
    deliveries: readonly ArrivingDelivery[],
  ): Promise<Array<RoutedDelivery | 'duplicate'>> {
    if (deliveries.length === 0) return [];
    const at = this.now();
    // Each route asked once even when the transaction is run again (after a deadlock).
    const routes = new Map<number, RoutedDelivery>();
    const routeOf = (d: ArrivingDelivery, i: number): RoutedDelivery => {
      let routed = routes.get(i);
      if (routed === undefined) {
        routed = d.route();
        routes.set(i, routed);
      }
      return routed;
    };
    return this.db.tx(async (q) => {
      const known = await lockAndFindStored(
        q,
        deliveries.map((d) => d.id),
      );
      // Routed first (the new ones only), then their lines locked, then inserted in batch order.
      const fresh = new Map<number, RoutedDelivery>();
      for (const [i, d] of deliveries.entries()) {
        // Stored before, or earlier in this batch: not routed (again).
        if (known.has(d.id)) continue;
        known.add(d.id);
        fresh.set(i, routeOf(d, i));
      }
      await lockLines(
        q,
        [...fresh.values()].map((r) => pgText(r.workItem ?? null)),
      );
      const out: Array<RoutedDelivery | 'duplicate'> = [];
      const wake: Array<string | null> = [];
      for (const [i, d] of deliveries.entries()) {
        const routed = fresh.get(i);
        if (routed === undefined) {
          out.push('duplicate');
          continue;
        }
        const { route: _route, ...rest } = d;
        const stored = await insertDelivery(q, { ...rest, routed }, at, this.options);
        out.push(stored ? routed : 'duplicate');
        if (stored) wake.push(runnable({ ...rest, routed }));
      }
      await notifyInbox(q, wake);
      return out;
    });
  }

  async get(id: string): Promise<DeliveryRecord | undefined> {
    return read(this.db, id);
  }

  async body(id: string): Promise<string | undefined> {
    const row = await this.db.row<{ body: Buffer; pruned_at: string | null }>(
      'SELECT body, pruned_at FROM deliveries WHERE id = $1',
      [id],
    );
    // A pruned row holds no bytes (the column is NOT NULL): never hand that out as if it were the payload.
    return row && row.pruned_at === null ? bodyText(row.body) : undefined;
  }

  async readBody(id: string): Promise<string> {
    const body = await this.body(id);
    if (body !== undefined) return body;
    const d = await read(this.db, id);
    if (!d) throw new LoopError('usage', `no delivery ${id}`, { hint: 'See `the-loop events list`.' });
    throw new LoopError(
      'delivery-pruned',
      `the body of delivery ${id} was pruned at ${d.prunedAt} (inbox.retainDays); it cannot be routed or run again`,
      { hint: `\`the-loop events show ${id}\` still shows its metadata and outcome.` },
    );
  }

  async plan(id: string): Promise<RoutedTurn | undefined> {
    const row = await this.db.row<Pick<Row, 'route' | 'work_item'> & { plan: string | null }>(
      'SELECT route, work_item, plan FROM deliveries WHERE id = $1',
      [id],
    );
    if (!row || row.plan === null || row.work_item === null) return undefined;
    if (row.route !== 'start' && row.route !== 'deliver') return undefined;
    return parsePlan(row.route, row.work_item, row.plan);
  }

  async list(filter: DeliveryFilter = {}): Promise<DeliveryRecord[]> {
    const where: string[] = [];
    const args: unknown[] = [];
    // The text varies only in its shape (which filters): the values are bound.
    if (filter.status) {
      args.push(filter.status);
      where.push(`status = $${args.length}`);
    }
    if (filter.workItem) {
      args.push(filter.workItem);
      where.push(`work_item = $${args.length}`);
    }
    args.push(filter.limit ?? 100);
    const sql = `SELECT ${COLUMNS} FROM deliveries ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY seq DESC LIMIT $${args.length}`;
    return (await this.db.rows<Row>(sql, args)).map(toRecord);
  }

  async pending(): Promise<DeliveryRecord[]> {
    const rows = await this.db.rows<Row>(
      `SELECT ${COLUMNS} FROM deliveries WHERE status IN ('queued', 'running') ORDER BY seq`,
    );
    return rows.map(toRecord);
  }

  async setRoute(id: string, routed: RoutedDelivery): Promise<void> {
    const r = routedColumns(routed, this.options);
    await this.db.run(
      `UPDATE deliveries SET route = $1, work_item = $2, reason = $3, plan = $4, status = COALESCE($5::text, status),
        updated_at = $6 WHERE id = $7`,
      [routed.action, r.workItem, r.reason, r.plan, r.status, this.now(), id],
    );
  }

  async applyClaims(writes: ClaimWrites): Promise<Claim[]> {
    return this.db.tx((q) => applyClaimWrites(q, writes, this.now(), this.scrub, this.options.fence));
  }

  async finish(
    id: string,
    result: { status: 'done' | 'failed'; turnId: number | null; error: string | null },
  ): Promise<void> {
    const error = result.error === null ? null : pgText(this.scrub(result.error));
    const [host, workItem, epoch] = await this.fenceOf(id);
    const changed = await this.db.run(
      `UPDATE deliveries SET status = $6, turn_id = COALESCE($7::bigint, turn_id), error = $8, updated_at = $2
        WHERE id = $1 AND ${FENCED_SETTLE}`,
      [id, this.now(), host, workItem, epoch, result.status, result.turnId, error],
    );
    await this.noteSettleRefused(
      changed,
      id,
      workItem,
      epoch,
      `the settling of delivery ${id} (${result.status})`,
    );
  }

  /** A fenced settling of delivery `id` that changed nothing: the fence is told (session-fence.ts). */
  private async noteSettleRefused(
    changed: number,
    id: string,
    workItem: string | null,
    epoch: number | null,
    what: string,
  ): Promise<void> {
    if (workItem === null) return;
    await noteRefused(this.db, this.options.fence, changed, { workItem, epoch, what, key: `delivery ${id}` });
  }

  /** The fence values of a settling write of delivery `id` (host, work item, epoch), nulls without one. */
  private async fenceOf(id: string): Promise<[string | null, string | null, number | null]> {
    if (!this.options.fence) return [null, null, null];
    const row = await this.db.row<{ work_item: string | null }>(
      'SELECT work_item FROM deliveries WHERE id = $1',
      [id],
    );
    const workItem = row?.work_item ?? null;
    if (workItem === null) return [this.options.fence.host, null, null];
    const [host, epoch] = fenceValues(this.options.fence, workItem);
    return [host, workItem, epoch];
  }

  async retry(id: string): Promise<DeliveryRecord> {
    const d = await read(this.db, id);
    if (!d) throw new LoopError('usage', `no delivery ${id}`, { hint: 'See `the-loop events list`.' });
    if (d.status !== 'failed') {
      throw new LoopError('usage', `delivery ${id} is ${d.status}; only failed deliveries can be retried`);
    }
    // Guarded: retention (or a retry on another host) may have changed it since it was read. Its seq
    // is kept: it goes back to its original place in arrival order.
    const retried = await this.db.tx(async (q) => {
      const row = await q.row<Row>(
        `UPDATE deliveries SET status = 'queued', error = NULL, updated_at = $1
          WHERE id = $2 AND status = 'failed' AND pruned_at IS NULL RETURNING ${COLUMNS}`,
        [this.now(), id],
      );
      if (row) await notifyInbox(q, [row.work_item]);
      return row;
    });
    if (retried) return toRecord(retried);
    const after = (await read(this.db, id)) as DeliveryRecord;
    if (after.prunedAt !== null) {
      throw new LoopError(
        'delivery-pruned',
        `delivery ${id} cannot be retried: its body was pruned at ${after.prunedAt} (inbox.retainDays)`,
        { hint: 'Its payload is gone; trigger the work again on GitHub.' },
      );
    }
    throw new LoopError('usage', `delivery ${id} is ${after.status}; only failed deliveries can be retried`);
  }

  async requeue(id: string): Promise<void> {
    const [host, workItem, epoch] = await this.fenceOf(id);
    const requeued = await this.db.tx(async (q) => {
      const row = await q.row<{ work_item: string | null }>(
        `UPDATE deliveries SET status = 'queued', updated_at = $2
          WHERE id = $1 AND status = 'running' AND ${FENCED_SETTLE} RETURNING work_item`,
        [id, this.now(), host, workItem, epoch],
      );
      if (row) await notifyInbox(q, [row.work_item]);
      return row !== undefined;
    });
    await this.noteSettleRefused(requeued ? 1 : 0, id, workItem, epoch, `the requeueing of delivery ${id}`);
  }

  async prune(options: PruneOptions): Promise<PruneReport> {
    const dryRun = options.dryRun ?? false;
    const now = options.now ?? this.options.now?.() ?? new Date();
    const pass = (q: Queryable) => pruneBatch(q, { ...options, now, dryRun });
    // A dry run only reads: no transaction for it.
    return dryRun ? pass(this.db) : this.db.tx(pass);
  }
}

async function read(q: Queryable, id: string): Promise<DeliveryRecord | undefined> {
  const row = await q.row<Row>(`SELECT ${COLUMNS} FROM deliveries WHERE id = $1`, [id]);
  return row && toRecord(row);
}
