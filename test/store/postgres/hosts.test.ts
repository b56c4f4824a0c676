/**
 * The PostgreSQL host store: registration, heartbeats, leases with epochs, moves, reaping, fencing.
 * Each test has a database of its own; a second pool on it is another host (own connections,
 * nothing shared in memory). Leases are 1–2 s long and expiry is waited for in real time, sparingly.
 */
import { readFileSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { HostInfo } from '../../../src/core/ports/hosts.js';
import { fencedBy, PgHostStore } from '../../../src/store/postgres/hosts.js';
import { openPg } from '../../../src/store/postgres/migrate.js';
import type { Pg } from '../../../src/store/postgres/pg.js';
import { freshDatabase } from '../../helpers/postgres.js';

let pools: Pg[] = [];
let drop: () => Promise<void>;
let one: PgHostStore;
let two: PgHostStore;

beforeEach(async () => {
  const database = await freshDatabase();
  drop = database.drop;
  pools = [await openPg(database.url, { max: 6 }), await openPg(database.url, { max: 6 })];
  one = new PgHostStore(pools[0] as Pg);
  two = new PgHostStore(pools[1] as Pg);
});

afterEach(async () => {
  vi.useRealTimers();
  for (const db of pools.splice(0)) await db.close();
  await drop();
});

const info = (id: string, over: Partial<HostInfo> = {}): HostInfo => ({
  id,
  labels: ['tmux'],
  engines: ['claude'],
  capacity: 2,
  address: `${id}.example`,
  ...over,
});
const sleep = (ms: number) => new Promise((go) => setTimeout(go, ms));
const db = () => pools[0] as Pg;

describe('PgHostStore: registration and heartbeats', () => {
  it('register, heartbeat, list: by the database clock, leases counted', async () => {
    expect(await one.register(info('a'))).toBe(1);
    expect(await two.register(info('b', { labels: [], engines: ['codex', 'claude'], address: null }))).toBe(
      1,
    );
    expect(await one.heartbeat('a', 1, 2)).toEqual([]);
    const taken = await one.acquire('o/r#1', 'a', 1, 2);
    expect(taken).toMatchObject({ workItem: 'o/r#1', hostId: 'a', incarnation: 1, epoch: 1, ended: false });
    const renewed = await one.heartbeat('a', 1, 60);
    expect(renewed?.map((l) => l.workItem)).toEqual(['o/r#1']);
    expect(Date.parse(renewed?.[0]?.expiresAt ?? '')).toBeGreaterThan(Date.parse(taken?.expiresAt ?? ''));
    const hosts = await two.list();
    expect(hosts.map((h) => [h.id, h.status, h.incarnation, h.leases])).toEqual([
      ['a', 'up', 1, 1],
      ['b', 'up', 1, 0],
    ]);
    expect(hosts[1]).toMatchObject({ labels: [], engines: ['codex', 'claude'], capacity: 2, address: null });
    for (const h of hosts) {
      expect(h.silentSeconds).toBeGreaterThanOrEqual(0);
      expect(h.silentSeconds).toBeLessThan(5);
      expect(h.heartbeatAt >= h.startedAt).toBe(true);
    }
    expect(await one.heartbeat('nobody', 1, 2)).toBeNull();
  });

  it('a superseded incarnation: its heartbeat is null and renews nothing; its leases expire at once', async () => {
    await one.register(info('a'));
    await one.acquire('o/r#1', 'a', 1, 60);
    expect(await two.register(info('a', { capacity: 4 }))).toBe(2);
    expect(await one.heartbeat('a', 1, 60)).toBeNull();
    const lease = await one.lease('o/r#1');
    expect(lease).toMatchObject({ hostId: 'a', incarnation: 1, epoch: 1, ended: false });
    expect(Date.parse(lease?.expiresAt ?? '')).toBeLessThan(Date.now() + 30_000);
    expect(await one.holds('o/r#1', 'a', 1)).toBe(false);
    // The new start does not inherit the old one's leases: they are reaped and recovered.
    expect(await two.heartbeat('a', 2, 60)).toEqual([]);
    expect(await one.acquire('o/r#2', 'a', 1, 60)).toBeUndefined();
    expect(await two.reapExpired(0)).toEqual([{ workItem: 'o/r#1', hostId: 'a', epoch: 1 }]);
    expect(await two.acquire('o/r#1', 'a', 2, 60)).toMatchObject({ incarnation: 2, epoch: 2 });
    expect((await one.list())[0]).toMatchObject({ capacity: 4, incarnation: 2, leases: 1 });
  });

  it('markDown: a silent host is marked once; its heartbeat is then null and it takes nothing', async () => {
    await one.register(info('a'));
    await two.register(info('b'));
    await sleep(1200);
    await two.heartbeat('b', 1, 2);
    const [first, second] = await Promise.all([one.markDown(1), two.markDown(1)]);
    expect([...(first ?? []), ...(second ?? [])]).toEqual(['a']);
    expect(await one.markDown(1)).toEqual([]);
    expect(await one.heartbeat('a', 1, 2)).toBeNull();
    expect(await one.acquire('o/r#1', 'a', 1, 2)).toBeUndefined();
    expect((await one.list()).map((h) => [h.id, h.status])).toEqual([
      ['a', 'down'],
      ['b', 'up'],
    ]);
    expect(await one.register(info('a'))).toBe(2);
    expect((await one.list())[0]?.status).toBe('up');
  });

  it('leave: leases released (a moved one handed over), status down; a stale incarnation leaves nothing', async () => {
    await one.register(info('a'));
    await two.register(info('b'));
    await one.acquire('o/r#1', 'a', 1, 60);
    await one.acquire('o/r#2', 'a', 1, 60);
    expect(await two.move('o/r#2', 'b')).toBe(true);
    await one.leave('a', 7);
    expect((await one.list())[0]?.status).toBe('up');
    await one.leave('a', 1);
    expect(await one.lease('o/r#1')).toMatchObject({ hostId: 'a', epoch: 1, ended: true });
    expect(await one.lease('o/r#2')).toMatchObject({ hostId: 'b', epoch: 2, ended: false, draining: false });
    expect((await one.list()).map((h) => [h.id, h.status, h.leases])).toEqual([
      ['a', 'down', 0],
      ['b', 'up', 1],
    ]);
    expect(await one.heartbeat('a', 1, 60)).toBeNull();
    expect(await two.reapExpired(0)).toEqual([]);
    expect(await two.acquire('o/r#1', 'b', 1, 60)).toMatchObject({ epoch: 2 });
  });
});

describe('PgHostStore: leases', () => {
  it('two hosts acquiring the same 200 work items at once: each won exactly once, epochs without gaps', async () => {
    await one.register(info('a'));
    await two.register(info('b'));
    const items = Array.from({ length: 200 }, (_, i) => `o/r#${i + 1}`);
    for (const round of [1, 2]) {
      const results = await Promise.all(
        items.flatMap((w) => [one.acquire(w, 'a', 1, 60), two.acquire(w, 'b', 1, 60)]),
      );
      const won = results.filter((l) => l !== undefined);
      expect(won).toHaveLength(200);
      expect(new Set(won.map((l) => l?.workItem)).size).toBe(200);
      expect(won.every((l) => l?.epoch === round)).toBe(true);
      for (const l of won)
        expect(await (l?.hostId === 'a' ? two : one).release(l?.workItem ?? '', 'x', round)).toBe(false);
      await Promise.all(won.map((l) => one.release(l?.workItem ?? '', l?.hostId ?? '', round)));
    }
    expect(await one.acquire('o/r#1', 'nobody', 1, 60)).toBeUndefined();
  });

  it('asking for a lease another host holds locks nothing: the answer does not wait for its fenced write', async () => {
    await one.register(info('a'));
    await two.register(info('b'));
    await one.acquire('o/r#1', 'a', 1, 60);
    // Host a writes under its lease (the lease row share-locked until the write commits).
    const write = `UPDATE hosts SET address = $5 WHERE id = $1 AND ${fencedBy('$2', '$3', '$4', { lock: true })}`;
    let finish: () => void = () => {};
    const held = new Promise<void>((go) => {
      finish = go;
    });
    let locked: () => void = () => {};
    const writing = new Promise<void>((go) => {
      locked = go;
    });
    const tx = db().tx(async (q) => {
      await q.run(write, ['a', 'o/r#1', 'a', 1, 'in-tx.example']);
      locked();
      await held;
    });
    await writing;
    try {
      // Placement may name b for a's work item; b's answer must not wait for a's commit.
      const answer = await Promise.race([two.acquire('o/r#1', 'b', 1, 60), sleep(5000).then(() => 'waited')]);
      expect(answer).toBeUndefined();
    } finally {
      finish();
      await tx;
    }
    expect(await one.lease('o/r#1')).toMatchObject({ hostId: 'a', epoch: 1, ended: false });
  });

  it('an expired lease stays its holder’s until reaped; then another host takes it with a larger epoch', async () => {
    await one.register(info('a'));
    await two.register(info('b'));
    expect(await one.acquire('o/r#1', 'a', 1, 1)).toMatchObject({ epoch: 1 });
    expect(await two.acquire('o/r#1', 'b', 1, 60)).toBeUndefined();
    expect(await one.holds('o/r#1', 'a', 1)).toBe(true);
    await sleep(1200);
    expect(await one.holds('o/r#1', 'a', 1)).toBe(false);
    // Expired but not reaped: not another host's to take.
    expect(await two.acquire('o/r#1', 'b', 1, 60)).toBeUndefined();
    expect(await two.reapExpired(30)).toEqual([]);
    expect(await two.reapExpired(0)).toEqual([{ workItem: 'o/r#1', hostId: 'a', epoch: 1 }]);
    expect(await two.reapExpired(0)).toEqual([]);
    expect(await one.heartbeat('a', 1, 60)).toEqual([]);
    const taken = await two.acquire('o/r#1', 'b', 1, 60);
    expect(taken).toMatchObject({ hostId: 'b', epoch: 2 });
    expect(await one.holds('o/r#1', 'a', 1)).toBe(false);
    expect(await one.holds('o/r#1', 'b', 2)).toBe(true);
    expect(await one.release('o/r#1', 'a', 1)).toBe(false);
    expect(await one.acquire('o/r#1', 'a', 1, 60)).toBeUndefined();
  });

  it('a holder only late (expired, not reaped) does not get its lease back: the reaper settles it', async () => {
    await one.register(info('a'));
    await one.acquire('o/r#1', 'a', 1, 1);
    await sleep(1200);
    expect(await one.holds('o/r#1', 'a', 1)).toBe(false);
    // Its turn there was cut off by its own self-fencing: renewing now would leave it running
    // forever under a lease nobody reaps.
    expect(await one.heartbeat('a', 1, 60)).toEqual([]);
    expect(await one.holds('o/r#1', 'a', 1)).toBe(false);
    expect(await two.reapExpired(0)).toEqual([{ workItem: 'o/r#1', hostId: 'a', epoch: 1 }]);
  });

  it('reapExpired from two hosts at once: each abandoned lease returned exactly once', async () => {
    await one.register(info('a'));
    await two.register(info('b'));
    const items = Array.from({ length: 60 }, (_, i) => `o/r#${i + 1}`);
    await Promise.all(items.map((w) => one.acquire(w, 'a', 1, 1)));
    await one.acquire('o/r#keep', 'a', 1, 60);
    await sleep(1200);
    const reaped = (await Promise.all([one.reapExpired(0), two.reapExpired(0), one.reapExpired(0)])).flat();
    expect(reaped.map((r) => r.workItem).sort()).toEqual([...items].sort());
    expect(reaped.every((r) => r.hostId === 'a' && r.epoch === 1)).toBe(true);
    expect(await two.reapExpired(0)).toEqual([]);
    expect((await one.heartbeat('a', 1, 60))?.map((l) => l.workItem)).toEqual(['o/r#keep']);
  });

  it('move, then release: the target holds it with epoch + 1 and sees it in its heartbeat', async () => {
    await one.register(info('a'));
    await two.register(info('b'));
    await one.acquire('o/r#1', 'a', 1, 60);
    expect(await one.move('o/r#1', 'b')).toBe(true);
    expect((await one.heartbeat('a', 1, 60))?.[0]).toMatchObject({ draining: true, movingTo: 'b' });
    expect(await two.acquire('o/r#1', 'b', 1, 60)).toBeUndefined();
    expect(await one.holds('o/r#1', 'a', 1)).toBe(true);
    expect(await one.release('o/r#1', 'a', 1)).toBe(true);
    expect(await one.lease('o/r#1')).toMatchObject({
      hostId: 'b',
      incarnation: 1,
      epoch: 2,
      draining: false,
      movingTo: null,
      ended: false,
    });
    expect(await two.holds('o/r#1', 'b', 2)).toBe(true);
    expect(await two.holds('o/r#1', 'a', 1)).toBe(false);
    expect((await two.heartbeat('b', 1, 60))?.map((l) => [l.workItem, l.epoch])).toEqual([['o/r#1', 2]]);
    expect(await one.heartbeat('a', 1, 60)).toEqual([]);
  });

  it('move: refused for an unknown or down target, an unknown work item, or the holder itself', async () => {
    await one.register(info('a'));
    await two.register(info('b'));
    await one.register(info('c'));
    await one.acquire('o/r#1', 'a', 1, 60);
    expect(await one.move('o/r#1', 'zz')).toBe(false);
    expect(await one.move('o/r#404', 'b')).toBe(false);
    expect(await one.move('o/r#1', 'a')).toBe(false);
    await one.leave('c', 1);
    expect(await one.move('o/r#1', 'c')).toBe(false);
    expect((await one.lease('o/r#1'))?.draining).toBe(false);
  });

  it('a moved lease whose holder dies goes to the target only; an ended one is kept for the target', async () => {
    await one.register(info('a'));
    await two.register(info('b'));
    await one.register(info('c'));
    await one.acquire('o/r#1', 'a', 1, 1);
    await one.move('o/r#1', 'b');
    await sleep(1200);
    expect(await one.reapExpired(0)).toEqual([{ workItem: 'o/r#1', hostId: 'a', epoch: 1 }]);
    expect(await one.acquire('o/r#1', 'c', 1, 60)).toBeUndefined();
    expect(await two.acquire('o/r#1', 'b', 1, 60)).toMatchObject({ epoch: 2, movingTo: null });
    await two.release('o/r#1', 'b', 2);
    expect(await two.move('o/r#1', 'c')).toBe(true);
    expect(await one.lease('o/r#1')).toMatchObject({ ended: true, draining: false, movingTo: 'c' });
    expect(await two.acquire('o/r#1', 'b', 1, 60)).toBeUndefined();
    // The target gone: anyone may take it.
    await one.leave('c', 1);
    expect(await two.acquire('o/r#1', 'b', 1, 60)).toMatchObject({ epoch: 3, movingTo: null });
  });

  it('cancelMove: the holder keeps it, no longer draining; refused once landed or with no move', async () => {
    await one.register(info('a'));
    await two.register(info('b'));
    await one.acquire('o/r#1', 'a', 1, 60);
    expect(await one.cancelMove('o/r#1', 'a')).toBe(false);
    expect(await one.move('o/r#1', 'b')).toBe(true);
    expect(await two.cancelMove('o/r#1', 'b')).toBe(false);
    expect(await two.cancelMove('o/r#1', 'a')).toBe(true);
    expect((await one.heartbeat('a', 1, 60))?.[0]).toMatchObject({
      draining: false,
      movingTo: null,
      epoch: 1,
    });
    // Let go now: it ends (no target), it is not handed over.
    expect(await one.release('o/r#1', 'a', 1)).toBe(true);
    expect(await one.lease('o/r#1')).toMatchObject({ hostId: 'a', ended: true, movingTo: null });
    // Moved and landed: nothing to call off.
    await one.acquire('o/r#2', 'a', 1, 60);
    await one.move('o/r#2', 'b');
    await one.release('o/r#2', 'a', 1);
    expect(await one.cancelMove('o/r#2', 'a')).toBe(false);
    expect(await two.cancelMove('o/r#2', 'b')).toBe(false);
    expect(await one.lease('o/r#2')).toMatchObject({ hostId: 'b', epoch: 2, ended: false });
  });

  it('reservations: the ended leases kept for a move target, of the work items asked', async () => {
    await one.register(info('a'));
    await two.register(info('b'));
    for (const w of ['o/r#1', 'o/r#2', 'o/r#3']) await one.acquire(w, 'a', 1, 60);
    await one.move('o/r#1', 'b');
    await one.move('o/r#2', 'b');
    // #1 drains (still held: not a reservation); #2 ends while moving with its target down (kept).
    await two.leave('b', 1);
    await one.release('o/r#2', 'a', 1);
    await one.release('o/r#3', 'a', 1);
    expect(await one.reservations(['o/r#1', 'o/r#2', 'o/r#3', 'o/r#404'])).toEqual(new Map([['o/r#2', 'b']]));
    expect(await one.reservations([])).toEqual(new Map());
    // An ended lease moved: kept for the target.
    expect(await one.move('o/r#3', 'a')).toBe(true);
    expect(await two.reservations(['o/r#3'])).toEqual(new Map([['o/r#3', 'a']]));
  });

  it('a lease row is never deleted: the epoch cannot go back', async () => {
    await one.register(info('a'));
    await one.acquire('o/r#1', 'a', 1, 60);
    await expect(db().run('DELETE FROM leases WHERE work_item = $1', ['o/r#1'])).rejects.toThrow(
      /never deleted/,
    );
    expect((await one.lease('o/r#1'))?.epoch).toBe(1);
  });
});

describe('PgHostStore: only the database clock', () => {
  it('a host whose clock is an hour ahead (or behind) still holds and renews its lease', async () => {
    await one.register(info('a'));
    vi.useFakeTimers({ toFake: ['Date'] });
    for (const skew of [3_600_000, -3_600_000]) {
      vi.setSystemTime(new Date(Date.now() + skew));
      const lease = await one.acquire(`o/r#${skew}`, 'a', 1, 2);
      expect(lease).toBeDefined();
      // By this host's clock the lease is an hour past (or an hour ahead): it does not matter.
      const offBy = Date.parse(lease?.expiresAt ?? '') - Date.now();
      expect(Math.abs(offBy + skew)).toBeLessThan(60_000);
      expect(await one.holds(`o/r#${skew}`, 'a', 1)).toBe(true);
      const renewed = await one.heartbeat('a', 1, 2);
      expect(renewed?.map((l) => l.workItem)).toContain(`o/r#${skew}`);
      expect(renewed?.every((l) => l.epoch === 1 && !l.ended)).toBe(true);
      expect(await one.reapExpired(0)).toEqual([]);
      expect(await one.markDown(1)).toEqual([]);
      const [a] = await one.list();
      expect(a?.silentSeconds).toBeLessThan(5);
      vi.setSystemTime(new Date(Date.now() - skew));
    }
  });

  it('the store reads no host clock (no Date.now, no new Date) for any decision', () => {
    const source = readFileSync(new URL('../../../src/store/postgres/hosts.ts', import.meta.url), 'utf8');
    expect(source).not.toMatch(/Date\.now|new Date\(|performance\.now|process\.hrtime/);
    expect(source).toMatch(/now\(\)/);
  });
});

describe('fencedBy', () => {
  it('a fenced write applies only under the current epoch of the current holder', async () => {
    await one.register(info('a'));
    await two.register(info('b'));
    await one.acquire('o/r#1', 'a', 1, 60);
    const write = `UPDATE hosts SET address = $5 WHERE id = $1 AND ${fencedBy('$2', '$3', '$4')}`;
    expect(await db().run(write, ['a', 'o/r#1', 'a', 1, 'fenced.example'])).toBe(1);
    expect(await db().run(write, ['a', 'o/r#1', 'b', 1, 'x'])).toBe(0);
    expect(await db().run(write, ['a', 'o/r#1', 'a', 2, 'x'])).toBe(0);
    await one.release('o/r#1', 'a', 1);
    await two.acquire('o/r#1', 'b', 1, 60);
    expect(await db().run(write, ['a', 'o/r#1', 'a', 1, 'stale'])).toBe(0);
    expect((await one.list())[0]?.address).toBe('fenced.example');
  });

  it('with lock: a take-over waits for the fenced write to commit, and the stale write after it applies nothing', async () => {
    await one.register(info('a'));
    await two.register(info('b'));
    await one.acquire('o/r#1', 'a', 1, 60);
    const write = `UPDATE hosts SET address = $5 WHERE id = $1 AND ${fencedBy('$2', '$3', '$4', { lock: true })}`;
    let finish: () => void = () => {};
    const held = new Promise<void>((go) => {
      finish = go;
    });
    let wrote = 0;
    const tx = db().tx(async (q) => {
      wrote = await q.run(write, ['a', 'o/r#1', 'a', 1, 'in-tx.example']);
      await held;
    });
    await sleep(100);
    let released = false;
    const release = two.release('o/r#1', 'a', 1).then((r) => {
      released = true;
      return r;
    });
    await sleep(300);
    expect(released).toBe(false);
    finish();
    await tx;
    expect(await release).toBe(true);
    expect(wrote).toBe(1);
    expect(await db().run(write, ['a', 'o/r#1', 'a', 1, 'stale.example'])).toBe(0);
    expect((await one.list())[0]?.address).toBe('in-tx.example');
  });

  it('takes placeholders only, never values', () => {
    expect(() => fencedBy("'o/r#1'", '$2', '$3')).toThrow(/placeholders/);
    expect(fencedBy('$1', '$2', '$3')).toMatch(/^EXISTS \(SELECT 1 FROM leases WHERE work_item = \$1/);
  });
});
