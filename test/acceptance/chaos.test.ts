/**
 * Chaos (issue 17, Accepted when): three daemons — separate processes, one PostgreSQL database,
 * host ids host-a, host-b, host-c, each its own directory — behind one round-robin proxy; 2,000
 * signed deliveries over 50 work items, 20 % of them resent with the same id. While they run,
 * host-b is SIGKILLed in the middle of a turn (its engines with it: the machine died), and host-c's
 * database connection (a TCP proxy) is cut for twice the lease, then restored.
 *
 * Afterwards, read straight from PostgreSQL: every valid delivery stored once; exactly one turn per
 * runnable delivery; order kept per work item (as sent, as stored, as run); the killed host's running
 * turn interrupted and not run again; no stale-epoch write applied; and the fenced host stopped its
 * engines before its lease ended.
 *
 * THE_LOOP_CHAOS_SENDS (default 2000), THE_LOOP_CHAOS_FAULTS=0 (no kill, no cut) and
 * THE_LOOP_CHAOS_KEEP=1 (keep the hosts' directories and logs) are for debugging only.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { freshDatabase } from '../helpers/postgres.js';
import {
  backlog,
  cutMidTurn,
  type Fenced,
  type Killed,
  killMidTurn,
  settle,
  untilTurnsEnded,
} from './chaos-actions.js';
import {
  diagnoseStuck,
  killedTurnsInterrupted,
  noStaleEpoch,
  oneTurnEach,
  orderKept,
  routedAndSettled,
  snapshot,
  storedOnce,
  timings,
} from './chaos-checks.js';
import {
  type ChaosHost,
  killEngines,
  liveEngines,
  multiHostSettings,
  startHost,
  writeEngine,
} from './chaos-hosts.js';
import { type CuttableLink, cuttableLink, type RoundRobin, roundRobinProxy } from './chaos-proxy.js';
import { makePlan, playTraffic } from './chaos-traffic.js';

const SENDS = Number(process.env.THE_LOOP_CHAOS_SENDS ?? 2000);
const FAULTS = process.env.THE_LOOP_CHAOS_FAULTS !== '0';
const LEASE_SECONDS = 4;
const STORE = multiHostSettings({ leaseSeconds: LEASE_SECONDS, heartbeatSeconds: 0.5, capacity: 8 });
const TURN_SECONDS = 0.2;
const BACKLOG = 150;

describe('chaos: three daemons on one PostgreSQL behind one address', () => {
  let root: string;
  let database: Awaited<ReturnType<typeof freshDatabase>>;
  let client: pg.Client;
  let link: CuttableLink;
  let proxy: RoundRobin;
  const hosts: ChaosHost[] = [];
  const log = (message: string) => process.stderr.write(`[chaos ${new Date().toISOString()}] ${message}\n`);

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'the-loop-chaos-'));
    database = await freshDatabase();
    client = new pg.Client({ connectionString: database.url });
    await client.connect();
    const direct = new URL(database.url);
    link = await cuttableLink({ host: direct.hostname, port: Number(direct.port) });
    const throughLink = new URL(database.url);
    throughLink.port = String(link.port);
    const engine = writeEngine(root);
    const base = { root, engine, turnSeconds: TURN_SECONDS, store: STORE, concurrency: 8 };
    // One after another: three daemons migrating and registering at once is tested elsewhere.
    hosts.push(await startHost({ ...base, id: 'host-a', databaseUrl: database.url }));
    hosts.push(await startHost({ ...base, id: 'host-b', databaseUrl: database.url }));
    hosts.push(await startHost({ ...base, id: 'host-c', databaseUrl: throughLink.toString() }));
    proxy = await roundRobinProxy(hosts.map((h) => new URL(h.daemon.webhookUrl).origin));
    log(`hosts up in ${root} on ${database.name} (multi-host settings: ${JSON.stringify(STORE)})`);
  }, 120_000);

  afterAll(async () => {
    await proxy?.close();
    await link?.restore().catch(() => {});
    await Promise.all(hosts.map((h) => h.daemon.stop()));
    for (const h of hosts) killEngines(h);
    await link?.close();
    await client?.end();
    await database?.drop();
    if (root && !process.env.THE_LOOP_CHAOS_KEEP) rmSync(root, { recursive: true, force: true });
  }, 60_000);

  it('keeps every delivery once, one turn each, in order, through a host killed and a host cut off', async () => {
    const started = Date.now();
    const [a, b, c] = hosts as [ChaosHost, ChaosHost, ChaosHost];
    const plan = makePlan({ seed: 17, total: SENDS, issues: 50, duplicateShare: 0.2, ignoredEvery: 20 });
    const runnable = plan.unique.filter((d) => d.runnable).length;
    const path = new URL(a.daemon.webhookUrl).pathname;
    // GitHub sends as things happen, not all at once: a sender waits (up to 3 s) while more than
    // BACKLOG deliveries wait to run (each dispatch pass reads the whole queue).
    let waiting = 0;
    const counting = setInterval(() => {
      backlog(client).then(
        (n) => {
          waiting = n;
        },
        () => {},
      );
    }, 250);
    const gate = async () => {
      const until = Date.now() + 3000;
      while (waiting > BACKLOG && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
    };
    const traffic = playTraffic(`${proxy.url}${path}`, plan, { paceMs: 20, inFlight: 24, gate });
    traffic.done.catch(() => {});

    let killed: Killed | undefined;
    let fenced: Fenced | undefined;
    if (FAULTS) {
      await untilTurnsEnded(client, Math.floor(runnable * 0.2));
      killed = await killMidTurn(client, b);
      log(`killed host-b mid-turn: turns ${killed.turnIds.join(', ')} on ${killed.workItems.join(', ')}`);
      await untilTurnsEnded(client, Math.floor(runnable * 0.45));
      // Cut for longer than the lease and its grace (a lease expired for as long again is taken from
      // its holder): another host takes host-c's work items while it is away.
      fenced = await cutMidTurn(client, c, link, LEASE_SECONDS * 2.5);
      log(`host-c cut off and back: ${JSON.stringify(fenced)}`);
    }
    const result = await traffic.done.finally(() => clearInterval(counting));
    log(
      `all ${result.sendsDone} sends acknowledged (${result.retries} resent after 5xx/no answer); handed ${proxy.handed.join('/')}`,
    );
    // A person resumes each session held after its host died mid-turn (store.onHostLoss: hold): its
    // later deliveries wait until then, and run on the host that took it.
    const resumed = new Set<string>();
    const settled = await settle(client, 150_000, 30_000, () => resumeHeld(client, a, resumed));
    log(`resumed after a host died: ${[...resumed].join(', ') || 'none'}`);
    log(`${settled} after ${((Date.now() - started) / 1000).toFixed(1)} s`);

    if (settled !== 'settled')
      log(
        await diagnoseStuck(
          client,
          hosts.map((h) => ({ host: h.id, path: join(h.dir, 'data', 'the-loop.log') })),
        ),
      );
    const s = await snapshot(client);
    log(`timings: ${await timings(client)} (hosts ${hosts.map((h) => `${h.id}=${h.pid}`).join(', ')})`);
    const hostOfPid = new Map(hosts.map((h) => [h.pid, h.id]));
    const verdicts: Record<string, string[]> = {
      settled: settled === 'settled' ? [] : [settled],
      storedOnce: storedOnce(s, plan, result),
      routedAndSettled: routedAndSettled(s, plan),
      oneTurnEach: oneTurnEach(s),
      orderKept: orderKept(s, plan, result),
      noStaleEpoch: noStaleEpoch(s, hostOfPid),
    };
    if (killed) {
      verdicts.killedTurnInterrupted = killedTurnsInterrupted(s, killed.turnIds, killed.at, b.pid);
      verdicts.killedSessionsHeld = killed.workItems
        .filter((w) => !resumed.has(w))
        .map((w) => `${w}: its session was not held after host-b died mid-turn`);
    }
    if (fenced) verdicts.fencedHostStoppedEngines = fencedVerdict(s, fenced);
    verdicts.enginesLeft = [a, c].flatMap((h) =>
      liveEngines(h).map((e) => `${h.id} engine ${e.pid} still alive`),
    );
    log(
      `turns ${s.turns.length} (${s.turns.filter((t) => t.status !== 'succeeded').length} not succeeded), deliveries ${s.deliveries.length}, runnable ${runnable}`,
    );
    const unsuccessful = s.turns.filter((t) => t.status !== 'succeeded');
    log(
      `not succeeded: ${unsuccessful.map((t) => `${t.id} ${t.host_id}@${t.epoch} ${t.work_item} ${t.status}/${t.end_reason}`).join('; ')}`,
    );
    expect(verdicts).toEqual(Object.fromEntries(Object.keys(verdicts).map((k) => [k, []])));
  }, 240_000);
});

/** Resume (the CLI, as a person does) each session held `interrupted` not resumed yet. */
async function resumeHeld(client: pg.Client, host: ChaosHost, resumed: Set<string>): Promise<void> {
  const held = await client.query<{ work_item: string }>(
    `SELECT work_item FROM sessions WHERE status = 'active' AND hold::jsonb ->> 'kind' = 'interrupted'`,
  );
  for (const { work_item: workItem } of held.rows) {
    const r = await runCli(['sessions', 'resume', workItem], {
      cwd: host.dir,
      env: { THE_LOOP_CONFIG: join(host.dir, 'config.yaml'), THE_LOOP_DATABASE_URL: host.databaseUrl },
    });
    if (r.code !== 0) throw new Error(`sessions resume ${workItem} failed: ${r.stderr}`);
    resumed.add(workItem);
  }
}

