/**
 * The `hosts` section of bench/store.ts (issue 17): three hosts sharing the PostgreSQL store versus
 * one, the real daemon (`node bin/the-loop.js serve`, dist/) on each, a fake engine whose turn takes
 * BENCH_HOSTS_TURN_MS (test/fixtures/bin/fake-engine.mjs, FAKE_ENGINE_SLEEP_MS) and
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
 * same over the whole run, each host's turns, work items leased and CPU, how busy the slots were
 * (Σ turn time / (hosts × concurrency × span)), and how busy the machine was (/proc/stat).
 */
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { stringify } from 'yaml';
import { signBody } from '../src/github/verify.js';
import { fakeEngineConfig } from '../test/helpers/cli.js';
import { type DaemonProcess, fixture, startDaemonProcess } from '../test/helpers/daemon.js';
import type { Cluster } from '../test/helpers/postgres.js';
import { createDatabase } from './store-claims.js';
import { median, stopChild } from './store-client.js';

const knob = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
export const HOSTS_ITEMS = knob('BENCH_HOSTS_ITEMS', 60);
export const HOSTS_TURNS = knob('BENCH_HOSTS_TURNS', 2);
export const HOSTS_TURN_MS = knob('BENCH_HOSTS_TURN_MS', 1000);
export const HOSTS_CONCURRENCY = knob('BENCH_HOSTS_CONCURRENCY', 2);
const SKIP = knob('BENCH_HOSTS_SKIP', 10);
const GOAL = 2.5;
const IN_FLIGHT = 16;
const SECRET = 'bench-hosts-webhook-secret-0123456789abcdef';

export interface HostsBench {
  tmp: string;
  cluster: Cluster;
  /** Children to kill on an interrupt. */
  children: ChildProcess[];
}

export interface HostFigures {
  id: string;
  turns: number;
  /** Leases it ran turns under (a work item and an epoch each). */
  leased: number;
  /** CPU seconds its daemon used during the run (engines not included). */
  cpu: number;
  /** Its slots' busy share: Σ its turn times / (concurrency × span). */
  busy: number;
}

export interface HostsRun {
  hosts: number;
  turns: number;
  failed: number;
  /** Turns/s from the SKIP-th turn ended to the last. */
  rate: number;
  /** Turns/s from the first turn started to the last ended. */
  wholeRate: number;
  span: number;
  /** Median turn time (started → ended), ms. */
  turnMs: number;
  /** The slots' busy share: Σ turn times / (hosts × concurrency × span). */
  busy: number;
  perHost: HostFigures[];
  /** Work items whose turns ran on more than one host. */
  moved: number;
  /** Share of the machine's CPUs busy during the run (every process, not only the-loop's). */
  machine: number;
  sendMs: number;
}

interface TurnRow {
  host_id: string | null;
  work_item: string;
  epoch: number | null;
  status: string;
  started_at: string;
  ended_at: string | null;
}

/** Busy and total jiffies of the machine (the first line of /proc/stat). */
function machineTicks(): { busy: number; total: number } {
  const fields = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/).slice(1);
  const n = fields.map(Number);
  const total = n.reduce((sum, x) => sum + x, 0);
  return { busy: total - (n[3] ?? 0) - (n[4] ?? 0), total };
}

/** CPU seconds a process has used (utime + stime of /proc/<pid>/stat, at 100 ticks a second). */
function cpuSeconds(pid: number | undefined): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const after = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(after[11]) + Number(after[12])) / 100;
  } catch {
    return Number.NaN;
  }
}

