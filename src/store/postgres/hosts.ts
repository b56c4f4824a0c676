/**
 * The hosts sharing a PostgreSQL store and their leases (migration 22): the only owner of `hosts`
 * and `leases`. Every instant is the database's (`now()`); nothing here reads the host's clock, so
 * hosts whose clocks disagree still agree on who holds what.
 *
 * Two hosts at once: `acquire` is one `INSERT … ON CONFLICT DO UPDATE … WHERE` (the loser waits for
 * the winner's row lock, then finds the lease held and gets nothing); a lease held and unexpired is
 * seen so before any row is locked, so asking for it locks nothing (no wait behind its holder's
 * fenced writes, no commit to flush: placement asks for others' work items on every pass); `heartbeat`, `reapExpired` and
 * `markDown` are single UPDATE statements whose WHERE PostgreSQL checks again on the row it locked
 * (so a lease is renewed or reaped, never both, and reaped once); `move` and `cancelMove` are one
 * UPDATE each; `release`, `leave` and `register` run their two statements in one transaction (each
 * an UPDATE or an upsert that locks the rows it changes).
 *
 * Other PostgreSQL stores fence a host's write with `fencedBy` (below): the write's WHERE holds only
 * while the host's lease, at the epoch it names, is current.
 */
import type {
  Abandoned,
  HostInfo,
  HostRecord,
  HostStatus,
  HostStore,
  Lease,
} from '../../core/ports/hosts.js';
import type { Pg, Queryable } from './pg.js';

/** A `$n` placeholder (fencing text varies in its placeholders only, never with values). */
const PLACEHOLDER = /^\$[1-9]\d*$/;

/**
 * A condition for a write's WHERE clause: true only while `host` holds the unexpired lease of
 * `workItem` at `epoch`. Each argument is the placeholder (`$4`) its value is bound to. With
 * `lock` the lease row is share-locked until the write's transaction ends: a take-over (or a
 * reap) then waits for the write to commit, and a write that waited for a take-over finds the new
 * epoch and changes nothing. Without it the check is as of the statement's start.
 *
 *   UPDATE turns SET … WHERE id = $1 AND ${fencedBy('$2', '$3', '$4', { lock: true })}
 */
export function fencedBy(
  workItem: string,
  host: string,
  epoch: string,
  options: { lock?: boolean } = {},
): string {
  for (const p of [workItem, host, epoch])
    if (!PLACEHOLDER.test(p))
      throw new Error(`fencedBy takes placeholders ($1, $2…), not ${JSON.stringify(p)}`);
  const lock = options.lock ? ' FOR SHARE' : '';
  return `EXISTS (SELECT 1 FROM leases WHERE work_item = ${workItem}::text AND host_id = ${host}::text AND epoch = ${epoch}::bigint AND NOT ended AND expires_at > now()${lock})`;
}

/**
 * End one lease unrenewed more than `graceSeconds` past expiry (the first by work item, passing over
 * those in `skip` and those another transaction has locked: `FOR UPDATE SKIP LOCKED`), on the
 * caller's transaction: the row stays locked until it ends, so no host can take the lease (acquire
 * waits on the row) before what its holder left is settled in that same transaction
 * (PgAbandon.reapAndSettle). undefined: none left to reap.
 */
export async function reapOneExpiredIn(
  q: Queryable,
  graceSeconds: number,
  skip: readonly string[] = [],
): Promise<Abandoned | undefined> {
  const row = await q.row<{ work_item: string; host_id: string; epoch: number }>(
    `UPDATE leases SET ended = true, draining = false
      WHERE work_item = (
        SELECT work_item FROM leases
         WHERE NOT ended AND expires_at < now() - make_interval(secs => $1::float8)
           AND work_item <> ALL($2::text[])
         ORDER BY work_item LIMIT 1 FOR UPDATE SKIP LOCKED)
        AND NOT ended AND expires_at < now() - make_interval(secs => $1::float8)
     RETURNING work_item, host_id, epoch`,
    [graceSeconds, [...skip]],
  );
  return row ? { workItem: row.work_item, hostId: row.host_id, epoch: row.epoch } : undefined;
}