/**
 * The fenced host: every engine alive when it was cut off was gone before its lease ended; the turns
 * it was running then did not succeed (their engines were stopped), and one whose work item another
 * host took meanwhile (a larger epoch) is the reaper's `interrupted`, its delivery failed: nothing
 * host-c wrote with its stale epoch after it came back changed them.
 */
function fencedVerdict(s: Awaited<ReturnType<typeof snapshot>>, fenced: Fenced): string[] {
  const wrong: string[] = [];
  if (fenced.turnIds.length === 0) wrong.push('no turn was running on host-c when it was cut off');
  const deadline = fenced.leaseEndMs ?? LEASE_SECONDS * 1000;
  fenced.engineGoneMs.forEach((ms, i) => {
    if (ms === null) wrong.push(`engine ${i} of host-c still alive ${fenced.cutMs} ms after the cut`);
    else if (ms > deadline)
      wrong.push(
        `engine ${i} of host-c stopped ${ms} ms after the cut, after its lease ended (${deadline} ms)`,
      );
  });
  for (const id of fenced.turnIds) {
    const t = s.turns.find((x) => x.id === id);
    // Seen running just before the cut, its engine had already ended and its end was written while
    // the link still held: that write was in time (a later one would be stale, and change nothing).
    const endedBeforeCut = t?.ended_at != null && Date.parse(t.ended_at) < fenced.cutAt;
    if (t?.status === 'succeeded' && endedBeforeCut) continue;
    if (!t || t.status === 'running' || t.status === 'succeeded') {
      wrong.push(`host-c's turn ${id} cut off mid-run is ${t?.status}/${t?.end_reason}`);
      continue;
    }
    const lease = s.leases.find((l) => l.work_item === t.work_item);
    const taken = lease !== undefined && t.epoch != null && lease.epoch > t.epoch;
    const d = s.deliveries.find((x) => x.id === t.delivery_id);
    if (taken && (t.end_reason !== 'interrupted' || d?.status !== 'failed'))
      wrong.push(
        `host-c's turn ${id} (work item taken over) is ${t.status}/${t.end_reason}, its delivery ${d?.status}`,
      );
  }
  return wrong;
}
