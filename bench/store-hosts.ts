/**
 * The `hosts` section of bench/store.ts (issue 17): three hosts sharing the PostgreSQL store versus
 * one, the real daemon (`node bin/the-loop.js serve`, dist/) on each, a fake engine whose turn takes
 * BENCH_HOSTS_TURN_MS (test/fixtures/bin/fake-engine.mjs, FAKE_ENGINE_SLEEP_MS; BENCH_HOSTS_ENGINE=sh:
 * the chaos test's shell engine instead, without a node start per turn) and
 * `dispatch.concurrency` BENCH_HOSTS_CONCURRENCY per host. Goal: three hosts sustain ≥ 2.5× one
 * host's turns per second.
 *
 * Each run gets a database of its own (the one host first, then the three: separate processes,
 * host ids host-a/b/c, the same config but `store.host`, started one after another). All the load is
 * sent up front, signed `issue_comment.created` webhooks mentioning @the-loop (each starts or
 * continues its work item's session): BENCH_HOSTS_ITEMS work items × BENCH_HOSTS_TURNS deliveries
 * each, a work item's deliveries one after another, the hosts taken round-robin. The run ends when
 * every delivery is settled; the figures are read from PostgreSQL (turns: host_id, started_at,
 * ended_at): turns/s from the BENCH_HOSTS_SKIP-th turn ended to the last (the ramp left out), the
 * same over the whole run, each host's turns, leases and CPU, how busy the slots were (Σ turn time /
 * (hosts × concurrency × span)), how long a freed slot waited for its next turn (the claim loop),
 * the database's commits and WAL flushes per turn, and how busy the machine was (/proc/stat).
 * BENCH_HOSTS_LOGS=<dir> keeps each daemon's output there. Figures: bench/store-hosts-figures.ts.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { stringify } from 'yaml';
import { signBody } from '../src/github/verify.js';
import { writeEngine } from '../test/acceptance/chaos-hosts.js';
import { fakeEngineConfig } from '../test/helpers/cli.js';
import { type DaemonProcess, fixture, startDaemonProcess } from '../test/helpers/daemon.js';
import type { Cluster } from '../test/helpers/postgres.js';
import { createDatabase } from './store-claims.js';
import { stopChild } from './store-client.js';
import {
  cpuSeconds,
  figuresOf,
  HOSTS_CONCURRENCY,
  HOSTS_ENGINE,
  HOSTS_ITEMS,
  HOSTS_TURN_MS,
  HOSTS_TURNS,
  type HostsRun,
  machineTicks,
  storeStats,
  type TurnRow,
} from './store-hosts-figures.js';

export { type HostsRun, reportHosts } from './store-hosts-figures.js';

const IN_FLIGHT = 16;
const SECRET = 'bench-hosts-webhook-secret-0123456789abcdef';

export interface HostsBench {
  tmp: string;
  cluster: Cluster;
  /** Children to kill on an interrupt. */
  children: ChildProcess[];
}

/** The engine's part of the config: the node fake engine, or the chaos test's shell engine. */
function engineConfig(dir: string, root: string): Record<string, unknown> {
  const engineState = join(dir, 'engine-state');
  if (HOSTS_ENGINE === 'node')
    return fakeEngineConfig(engineState, {
      passEnv: [],
      env: { FAKE_ENGINE_STATE: engineState, FAKE_ENGINE_SLEEP_MS: String(HOSTS_TURN_MS) },
    });
  mkdirSync(join(dir, 'engine-pids'), { recursive: true });
  return fakeEngineConfig(engineState, {
    binary: writeEngine(root),
    passEnv: [],
    env: {
      CHAOS_ENGINE_PIDS: join(dir, 'engine-pids'),
      CHAOS_ENGINE_SLEEP: String(HOSTS_TURN_MS / 1000),
      CHAOS_ENGINE_SLOW: join(dir, 'never'),
    },
  });
}

function hostConfig(id: string, dir: string, root: string): Record<string, unknown> {
  const base = engineConfig(dir, root);
  const repo = join(root, 'widgets');
  return {
    ...base,
    // Any free port, the gateway's socket in this host's directory (hosts side by side).
    gateway: { port: 0, socket: join(dir, 'gateway', 'gh.sock') },
    dataDir: 'data',
    store: { kind: 'postgres', url: 'env:THE_LOOP_DATABASE_URL', host: id },
    webhook: { secret: SECRET },
    routing: { triggers: { labels: ['the-loop'] } },
    // One repository path for every host (the same config everywhere, as in a real fleet).
    repos: { 'acme/widgets': { path: repo } },
    dispatch: { concurrency: HOSTS_CONCURRENCY },
  };
}

async function startHost(b: HostsBench, id: string, root: string, url: string): Promise<DaemonProcess> {
  const dir = join(root, id);
  const repo = join(root, 'widgets');
  for (const d of [dir, repo]) mkdirSync(d, { recursive: true });
  writeFileSync(join(dir, 'config.yaml'), stringify(hostConfig(id, dir, root)), { mode: 0o600 });
  const daemon = await startDaemonProcess({
    cwd: dir,
    env: {
      THE_LOOP_CONFIG: join(dir, 'config.yaml'),
      THE_LOOP_DATABASE_URL: url,
      XDG_STATE_HOME: join(b.tmp, 'state'),
    },
    timeoutMs: 60_000,
  });
  b.children.push(daemon.child);
  return daemon;
}