/** End every lease unrenewed more than `graceSeconds` past expiry, in one statement (`reapExpired`). */
export async function reapExpiredIn(q: Queryable, graceSeconds: number): Promise<Abandoned[]> {
  const rows = await q.rows<{ work_item: string; host_id: string; epoch: number }>(
    `UPDATE leases SET ended = true, draining = false
      WHERE NOT ended AND expires_at < now() - make_interval(secs => $1::float8)
     RETURNING work_item, host_id, epoch`,
    [graceSeconds],
  );
  return rows.map((r) => ({ workItem: r.work_item, hostId: r.host_id, epoch: r.epoch })).sort(byWorkItem);
}

interface LeaseRow {
  work_item: string;
  host_id: string;
  incarnation: number;
  epoch: number;
  expires_at: Date;
  draining: boolean;
  moving_to: string | null;
  ended: boolean;
}

const LEASE_COLUMNS = 'work_item, host_id, incarnation, epoch, expires_at, draining, moving_to, ended';

const toLease = (r: LeaseRow): Lease => ({
  workItem: r.work_item,
  hostId: r.host_id,
  incarnation: r.incarnation,
  epoch: r.epoch,
  expiresAt: r.expires_at.toISOString(),
  draining: r.draining,
  movingTo: r.moving_to,
  ended: r.ended,
});

const byWorkItem = (a: { workItem: string }, b: { workItem: string }) =>
  a.workItem < b.workItem ? -1 : a.workItem > b.workItem ? 1 : 0;

interface HostRow {
  id: string;
  incarnation: number;
  labels: string[];
  engines: string[];
  capacity: number;
  address: string | null;
  status: HostStatus;
  started_at: Date;
  heartbeat_at: Date;
  silent: number;
  leases: number;
  moving: number;
}

const toHost = (r: HostRow): HostRecord => ({
  id: r.id,
  labels: r.labels,
  engines: r.engines,
  capacity: r.capacity,
  address: r.address,
  incarnation: r.incarnation,
  status: r.status,
  startedAt: r.started_at.toISOString(),
  heartbeatAt: r.heartbeat_at.toISOString(),
  silentSeconds: Math.max(0, r.silent),
  leases: r.leases,
  moving: r.moving,
});

/**
 * Hand the moved leases among those picked to their targets (when up): the target becomes the
 * holder, with the epoch + 1 and as long a lease as was last renewed. `which` picks the leases by
 * placeholders $1, $2 (a fixed text of this file).
 */
async function handOver(q: Queryable, which: string, values: readonly unknown[]): Promise<number> {
  return q.run(
    `UPDATE leases l
        SET host_id = t.id, incarnation = t.incarnation, epoch = l.epoch + 1,
            expires_at = now() + make_interval(secs => l.seconds),
            draining = false, moving_to = NULL, ended = false
       FROM hosts t
      WHERE ${which} AND NOT l.ended AND l.moving_to = t.id AND t.status = 'up'`,
    values,
  );
}

/**
 * End the leases picked (one handed over is no longer among them: its holder changed). A move's
 * target stays named: the ended lease is kept for it (unless it is no longer up when it is taken).
 */
async function endLeases(q: Queryable, which: string, values: readonly unknown[]): Promise<number> {
  return q.run(
    `UPDATE leases l
        SET ended = true, draining = false, expires_at = LEAST(l.expires_at, now())
      WHERE ${which} AND NOT l.ended`,
    values,
  );
}

const ONE_LEASE = 'l.work_item = $1 AND l.host_id = $2 AND l.epoch = $3';
const HOST_LEASES = 'l.host_id = $1 AND l.incarnation = $2';

export class PgHostStore implements HostStore {
  constructor(private readonly db: Pg) {}