function hostConfig(id: string, dir: string, repo: string): Record<string, unknown> {
  const engineState = join(dir, 'engine-state');
  const base = fakeEngineConfig(engineState, {
    passEnv: [],
    env: { FAKE_ENGINE_STATE: engineState, FAKE_ENGINE_SLEEP_MS: String(HOSTS_TURN_MS) },
  });
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
  writeFileSync(join(dir, 'config.yaml'), stringify(hostConfig(id, dir, repo)), { mode: 0o600 });
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

/** The figures of a run, from its turns. */
function figuresOf(
  rows: TurnRow[],
  ids: string[],
  extra: { cpu: number[]; machine: number; sendMs: number },
): HostsRun {
  const ms = (s: string | null) => (s ? Date.parse(s) : Number.NaN);
  const ended = rows.filter((t) => t.ended_at);
  const ends = ended.map((t) => ms(t.ended_at)).sort((x, y) => x - y);
  const first = Math.min(...rows.map((t) => ms(t.started_at)));
  const last = ends.at(-1) ?? Number.NaN;
  const span = (last - first) / 1000;
  const skip = ends.length > SKIP + 1 ? SKIP : 0;
  const from = ends[skip] ?? Number.NaN;
  const durations = ended.map((t) => ms(t.ended_at) - ms(t.started_at));
  const perHost = ids.map((id, i) => {
    const mine = ended.filter((t) => t.host_id === id);
    const sum = mine.reduce((s, t) => s + ms(t.ended_at) - ms(t.started_at), 0);
    return {
      id,
      turns: mine.length,
      leased: new Set(mine.map((t) => `${t.work_item} ${t.epoch}`)).size,
      cpu: extra.cpu[i] ?? Number.NaN,
      busy: sum / 1000 / (HOSTS_CONCURRENCY * span),
    };
  });
  const hostsOf = new Map<string, Set<string | null>>();
  for (const t of ended) hostsOf.set(t.work_item, (hostsOf.get(t.work_item) ?? new Set()).add(t.host_id));
  return {
    hosts: ids.length,
    moved: [...hostsOf.values()].filter((h) => h.size > 1).length,
    turns: ended.length,
    failed: rows.filter((t) => t.status !== 'succeeded').length,
    rate: (ends.length - 1 - skip) / ((last - from) / 1000),
    wholeRate: ended.length / span,
    span,
    turnMs: median(durations),
    busy: durations.reduce((s, x) => s + x, 0) / 1000 / (ids.length * HOSTS_CONCURRENCY * span),
    perHost,
    machine: extra.machine,
    sendMs: extra.sendMs,
  };
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
    const started = performance.now();
    await sendAll(
      daemons.map((d) => d.webhookUrl),
      `bench-${count}`,
    );
    const sendMs = performance.now() - started;
    await untilSettled(client, HOSTS_ITEMS * HOSTS_TURNS, daemons);
    const ticksAfter = machineTicks();
    const cpu = daemons.map((d, i) => cpuSeconds(d.child.pid) - (cpuBefore[i] ?? 0));
    const rows = (
      await client.query(
        `SELECT t.host_id, s.work_item, t.epoch::int, t.status, t.started_at, t.ended_at
           FROM turns t JOIN sessions s ON s.id = t.session_id`,
      )
    ).rows as TurnRow[];
    const machine = (ticksAfter.busy - ticksBefore.busy) / (ticksAfter.total - ticksBefore.total);
    return figuresOf(rows, ids, { cpu, machine, sendMs });
  } finally {
    await client.end().catch(() => {});
    await Promise.all(daemons.map((d) => stopChild(d.child, 'SIGTERM')));
    await database.drop();
  }
}

/** The section: one host, then three. */
export async function hostsSection(b: HostsBench): Promise<HostsRun[]> {
  const one = await runHosts(b, 1);
  const three = await runHosts(b, 3);
  return [one, three];
}

const f2 = (x: number) => x.toFixed(2);
const pct = (x: number) => `${(x * 100).toFixed(0)}%`;

/** Print the section's figures; whether every turn succeeded (the goal is reported, not enforced). */
export function reportHosts(runs: HostsRun[]): boolean {
  console.log(
    `\nhosts: ${HOSTS_ITEMS} work items × ${HOSTS_TURNS} turns, fake engine ${HOSTS_TURN_MS} ms a turn, concurrency ${HOSTS_CONCURRENCY} per host; ` +
      `turns/s from the ${SKIP}th turn ended to the last`,
  );
  console.log(
    `${'hosts'.padEnd(6)} ${'turns/s'.padStart(8)} ${'whole run'.padStart(10)} ${'span s'.padStart(7)} ` +
      `${'turn p50'.padStart(9)} ${'slots busy'.padStart(10)} ${'machine CPU'.padStart(11)} ${'send s'.padStart(7)}   per host: turns / leases / daemon CPU s / slots busy`,
  );
  let ok = true;
  for (const r of runs) {
    const per = r.perHost
      .map((h) => `${h.id} ${h.turns} / ${h.leased} / ${h.cpu.toFixed(1)} / ${pct(h.busy)}`)
      .join(', ');
    console.log(
      `${String(r.hosts).padEnd(6)} ${f2(r.rate).padStart(8)} ${f2(r.wholeRate).padStart(10)} ${r.span.toFixed(1).padStart(7)} ` +
        `${`${r.turnMs.toFixed(0)} ms`.padStart(9)} ${pct(r.busy).padStart(10)} ${pct(r.machine).padStart(11)} ${(r.sendMs / 1000).toFixed(1).padStart(7)}   ${per}`,
    );
    const expected = HOSTS_ITEMS * HOSTS_TURNS;
    if (r.moved > 0) console.log(`  ${r.hosts} hosts: ${r.moved} work items ran on more than one host`);
    if (r.turns !== expected || r.failed > 0) {
      console.log(
        `  ${r.hosts} host(s): ${r.turns} turns ended of ${expected}, ${r.failed} not succeeded  ← TURNS MISSING OR FAILED`,
      );
      ok = false;
    }
  }
  const [one, three] = runs;
  if (one && three) {
    const ratio = three.rate / one.rate;
    console.log(
      `three hosts / one: ${f2(ratio)}× (whole run ${f2(three.wholeRate / one.wholeRate)}×); goal ≥ ${GOAL}×: ${ratio >= GOAL ? 'met' : 'NOT MET'}` +
        ` (ceiling: ${f2((HOSTS_CONCURRENCY * 1000) / HOSTS_TURN_MS)} turns/s a host)`,
    );
  }
  return ok;
}
