/**
 * What the chaos test does to its hosts while deliveries flow: wait for progress, kill a host in the
 * middle of a turn, cut a host off the database for longer than its lease (watching its engines
 * stop), and wait for everything to settle.
 */
import { rmSync, writeFileSync } from 'node:fs';
import type pg from 'pg';
import { type ChaosHost, killHost, liveEngines } from './chaos-hosts.js';
import type { CuttableLink } from './chaos-proxy.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/** Turns ended so far (any outcome). */
export async function turnsEnded(client: pg.Client): Promise<number> {
  const r = await client.query("SELECT count(*)::int AS n FROM turns WHERE status <> 'running'");
  return (r.rows[0] as { n: number }).n;
}

/** Deliveries stored and not yet run. */
export async function backlog(client: pg.Client): Promise<number> {
  const r = await client.query(
    "SELECT count(*)::int AS n FROM deliveries WHERE status IN ('queued', 'running')",
  );
  return (r.rows[0] as { n: number }).n;
}

export const untilTurnsEnded = (client: pg.Client, n: number, timeoutMs = 120_000) =>
  until(`${n} turns ended`, async () => ((await turnsEnded(client)) >= n ? true : undefined), timeoutMs);

const runningTurnsOf = async (
  client: pg.Client,
  pid: number,
): Promise<Array<{ id: number; work_item: string }>> =>
  (
    await client.query(
      `SELECT t.id::int, s.work_item FROM turns t JOIN sessions s ON s.id = t.session_id
        WHERE t.status = 'running' AND t.owner_pid = $1 ORDER BY t.id`,
      [pid],
    )
  ).rows;

/**
 * Catch `host` in the middle of a turn: its turns begun from now take 30 s; wait until one of those
 * runs (its engine started, its turn row running). The slow file is removed again by the caller.
 */
async function midTurn(
  client: pg.Client,
  host: ChaosHost,
): Promise<Array<{ id: number; work_item: string }>> {
  const since = Date.now();
  writeFileSync(host.slowFile, '');
  return until(
    `a turn running on ${host.id}`,
    async () => {
      if (!liveEngines(host).some((e) => e.startedMs >= since - 5)) return undefined;
      const running = await runningTurnsOf(client, host.pid);
      return running.length > 0 ? running : undefined;
    },
    60_000,
  );
}

export interface Killed {
  at: string;
  turnIds: number[];
  workItems: string[];
}

/** SIGKILL `host` (daemon and engines) while it runs a turn; the turns it was running. */
export async function killMidTurn(client: pg.Client, host: ChaosHost): Promise<Killed> {
  await midTurn(client, host);
  const at = new Date().toISOString();
  await killHost(host);
  rmSync(host.slowFile, { force: true });
  const running = await runningTurnsOf(client, host.pid);
  return { at, turnIds: running.map((t) => t.id), workItems: running.map((t) => t.work_item) };
}

export interface Fenced {
  /** The turns running on the host when it was cut off. */
  turnIds: number[];
  /** Each engine alive at the cut: when it was seen gone (ms since the cut; null: never). */
  engineGoneMs: Array<number | null>;
  /** When the earliest of the host's leases ended, in ms since the cut (by the database's clock). */
  leaseEndMs: number | null;
  cutMs: number;
  /** When the link was cut (this machine's clock, ms since the epoch). */
  cutAt: number;
}

async function leaseEndMs(client: pg.Client, hostId: string, workItems: string[]): Promise<number | null> {
  try {
    const r = await client.query(
      `SELECT (extract(epoch FROM min(expires_at)) * 1000)::float8 AS ms FROM leases
        WHERE host_id = $1 AND work_item = ANY($2::text[])`,
      [hostId, workItems],
    );
    return (r.rows[0] as { ms: number | null }).ms;
  } catch {
    return null;
  }
}

/**
 * Cut `host` off the database while it runs a turn, for `seconds`; watch its engines (those alive at
 * the cut) stop, and read when its leases ended. The link is restored before this returns.
 */
export async function cutMidTurn(
  client: pg.Client,
  host: ChaosHost,
  link: CuttableLink,
  seconds: number,
): Promise<Fenced> {
  const running = await midTurn(client, host);
  const atCut = liveEngines(host);
  const cutAt = Date.now();
  await link.cut();
  rmSync(host.slowFile, { force: true });
  // A heartbeat that committed just before the cut is the last: read the lease after it.
  await sleep(200);
  const end = await leaseEndMs(
    client,
    host.id,
    running.map((t) => t.work_item),
  );
  const gone: Array<number | null> = atCut.map(() => null);
  while (Date.now() - cutAt < seconds * 1000) {
    const live = new Set(liveEngines(host).map((e) => e.pid));
    atCut.forEach((e, i) => {
      if (gone[i] === null && !live.has(e.pid)) gone[i] = Date.now() - cutAt;
    });
    await sleep(50);
  }
  await link.restore();
  return {
    turnIds: running.map((t) => t.id),
    engineGoneMs: gone,
    leaseEndMs: end === null ? null : end - cutAt,
    cutMs: seconds * 1000,
    cutAt,
  };
}

/**
 * Wait until nothing is queued or running (or nothing has changed for `stallMs`): whatever is left
 * is for the checks to report.
 */
export async function settle(
  client: pg.Client,
  timeoutMs: number,
  stallMs = 30_000,
  /** Called each round (a person acting meanwhile): what it changes counts as progress. */
  meanwhile?: () => Promise<void>,
): Promise<string> {
  const start = Date.now();
  let lastState = '';
  let lastChange = Date.now();
  for (;;) {
    await meanwhile?.();
    const r = await client.query(
      `SELECT (SELECT count(*) FROM deliveries WHERE status IN ('queued', 'running'))::int AS pending,
              (SELECT count(*) FROM turns WHERE status = 'running')::int AS running,
              (SELECT count(*) FROM turns)::int AS turns`,
    );
    const row = r.rows[0] as { pending: number; running: number; turns: number };
    if (row.pending === 0 && row.running === 0) return 'settled';
    const state = JSON.stringify(row);
    if (state !== lastState) {
      lastState = state;
      lastChange = Date.now();
    }
    if (Date.now() - lastChange > stallMs) return `stalled: ${state}`;
    if (Date.now() - start > timeoutMs) return `timed out: ${state}`;
    await sleep(250);
  }
}