  async register(host: HostInfo): Promise<number> {
    return this.db.tx(async (q) => {
      const row = await q.row<{ incarnation: number }>(
        `INSERT INTO hosts AS h (id, incarnation, labels, engines, capacity, address, status)
         VALUES ($1, 1, $2::text[], $3::text[], $4, $5, 'up')
         ON CONFLICT (id) DO UPDATE
            SET incarnation = h.incarnation + 1, labels = EXCLUDED.labels, engines = EXCLUDED.engines,
                capacity = EXCLUDED.capacity, address = EXCLUDED.address, status = 'up',
                started_at = now(), heartbeat_at = now()
         RETURNING incarnation`,
        [host.id, host.labels, host.engines, host.capacity, host.address],
      );
      const incarnation = row?.incarnation ?? 1;
      // An earlier start of this id is over: its leases expire now and are reaped after the grace.
      await q.run(
        `UPDATE leases SET expires_at = LEAST(expires_at, now())
          WHERE host_id = $1 AND incarnation < $2 AND NOT ended`,
        [host.id, incarnation],
      );
      return incarnation;
    });
  }

  async heartbeat(hostId: string, incarnation: number, leaseSeconds: number): Promise<Lease[] | null> {
    // The leases are locked in work-item order (as fenced writes of several work items lock them):
    // renewal and those writes never wait on each other in a cycle. A deadlock or a serialization
    // failure all the same is run again at once (db.tx), not taken for a lost database.
    const rows = await this.db.tx((q) =>
      q.rows<{ host: string } & Partial<LeaseRow>>(
        `WITH host AS (
         UPDATE hosts SET heartbeat_at = now()
          WHERE id = $1 AND incarnation = $2 AND status <> 'down'
         RETURNING id, incarnation
       ), mine AS (
         SELECT l.work_item FROM leases l, host
          WHERE l.host_id = host.id AND l.incarnation = host.incarnation AND NOT l.ended
            AND l.expires_at > now()
          ORDER BY l.work_item FOR UPDATE OF l
       ), renewed AS (
         UPDATE leases l SET expires_at = now() + make_interval(secs => $3::float8), seconds = $3::float8
           FROM mine
          WHERE l.work_item = mine.work_item
         RETURNING l.work_item, l.host_id, l.incarnation, l.epoch, l.expires_at, l.draining,
                   l.moving_to, l.ended
       )
       SELECT host.id AS host, renewed.* FROM host LEFT JOIN renewed ON true`,
        [hostId, incarnation, leaseSeconds],
      ),
    );
    if (rows.length === 0) return null;
    return rows
      .filter((r): r is { host: string } & LeaseRow => r.work_item != null)
      .map(toLease)
      .sort(byWorkItem);
  }

  async list(): Promise<HostRecord[]> {
    const rows = await this.db.rows<HostRow>(
      `SELECT h.id, h.incarnation, h.labels, h.engines, h.capacity, h.address, h.status,
              h.started_at, h.heartbeat_at,
              EXTRACT(EPOCH FROM now() - h.heartbeat_at)::float8 AS silent,
              l.leases, l.moving
         FROM hosts h,
              LATERAL (SELECT COUNT(*)::int AS leases, (COUNT(*) FILTER (WHERE l.draining))::int AS moving
                         FROM leases l
                        WHERE l.host_id = h.id AND l.incarnation = h.incarnation
                          AND NOT l.ended AND l.expires_at > now()) l
        ORDER BY h.id`,
    );
    return rows.map(toHost);
  }

  async lease(workItem: string): Promise<Lease | undefined> {
    const row = await this.db.row<LeaseRow>(`SELECT ${LEASE_COLUMNS} FROM leases WHERE work_item = $1`, [
      workItem,
    ]);
    return row ? toLease(row) : undefined;
  }

