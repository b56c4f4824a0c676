/**
 * The PostgreSQL inbox with two hosts at once: two pools on one database (each its own
 * connections, nothing shared in memory) accepting the same deliveries — each stored and routed
 * once, each batch's rows in its order — and dispatching the same queue — each delivery claimed
 * once, a work item's deliveries claimed one at a time in arrival order.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type {
  ArrivingDelivery,
  Claim,
  DeliveryRecord,
  RoutedDelivery,
} from '../../../src/core/ports/inbox.js';
import { PgInbox } from '../../../src/store/postgres/inbox.js';
import { openPg } from '../../../src/store/postgres/migrate.js';
import type { Pg } from '../../../src/store/postgres/pg.js';
import { freshDatabase } from '../../helpers/postgres.js';
import { delivery, routed } from '../contract/fixtures.js';

const N = 500;
const BATCH = 25;

let pools: Pg[] = [];
let drop: () => Promise<void> = async () => {};
let hosts: PgInbox[] = [];

beforeEach(async () => {
  const database = await freshDatabase();
  drop = database.drop;
  pools = [await openPg(database.url, { max: 4 }), await openPg(database.url, { max: 4 })];
  hosts = pools.map((db) => new PgInbox(db, { scrub: (text) => text }));
});

afterEach(async () => {
  for (const db of pools.splice(0)) await db.close();
  await drop();
});

const idOf = (i: number) => `d-${String(i).padStart(4, '0')}`;
/** 50 work items, ten deliveries each, interleaved in arrival order. */
const itemOf = (i: number) => `github:octo/widgets#${i % 50}`;
const ids = Array.from({ length: N }, (_, i) => idOf(i));

/** The ids cut in batches; `reversed`: the batches in reverse order, each batch reversed too. */
function batches(reversed: boolean): string[][] {
  const out: string[][] = [];
  for (let i = 0; i < N; i += BATCH) out.push(ids.slice(i, i + BATCH));
  return reversed ? out.reverse().map((b) => [...b].reverse()) : out;
}

/**
 * Every host's batches at once (each host's one after another, as ingress commits them): each id's
 * outcome on each host, by host.
 */
async function race<T>(run: (host: PgInbox, batch: string[]) => Promise<T[]>): Promise<Map<string, T[]>> {
  const outcomes = new Map<string, T[]>();
  await Promise.all(
    hosts.map(async (host, h) => {
      for (const batch of batches(h === 1)) {
        const out = await run(host, batch);
        batch.forEach((id, i) => {
          const byHost = outcomes.get(id) ?? [];
          byHost[h] = out[i] as T;
          outcomes.set(id, byHost);
        });
      }
    }),
  );
  return outcomes;
}

/** Rows in seq order, and each batch's rows in its own order by seq. */
async function expectStoredOnceInBatchOrder(stored: (id: string) => boolean[]): Promise<void> {
  const rows = await hosts[0]?.list({ limit: 10 * N });
  expect(rows).toHaveLength(N);
  expect(new Set(rows?.map((d) => d.id)).size).toBe(N);
  const seq = new Map(rows?.map((d) => [d.id, d.seq]));
  for (const [h, reversed] of [false, true].entries()) {
    for (const batch of batches(reversed)) {
      const mine = batch.filter((id) => stored(id)[h]).map((id) => seq.get(id) as number);
      expect(mine).toEqual([...mine].sort((a, b) => a - b));
    }
  }
}