const TEMPLATE = fixture('issue_comment.created') as {
  issue: { number: number; url: string; html_url: string };
  comment: { id: number; body: string; html_url: string };
};

function payload(issue: number, n: number): Buffer {
  const p = structuredClone(TEMPLATE);
  p.issue.number = issue;
  p.issue.url = `https://api.github.com/repos/acme/widgets/issues/${issue}`;
  p.issue.html_url = `https://github.com/acme/widgets/issues/${issue}`;
  p.comment.id = 5_000_000_000 + n;
  p.comment.html_url = `${p.issue.html_url}#issuecomment-${p.comment.id}`;
  p.comment.body = `@the-loop please look at this (bench ${n})`;
  return Buffer.from(JSON.stringify(p));
}

async function post(url: string, id: string, body: Buffer): Promise<void> {
  const res = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-github-event': 'issue_comment',
      'x-github-delivery': id,
      'x-hub-signature-256': signBody(SECRET, body),
      'user-agent': 'GitHub-Hookshot/bench',
    },
    body,
    signal: AbortSignal.timeout(30_000),
  });
  const text = await res.text();
  if (res.status !== 202) throw new Error(`delivery ${id}: HTTP ${res.status} ${text.slice(0, 200)}`);
}

/**
 * Every delivery up front: round by round (a work item's next delivery only after its previous one
 * was acknowledged, so its order is the order sent), IN_FLIGHT at once, the hosts round-robin.
 */
async function sendAll(urls: string[], runId: string): Promise<void> {
  let n = 0;
  for (let round = 0; round < HOSTS_TURNS; round++) {
    let next = 0;
    const worker = async () => {
      while (next < HOSTS_ITEMS) {
        const issue = 1 + next++;
        const k = n++;
        await post(urls[k % urls.length] as string, `${runId}-${round}-${issue}`, payload(issue, k));
      }
    };
    await Promise.all(Array.from({ length: Math.min(IN_FLIGHT, HOSTS_ITEMS) }, worker));
  }
}

/** Wait until every delivery is settled (done or failed); a clear error when the run stalls. */
async function untilSettled(client: pg.Client, total: number, hosts: DaemonProcess[]): Promise<void> {
  const expected = ((total / (hosts.length * HOSTS_CONCURRENCY)) * HOSTS_TURN_MS) / 1000;
  const deadline = Date.now() + (expected * 4 + 60) * 1000;
  for (;;) {
    const r = await client.query(
      "SELECT COUNT(*) FILTER (WHERE status IN ('done', 'failed'))::int AS settled FROM deliveries",
    );
    const settled = (r.rows[0] as { settled: number }).settled;
    if (settled >= total) return;
    if (Date.now() > deadline) {
      const logs = hosts.map((h) => h.output().slice(-3000)).join('\n---\n');
      throw new Error(`only ${settled} of ${total} deliveries settled in time\n${logs}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** One run: `count` hosts on a database of their own, the whole load, the figures. */
async function runHosts(b: HostsBench, count: number): Promise<HostsRun> {
  const database = await createDatabase(b.cluster, `hosts${count}`);
  const root = join(b.tmp, `hosts-${count}`);
  const ids = Array.from({ length: count }, (_, i) => `host-${String.fromCharCode(97 + i)}`);
  const daemons: DaemonProcess[] = [];
  const client = new pg.Client({ connectionString: database.url });
  try {
    // One after another, as the chaos test does (the first migrates the new database).
    for (const id of ids) daemons.push(await startHost(b, id, root, database.url));
    await client.connect();
    const cpuBefore = daemons.map((d) => cpuSeconds(d.child.pid));
    const ticksBefore = machineTicks();
    const statsBefore = await storeStats(client);
    const started = performance.now();
    await sendAll(
      daemons.map((d) => d.webhookUrl),
      `bench-${count}`,
    );
    const sendMs = performance.now() - started;
    await untilSettled(client, HOSTS_ITEMS * HOSTS_TURNS, daemons);
    const ticksAfter = machineTicks();
    // Backends report their statistics within a second of going idle.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const statsAfter = await storeStats(client);
    const stats = {
      commits: statsAfter.commits - statsBefore.commits,
      syncs: statsAfter.syncs - statsBefore.syncs,
    };
    const cpu = daemons.map((d, i) => cpuSeconds(d.child.pid) - (cpuBefore[i] ?? 0));
    const rows = (
      await client.query(
        `SELECT t.host_id, s.work_item, t.epoch::int, t.status, t.started_at, t.ended_at
           FROM turns t JOIN sessions s ON s.id = t.session_id`,
      )
    ).rows as TurnRow[];
    const machine = (ticksAfter.busy - ticksBefore.busy) / (ticksAfter.total - ticksBefore.total);
    return figuresOf(rows, ids, { cpu, machine, sendMs, stats });
  } finally {
    await client.end().catch(() => {});
    await Promise.all(daemons.map((d) => stopChild(d.child, 'SIGTERM')));
    // BENCH_HOSTS_LOGS=<dir>: keep each daemon's output there (debugging).
    const logs = process.env.BENCH_HOSTS_LOGS;
    if (logs) {
      mkdirSync(logs, { recursive: true });
      for (const [i, d] of daemons.entries()) writeFileSync(join(logs, `${count}-${ids[i]}.log`), d.output());
    }
    await database.drop();
  }
}

/** The section: one host, then three. */
export async function hostsSection(b: HostsBench): Promise<HostsRun[]> {
  const one = await runHosts(b, 1);
  const three = await runHosts(b, 3);
  return [one, three];
}