  async acquire(
    workItem: string,
    hostId: string,
    incarnation: number,
    leaseSeconds: number,
  ): Promise<Lease | undefined> {
    const row = await this.db.row<LeaseRow>(
      `INSERT INTO leases AS l (work_item, host_id, incarnation, epoch, expires_at, seconds)
       SELECT $1, h.id, h.incarnation, 1, now() + make_interval(secs => $4::float8), $4::float8
         FROM hosts h WHERE h.id = $2 AND h.incarnation = $3 AND h.status = 'up'
          -- Held and live: nothing to try (the conflict clause would lock the row first). An expired
          -- one goes on to the conflict clause: it waits for a reap in progress, then sees it ended.
          AND NOT EXISTS (SELECT 1 FROM leases x WHERE x.work_item = $1 AND NOT x.ended AND x.expires_at > now())
       ON CONFLICT (work_item) DO UPDATE
          SET host_id = EXCLUDED.host_id, incarnation = EXCLUDED.incarnation, epoch = l.epoch + 1,
              expires_at = EXCLUDED.expires_at, seconds = EXCLUDED.seconds,
              draining = false, moving_to = NULL, ended = false
        WHERE l.ended
          AND (l.moving_to IS NULL OR l.moving_to = EXCLUDED.host_id
               OR NOT EXISTS (SELECT 1 FROM hosts t WHERE t.id = l.moving_to AND t.status = 'up'))
       RETURNING ${LEASE_COLUMNS}`,
      [workItem, hostId, incarnation, leaseSeconds],
    );
    return row ? toLease(row) : undefined;
  }

  async release(workItem: string, hostId: string, epoch: number): Promise<boolean> {
    return this.db.tx(async (q) => {
      const values = [workItem, hostId, epoch];
      if ((await handOver(q, ONE_LEASE, values)) > 0) return true;
      return (await endLeases(q, ONE_LEASE, values)) > 0;
    });
  }

  async move(workItem: string, toHost: string): Promise<boolean> {
    const changed = await this.db.run(
      `UPDATE leases l SET moving_to = t.id, draining = NOT l.ended
         FROM hosts t
        WHERE l.work_item = $1 AND t.id = $2 AND t.status = 'up'
          AND (l.ended OR l.host_id <> t.id)`,
      [workItem, toHost],
    );
    return changed > 0;
  }

  async cancelMove(workItem: string, holder: string): Promise<boolean> {
    const changed = await this.db.run(
      `UPDATE leases SET moving_to = NULL, draining = false
        WHERE work_item = $1 AND host_id = $2 AND NOT ended AND moving_to IS NOT NULL`,
      [workItem, holder],
    );
    return changed > 0;
  }

  async reservations(workItems: readonly string[]): Promise<Map<string, string>> {
    if (workItems.length === 0) return new Map();
    const rows = await this.db.rows<{ work_item: string; moving_to: string }>(
      `SELECT work_item, moving_to FROM leases
        WHERE work_item = ANY($1::text[]) AND ended AND moving_to IS NOT NULL`,
      [[...workItems]],
    );
    return new Map(rows.map((r) => [r.work_item, r.moving_to]));
  }

  async holds(workItem: string, hostId: string, epoch: number): Promise<boolean> {
    const row = await this.db.row<{ holds: boolean }>(`SELECT ${fencedBy('$1', '$2', '$3')} AS holds`, [
      workItem,
      hostId,
      epoch,
    ]);
    return row?.holds === true;
  }

  async reapExpired(graceSeconds: number): Promise<Abandoned[]> {
    return reapExpiredIn(this.db, graceSeconds);
  }

  async markDown(silentSeconds: number): Promise<string[]> {
    const rows = await this.db.rows<{ id: string }>(
      `UPDATE hosts SET status = 'down'
        WHERE status <> 'down' AND heartbeat_at < now() - make_interval(secs => $1::float8)
       RETURNING id`,
      [silentSeconds],
    );
    return rows.map((r) => r.id).sort();
  }

  async leave(hostId: string, incarnation: number): Promise<void> {
    await this.db.tx(async (q) => {
      const down = await q.run(`UPDATE hosts SET status = 'down' WHERE id = $1 AND incarnation = $2`, [
        hostId,
        incarnation,
      ]);
      if (down === 0) return;
      await handOver(q, HOST_LEASES, [hostId, incarnation]);
      await endLeases(q, HOST_LEASES, [hostId, incarnation]);
    });
  }
}
