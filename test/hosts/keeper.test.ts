/**
 * The lease keeper against PostgreSQL: heartbeats renew, self-fencing when the database is out of
 * reach for half the lease (the keeper's pool goes through a TCP proxy the test blocks) and the
 * recovery after, the reaper settling a dead host's work item once, placement taking the lease only
 * for the least-loaded fit, and letting go of what has nothing left to run.
 */
import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Abandoned, HostInfo } from '../../src/core/ports/hosts.js';
import type { PlacementNeeds } from '../../src/dispatch/placement-rules.js';
import { type KeeperWiring, LeaseKeeper } from '../../src/hosts/keeper.js';
import { nullLogger } from '../../src/log/logger.js';
import { PgHostStore } from '../../src/store/postgres/hosts.js';
import { openPg } from '../../src/store/postgres/migrate.js';
import type { Pg } from '../../src/store/postgres/pg.js';
import { freshDatabase } from '../helpers/postgres.js';

/** A TCP proxy to the cluster that can be blocked (every connection cut, new ones refused) and opened. */
interface Proxy {
  port: number;
  block(): void;
  open(): void;
  close(): Promise<void>;
}

async function startProxy(target: URL): Promise<Proxy> {
  let blocked = false;
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    if (blocked) {
      client.destroy();
      return;
    }
    const upstream = tcpConnect(Number(target.port), target.hostname);
    sockets.add(client).add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((go) => server.listen(0, '127.0.0.1', go));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    port,
    block: () => {
      blocked = true;
      for (const s of sockets) s.destroy();
      sockets.clear();
    },
    open: () => {
      blocked = false;
    },
    close: async () => {
      blocked = true;
      for (const s of sockets) s.destroy();
      await new Promise<void>((go) => server.close(() => go()));
    },
  };
}

let pools: Pg[] = [];
let drop: () => Promise<void>;
let proxy: Proxy;
let direct: PgHostStore;
const keepers: LeaseKeeper[] = [];

beforeEach(async () => {
  const database = await freshDatabase();
  drop = database.drop;
  proxy = await startProxy(new URL(database.url));
  const viaProxy = new URL(database.url);
  viaProxy.port = String(proxy.port);
  pools = [
    await openPg(database.url, { max: 4 }),
    await openPg(viaProxy.toString(), { max: 4, connectTimeoutMs: 500, statementTimeoutMs: 2000 }),
  ];
  direct = new PgHostStore(pools[0] as Pg);
});

afterEach(async () => {
  for (const k of keepers.splice(0)) k.stop();
  for (const db of pools.splice(0)) await db.close();
  await proxy.close();
  await drop();
});

const sleep = (ms: number) => new Promise((go) => setTimeout(go, ms));
const info = (over: Partial<Omit<HostInfo, 'id'>> = {}): Omit<HostInfo, 'id'> => ({
  labels: [],
  engines: ['claude'],
  capacity: 2,
  address: null,
  ...over,
});

function wiring(over: Partial<KeeperWiring> = {}): KeeperWiring {
  return {
    info: info(),
    logger: nullLogger,
    needsOf: async (): Promise<PlacementNeeds> => ({ engine: 'claude', labels: [] }),
    hasActiveSession: async () => false,
    onFenced: vi.fn(),
    interruptAbandoned: vi.fn(async () => {}),
    ...over,
  };
}

/** A keeper over the proxied pool (its database can be made unreachable). */
function keeper(host: string, settings: { leaseSeconds?: number; heartbeatSeconds?: number } = {}) {
  const k = new LeaseKeeper(new PgHostStore(pools[1] as Pg), {
    host,
    leaseSeconds: settings.leaseSeconds ?? 3,
    heartbeatSeconds: settings.heartbeatSeconds ?? 0.25,
    graceSeconds: 0.5,
    reapEvery: 1000,
  });
  keepers.push(k);
  return k;
}

async function until(check: () => boolean | Promise<boolean>, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await sleep(50);
  }
}