describe('PgInbox, two hosts at once', () => {
  it('accepting the same 500 deliveries as they arrive: each stored once and routed once', async () => {
    const asked = new Map<string, number>();
    const arriving = (id: string): ArrivingDelivery => {
      const { routed: _routed, ...rest } = delivery(id, routed('deliver', itemOf(Number(id.slice(2)))));
      return {
        ...rest,
        route: () => {
          asked.set(id, (asked.get(id) ?? 0) + 1);
          return routed('deliver', itemOf(Number(id.slice(2))));
        },
      };
    };
    const outcomes = await race<RoutedDelivery | 'duplicate'>((host, batch) =>
      host.acceptArriving(batch.map(arriving)),
    );
    for (const id of ids) {
      expect(asked.get(id), id).toBe(1);
      const out = outcomes.get(id) ?? [];
      expect(
        out.filter((o) => o === 'duplicate'),
        id,
      ).toHaveLength(1);
      expect(out.find((o) => o !== 'duplicate')).toMatchObject({
        action: 'deliver',
        workItem: itemOf(Number(id.slice(2))),
      });
    }
    await expectStoredOnceInBatchOrder((id) => (outcomes.get(id) ?? []).map((o) => o !== 'duplicate'));
    expect(await hosts[1]?.plan(idOf(7))).toMatchObject({ action: 'deliver', workItem: itemOf(7) });
  });

  it('accepting the same 500 routed deliveries: each accepted on one host, a duplicate on the other', async () => {
    const outcomes = await race((host, batch) =>
      host.acceptMany(batch.map((id) => delivery(id, routed('deliver', itemOf(Number(id.slice(2))))))),
    );
    for (const id of ids) expect([...(outcomes.get(id) ?? [])].sort(), id).toEqual(['accepted', 'duplicate']);
    await expectStoredOnceInBatchOrder((id) => (outcomes.get(id) ?? []).map((o) => o === 'accepted'));
  });

  it('dispatching one queue: each delivery claimed once, a work item’s in arrival order, one at a time', async () => {
    const first = hosts[0] as PgInbox;
    for (let i = 0; i < N; i += 100) {
      await first.acceptMany(
        ids.slice(i, i + 100).map((id) => delivery(id, routed('deliver', itemOf(Number(id.slice(2)))))),
      );
    }
    const seqOf = new Map((await first.pending()).map((d) => [d.id, d.seq]));
    /** Claims won, in the order they were won (a claim is won only after the one before it finished). */
    const won: Claim[] = [];
    const dispatch = async (host: PgInbox, h: number) => {
      for (let pass = 0; pass < 10 * N; pass++) {
        const pending = await host.pending();
        if (pending.length === 0) return;
        // Ask for every queued delivery, in an order of its own: the store must refuse all but the
        // first of each work item's line.
        const queued = pending.filter((d) => d.status === 'queued');
        const order = h === 0 ? queued : [...queued].reverse();
        const claims = order.map((d: DeliveryRecord) => ({
          deliveryId: d.id,
          workItem: d.workItem as string,
          action: 'deliver' as const,
          source: 'github' as const,
        }));
        const mine = await host.applyClaims({ claims, held: [], ignored: [] });
        won.push(...mine);
        for (const c of mine) await host.finish(c.deliveryId, { status: 'done', turnId: null, error: null });
      }
    };
    await Promise.all(hosts.map((host, h) => dispatch(host, h)));

    expect(won).toHaveLength(N);
    expect(new Set(won.map((c) => c.deliveryId)).size).toBe(N);
    const all = await first.list({ limit: 10 * N });
    expect(all.every((d) => d.status === 'done' && d.attempts === 1)).toBe(true);
    const byItem = new Map<string, number[]>();
    for (const c of won)
      byItem.set(c.workItem, [...(byItem.get(c.workItem) ?? []), seqOf.get(c.deliveryId) as number]);
    expect(byItem.size).toBe(50);
    for (const [item, seqs] of byItem) expect(seqs, item).toEqual([...seqs].sort((a, b) => a - b));
  });

  it('a claim that waits on a row while a retry puts an earlier delivery back, claimed by the other host: one runs', async () => {
    const [a, b] = hosts as [PgInbox, PgInbox];
    const item = itemOf(0);
    const claim = (id: string): Claim => ({
      deliveryId: id,
      workItem: item,
      action: 'deliver',
      source: 'github',
    });
    await a.acceptMany([delivery('x', routed('deliver', item)), delivery('y', routed('deliver', item))]);
    expect(await a.applyClaims({ claims: [claim('x')], held: [], ignored: [] })).toEqual([claim('x')]);
    await a.finish('x', { status: 'failed', turnId: null, error: 'boom' });
    // A third session holds y's row: host b's claim of y reads x failed, then waits on the row.
    const holder = await (pools[0] as Pg).pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query("SELECT 1 FROM deliveries WHERE id = 'y' FOR UPDATE");
      const claimY = b.applyClaims({ claims: [claim('y')], held: [], ignored: [] });
      await waitForWaiters(1);
      // Meanwhile x goes back to the line, before y, and host a claims it.
      expect((await a.retry('x')).status).toBe('queued');
      let settled = false;
      const claimX = a.applyClaims({ claims: [claim('x')], held: [], ignored: [] }).finally(() => {
        settled = true;
      });
      // Host a either waits for the work item's line (the lock) or answers: either way, go on.
      for (let i = 0; i < 200 && !settled && (await waiters()) < 2; i++) await sleep(10);
      await holder.query('COMMIT');
      const won = [...(await claimY), ...(await claimX)];
      expect(won).toHaveLength(1);
      const running = (await a.pending()).filter((d) => d.status === 'running');
      expect(running.map((d) => d.id)).toEqual(won.map((c) => c.deliveryId));
    } finally {
      holder.release();
    }
  });
});

const sleep = (ms: number) => new Promise((go) => setTimeout(go, ms));

/** Sessions of this database waiting on a lock (a row's or an advisory one). */
async function waiters(): Promise<number> {
  const row = await (pools[0] as Pg).row<{ n: number }>(
    "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
  );
  return row?.n ?? 0;
}

async function waitForWaiters(n: number): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if ((await waiters()) >= n) return;
    await sleep(10);
  }
  throw new Error(`no ${n} sessions waiting on a lock`);
}