describe('LeaseKeeper', () => {
  it('registers, takes a lease placement gives it, and renews it with each heartbeat', async () => {
    const k = keeper('a');
    await k.start(wiring());
    expect((await direct.list()).map((h) => [h.id, h.status, h.incarnation])).toEqual([['a', 'up', 1]]);
    const owned = await k.owned([{ workItem: 'o/r#1', deliveryId: 'd1' }]);
    expect([...owned]).toEqual(['o/r#1']);
    expect(k.epochOf('o/r#1')).toBe(1);
    expect(k.epochOf('o/r#2')).toBeUndefined();
    const first = (await direct.lease('o/r#1'))?.expiresAt as string;
    await sleep(600);
    const later = (await direct.lease('o/r#1'))?.expiresAt as string;
    expect(Date.parse(later)).toBeGreaterThan(Date.parse(first));
    expect(await direct.holds('o/r#1', 'a', 1)).toBe(true);
    await k.leave();
    expect((await direct.list())[0]?.status).toBe('down');
    expect((await direct.lease('o/r#1'))?.ended).toBe(true);
  });

  it('fences itself when the database is out of reach for half the lease, and recovers after', async () => {
    const onFenced = vi.fn();
    const k = keeper('a', { leaseSeconds: 3 });
    await k.start(wiring({ onFenced }));
    await k.owned([{ workItem: 'o/r#1', deliveryId: 'd1' }]);
    expect(k.epochOf('o/r#1')).toBe(1);
    proxy.block();
    const blockedAt = Date.now();
    await until(() => onFenced.mock.calls.length > 0, 4000);
    // Not before half the lease (1.5 s), and well before the lease ends.
    expect(Date.now() - blockedAt).toBeGreaterThanOrEqual(1200);
    expect(Date.now() - blockedAt).toBeLessThan(3000);
    expect(k.isFenced()).toBe(true);
    expect(k.epochOf('o/r#1')).toBeUndefined();
    expect((await k.owned([{ workItem: 'o/r#1', deliveryId: 'd1' }])).size).toBe(0);
    proxy.open();
    await until(() => !k.isFenced(), 5000);
    // Its lease expired meanwhile but was not reaped: the heartbeat renewed it, at the same epoch.
    expect(k.epochOf('o/r#1')).toBe(1);
    expect(await direct.holds('o/r#1', 'a', 1)).toBe(true);
    expect(onFenced).toHaveBeenCalledTimes(1);
  });

  it('registers anew when its registration is gone (marked down), fencing first', async () => {
    const onFenced = vi.fn();
    const k = keeper('a', { leaseSeconds: 3, heartbeatSeconds: 60 });
    await k.start(wiring({ onFenced }));
    await k.owned([{ workItem: 'o/r#1', deliveryId: 'd1' }]);
    await direct.leave('a', 1);
    await k.heartbeat();
    expect(onFenced).toHaveBeenCalledTimes(1);
    expect(k.isFenced()).toBe(false);
    expect(k.epochOf('o/r#1')).toBeUndefined();
    const [row] = await direct.list();
    expect([row?.status, row?.incarnation]).toEqual(['up', 2]);
  });

  it("reaps a dead host's expired lease and settles its work item once", async () => {
    await direct.register({ id: 'dead', ...info() });
    await direct.acquire('o/r#9', 'dead', 1, 0.2);
    const interruptAbandoned = vi.fn(async (_: Abandoned) => {});
    const k = keeper('a', { heartbeatSeconds: 60 });
    await k.start(wiring({ interruptAbandoned }));
    await sleep(900);
    expect(await k.reap()).toEqual([{ workItem: 'o/r#9', hostId: 'dead', epoch: 1 }]);
    expect(await k.reap()).toEqual([]);
    expect(interruptAbandoned).toHaveBeenCalledTimes(1);
    expect(interruptAbandoned).toHaveBeenCalledWith({ workItem: 'o/r#9', hostId: 'dead', epoch: 1 });
    // Ended: a live host may take it now, with the next epoch.
    expect([...(await k.owned([{ workItem: 'o/r#9', deliveryId: 'd9' }]))]).toEqual(['o/r#9']);
    expect(k.epochOf('o/r#9')).toBe(2);
  });

  it('reaping through reapAbandoned: a work item that failed to settle is logged, the settled ones reported', async () => {
    const errors: Array<[string, unknown]> = [];
    const logger = { ...nullLogger, error: (m: string, f?: unknown) => errors.push([m, f]) };
    const settled = { workItem: 'o/r#1', hostId: 'dead', epoch: 1 };
    const failed = { workItem: 'o/r#2', hostId: 'dead', epoch: 3 };
    const reapAbandoned = vi.fn(
      async (_grace: number, onFailed?: (a: Abandoned, error: unknown) => void): Promise<Abandoned[]> => {
        onFailed?.(failed, new Error('refused'));
        return [settled];
      },
    );
    const onReaped = vi.fn();
    const k = keeper('a', { heartbeatSeconds: 60 });
    await k.start(wiring({ logger, reapAbandoned, onReaped }));
    expect(await k.reap()).toEqual([settled]);
    expect(reapAbandoned).toHaveBeenCalledWith(0.5, expect.any(Function));
    expect(onReaped).toHaveBeenCalledTimes(1);
    expect(errors).toEqual([
      [
        expect.stringMatching(/^settling an abandoned work item failed/),
        { ...failed, error: new Error('refused') },
      ],
    ]);
  });

  it('settles the stranded deliveries of a work item it holds, under the epoch it holds; nothing of one it does not', async () => {
    const warned: string[] = [];
    const logger = { ...nullLogger, warn: (m: string) => warned.push(m) };
    const settleStranded = vi.fn(async (_: Abandoned) => ({
      turns: [7],
      failed: ['d1'],
      settled: [],
      requeued: ['d2'],
    }));
    const k = keeper('a', { heartbeatSeconds: 60 });
    await k.start(wiring({ logger, settleStranded }));
    await k.owned([{ workItem: 'o/r#1', deliveryId: 'd1' }]);
    expect(await k.settleStranded('o/r#1')).toBe(2);
    expect(settleStranded).toHaveBeenCalledWith({ workItem: 'o/r#1', hostId: 'a', epoch: 1 });
    expect(warned).toContain('deliveries left running with no turn here were settled');
    expect(await k.settleStranded('o/r#2')).toBe(0);
    expect(settleStranded).toHaveBeenCalledTimes(1);
  });

  it('takes a lease only where it is the least-loaded host that fits', async () => {
    await direct.register({ id: 'b', ...info({ labels: ['tmux'] }) });
    await direct.acquire('o/r#0', 'b', 1, 30);
    const tmux = new Set(['d2']);
    const k = keeper('k', { heartbeatSeconds: 60 });
    await k.start(
      wiring({
        needsOf: async (id) => ({ engine: 'claude', labels: tmux.has(id) ? ['tmux'] : [] }),
      }),
    );
    const owned = await k.owned([
      { workItem: 'o/r#1', deliveryId: 'd1' }, // k: 0/2, b: 1/2 → k
      { workItem: 'o/r#2', deliveryId: 'd2' }, // tmux: only b fits
      { workItem: 'o/r#3', deliveryId: 'd3' }, // k 1/2 = b 1/2, b first by id
    ]);
    expect([...owned]).toEqual(['o/r#1']);
    expect(await direct.lease('o/r#2')).toBeUndefined();
    expect(await direct.lease('o/r#3')).toBeUndefined();
    // A lease another host holds is not taken, whatever the placement says; once it let go, it is.
    await direct.acquire('o/r#4', 'b', 1, 30);
    expect((await k.owned([{ workItem: 'o/r#4', deliveryId: 'd4' }])).size).toBe(0);
    await direct.leave('b', 1);
    expect((await k.owned([{ workItem: 'o/r#4', deliveryId: 'd4' }])).size).toBe(1);
  });

  it('lets go of a work item with nothing pending, running or active, and keeps the others', async () => {
    const active = new Set(['o/r#2']);
    const k = keeper('a', { heartbeatSeconds: 60 });
    await k.start(wiring({ hasActiveSession: async (w) => active.has(w) }));
    const all = ['o/r#1', 'o/r#2', 'o/r#3', 'o/r#4'].map((workItem, i) => ({
      workItem,
      deliveryId: `d${i}`,
    }));
    expect((await k.owned(all)).size).toBe(4);
    await k.settle({ pending: new Set(['o/r#3']), running: new Set(['o/r#4']) });
    expect(k.epochOf('o/r#1')).toBeUndefined();
    expect((await direct.lease('o/r#1'))?.ended).toBe(true);
    for (const kept of ['o/r#2', 'o/r#3', 'o/r#4']) expect(k.holds(kept)).toBe(true);
  });
});
