/**
 * The store on PostgreSQL versus SQLite, on this machine, side by side in one run (issue 17):
 *
 *   npm run bench:store      (builds dist/ first: the daemons run bin/the-loop.js)
 *
 * Sections; ingest and claims measure both stores in alternating rounds (the order rotates each
 * round, so drift on the machine does not always favour the same store), hosts PostgreSQL only:
 *
 *   ingest   the real daemon, `node bin/the-loop.js serve --port 0`, twice: one configured with SQLite
 *            (the default: a file in its directory), one with `store: { kind: postgres, url:
 *            env:THE_LOOP_DATABASE_URL }` on a database of its own. Signed `issues.opened` webhooks
 *            (test/fixtures/github/issues.opened.json compacted, no mention: routed to `ignore`, no
 *            engine runs), a unique delivery id each, BENCH_CONCURRENCY in flight on a keep-alive
 *            agent, from a client in a child process of its own (bench/store-client.ts, the client of
 *            bench/ingest.ts). BENCH_WARMUP requests per daemon, then BENCH_ROUNDS rounds of
 *            BENCH_REQUESTS. Requests/s (median of rounds) and latency sent → 202 (pooled). What each
 *            daemon stored is counted after it stopped: every request must be stored.
 *   claims   the inbox's `applyClaims` (the dispatcher's one write per pass) at the store level
 *            (bench/store-claims.ts): BENCH_CLAIM_DELIVERIES queued deliveries over BENCH_CLAIM_ITEMS
 *            work items, then passes claiming the head of every line; per pass and per claim (a
 *            pass's time over its claims). A new SQLite file / PostgreSQL database per round.
 *   hosts    three hosts sharing the PostgreSQL store versus one (bench/store-hosts.ts): the real
 *            daemon on each, separate processes, distinct `store.host` ids, one database (the one
 *            host a database of its own); the fake engine's turn takes BENCH_HOSTS_TURN_MS (1 s),
 *            `dispatch.concurrency` BENCH_HOSTS_CONCURRENCY (2) per host; BENCH_HOSTS_ITEMS (60)
 *            work items × BENCH_HOSTS_TURNS (2) mentions each, sent up front, round-robin. Turns/s
 *            from the BENCH_HOSTS_SKIP-th (10th) turn ended to the last, each host's turns, leases
 *            and CPU, the ratio; goal: three hosts sustain ≥ 2.5× one host's turns per second.
 *
 * BENCH_SECTIONS=ingest,claims,hosts (the default: all) runs only the sections named.
 *
 * Fairness: PostgreSQL is a private cluster (test/helpers/postgres.ts, `durable: true`: fsync on,
 * PostgreSQL's defaults) on a free port, its data directory under os.tmpdir() like the SQLite files
 * (openDb: WAL, synchronous FULL), so both commit to the same disk; the settings that decide what a
 * commit costs are printed. Other load on the machine skews every figure: the load average is
 * printed before and after. Nothing is written outside one temp dir (XDG_STATE_HOME of the daemons
 * points into it); the daemons, the client and the cluster are stopped and the temp dir removed.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { createHmac, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Cluster, startCluster } from '../test/helpers/postgres.js';
import { type ClaimRun, claimRoundOf, createDatabase, durabilitySettings } from './store-claims.js';
import {
  clientRole,
  type LoadJob,
  type LoadResult,
  median,
  once,
  percentile,
  stopChild,
} from './store-client.js';
import { type BenchDaemon, type StoreKind, startDaemon, storedRows } from './store-daemon.js';
import { type HostsRun, hostsSection, reportHosts } from './store-hosts.js';

const ROOT = join(import.meta.dirname, '..');
const knob = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
const REQUESTS = knob('BENCH_REQUESTS', 3000);
const ROUNDS = knob('BENCH_ROUNDS', 3);
const CONCURRENCY = knob('BENCH_CONCURRENCY', 16);
const WARMUP = knob('BENCH_WARMUP', 500);
const CLAIM_DELIVERIES = knob('BENCH_CLAIM_DELIVERIES', 2000);
const CLAIM_ITEMS = knob('BENCH_CLAIM_ITEMS', 20);
const KINDS: readonly StoreKind[] = ['sqlite', 'postgres'];
const ALL_SECTIONS = ['ingest', 'claims', 'hosts'] as const;
type Section = (typeof ALL_SECTIONS)[number];

/** BENCH_SECTIONS: the sections to run, comma-separated (default: all of them). */
function sectionsWanted(): ReadonlySet<Section> {
  const raw = process.env.BENCH_SECTIONS?.trim();
  if (!raw) return new Set(ALL_SECTIONS);
  const names = raw.split(',').map((x) => x.trim());
  const unknown = names.filter((x) => !(ALL_SECTIONS as readonly string[]).includes(x));
  if (unknown.length > 0 || names.length === 0)
    throw new Error(
      `BENCH_SECTIONS: unknown section ${unknown.join(', ')} (known: ${ALL_SECTIONS.join(', ')})`,
    );
  return new Set(names as Section[]);
}

/** What every section is given. */
interface Bench {
  tmp: string;
  cluster: Cluster;
  bin: string;
  client?: ChildProcess;
  /** Children to kill on an interrupt. */
  children: ChildProcess[];
}

interface IngestFigures {
  rps: number;
  min: number;
  max: number;
  p50: number;
  p99: number;
  clientCpu: number;
  stored: string;
  complete: boolean;
}

interface ClaimFigures {
  passP50: number;
  passP99: number;
  claimP50: number;
  claimP99: number;
  passes: number;
  lost: number;
}

const sorted = (xs: number[]) => xs.filter((x) => Number.isFinite(x)).sort((x, y) => x - y);

function ingestFigures(rounds: LoadResult[], rows: Array<{ status: string; n: number }>): IngestFigures {
  const all = sorted(rounds.flatMap((r) => r.latencies));
  const rps = rounds.map((r) => (REQUESTS / r.ms) * 1000);
  const total = rows.reduce((sum, r) => sum + r.n, 0);
  return {
    rps: median(rps),
    min: Math.min(...rps),
    max: Math.max(...rps),
    p50: percentile(all, 50),
    p99: percentile(all, 99),
    clientCpu: median(rounds.map((r) => r.clientCpuMs / r.ms)),
    stored: rows.map((x) => `${x.n.toLocaleString()} ${x.status}`).join(', ') || 'nothing',
    complete: total === WARMUP + ROUNDS * REQUESTS,
  };
}

/** Ingest through the real daemon, one per store, in alternating rounds. */
async function ingestSection(b: Bench & { client: ChildProcess }): Promise<Map<StoreKind, IngestFigures>> {
  const fixture = JSON.parse(readFileSync(join(ROOT, 'test/fixtures/github/issues.opened.json'), 'utf8'));
  const body = JSON.stringify(fixture);
  if (body.includes('@the-loop')) throw new Error('the payload must not mention @the-loop (it would run)');
  const secret = randomBytes(24).toString('hex');
  const signature = `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
  const runId = randomBytes(4).toString('hex');
  const stateHome = join(b.tmp, 'state');
  const database = await createDatabase(b.cluster, 'ingest');
  const daemons = new Map<StoreKind, BenchDaemon>();
  try {
    for (const kind of KINDS) {
      const daemon = await startDaemon({
        kind,
        bin: b.bin,
        dir: join(b.tmp, `daemon-${kind}`),
        secret,
        stateHome,
        ...(kind === 'postgres' ? { databaseUrl: database.url } : {}),
      });
      b.children.push(daemon.child);
      daemons.set(kind, daemon);
    }
    let jobs = 0;
    const run = async (daemon: BenchDaemon, count: number): Promise<LoadResult> => {
      const result = once<LoadResult>(b.client, 'the client');
      const job: LoadJob = {
        url: daemon.url,
        count,
        concurrency: CONCURRENCY,
        body,
        signature,
        idPrefix: `${runId}-${jobs++}`,
      };
      b.client.send(job);
      const r = await result;
      if (r.errors.length > 0)
        throw new Error(`the ${daemon.kind} daemon: ${r.errors.join('; ')}\n${daemon.output().slice(-4000)}`);
      return r;
    };
    const rounds = new Map<StoreKind, LoadResult[]>(KINDS.map((k) => [k, []]));
    for (const kind of KINDS) await run(daemons.get(kind) as BenchDaemon, WARMUP);
    for (let r = 0; r < ROUNDS; r++) {
      for (let k = 0; k < KINDS.length; k++) {
        const kind = KINDS[(k + r) % KINDS.length] as StoreKind;
        rounds.get(kind)?.push(await run(daemons.get(kind) as BenchDaemon, REQUESTS));
      }
    }
    const figures = new Map<StoreKind, IngestFigures>();
    for (const [kind, daemon] of daemons) {
      await daemon.stop();
      const rows = await storedRows(daemon, database.url);
      figures.set(kind, ingestFigures(rounds.get(kind) ?? [], rows));
    }
    return figures;
  } finally {
    for (const daemon of daemons.values()) await daemon.stop();
    await database.drop();
  }
}

/** Claim passes on each store, alternating, a store of its own per round. */
async function claimSection(b: Bench): Promise<Map<StoreKind, ClaimFigures>> {
  const runs = new Map<StoreKind, ClaimRun[]>(KINDS.map((k) => [k, []]));
  const where = { dir: join(b.tmp, 'claims'), cluster: b.cluster };
  mkdirSync(where.dir, { recursive: true });
  const size = { deliveries: CLAIM_DELIVERIES, items: CLAIM_ITEMS };
  // A warm-up round each (JIT, the cluster's caches), not counted.
  for (const kind of KINDS)
    await claimRoundOf(kind, where, -1, { deliveries: CLAIM_ITEMS * 5, items: CLAIM_ITEMS });
  for (let r = 0; r < ROUNDS; r++) {
    for (let k = 0; k < KINDS.length; k++) {
      const kind = KINDS[(k + r) % KINDS.length] as StoreKind;
      runs.get(kind)?.push(await claimRoundOf(kind, where, r, size));
    }
  }
  const figures = new Map<StoreKind, ClaimFigures>();
  for (const [kind, list] of runs) {
    const pass = sorted(list.flatMap((x) => x.passMs));
    const claim = sorted(list.flatMap((x) => x.claimMs));
    figures.set(kind, {
      passP50: percentile(pass, 50),
      passP99: percentile(pass, 99),
      claimP50: percentile(claim, 50),
      claimP99: percentile(claim, 99),
      passes: pass.length,
      lost: list.reduce((sum, x) => sum + x.lost, 0),
    });
  }
  return figures;
}

const ms = (x: number) => `${x.toFixed(2).padStart(7)} ms`;

/** The store table: the sections that ran (ingest, claims), a row per store and their ratio. */
function report(ingest?: Map<StoreKind, IngestFigures>, claims?: Map<StoreKind, ClaimFigures>): boolean {
  const ingestCols = (i: IngestFigures) =>
    ` ${`${i.rps.toFixed(0)} [${i.min.toFixed(0)}–${i.max.toFixed(0)}]`.padEnd(24)} ${ms(i.p50)} ${ms(i.p99)}`;
  const claimCols = (c: ClaimFigures) =>
    `   ${ms(c.passP50).padStart(14)} ${ms(c.passP99)}   ${ms(c.claimP50).padStart(13)} ${ms(c.claimP99)}`;
  console.log(
    `\n${'store'.padEnd(9)}${ingest ? ` ${'ingest req/s [min–max]'.padEnd(24)} ${'p50'.padStart(10)} ${'p99'.padStart(10)}` : ''}` +
      `${claims ? `   ${'claim pass p50'.padStart(14)} ${'p99'.padStart(10)}   ${'per claim p50'.padStart(13)} ${'p99'.padStart(10)}` : ''}`,
  );
  for (const kind of KINDS) {
    const i = ingest?.get(kind);
    const c = claims?.get(kind);
    console.log(`${kind.padEnd(9)}${i ? ingestCols(i) : ''}${c ? claimCols(c) : ''}`);
  }
  const x = (a: number, b: number) => `${(a / b).toFixed(2)}×`;
  const [s, p] = [ingest?.get('sqlite'), ingest?.get('postgres')];
  const [cs, cp] = [claims?.get('sqlite'), claims?.get('postgres')];
  console.log(
    `${'pg/sqlite'.padEnd(9)}` +
      (s && p
        ? ` ${x(p.rps, s.rps).padEnd(24)} ${x(p.p50, s.p50).padStart(10)} ${x(p.p99, s.p99).padStart(10)}`
        : '') +
      (cs && cp
        ? `   ${x(cp.passP50, cs.passP50).padStart(14)} ${x(cp.passP99, cs.passP99).padStart(10)}` +
          `   ${x(cp.claimP50, cs.claimP50).padStart(13)} ${x(cp.claimP99, cs.claimP99).padStart(10)}`
        : ''),
  );
  console.log(
    '(ratios: PostgreSQL over SQLite; req/s above 1× = PostgreSQL faster, latency above 1× = slower)',
  );
  let ok = true;
  const sent = WARMUP + ROUNDS * REQUESTS;
  for (const kind of KINDS) {
    const i = ingest?.get(kind);
    const c = claims?.get(kind);
    const parts: string[] = [];
    if (i)
      parts.push(
        `stored (sent ${sent.toLocaleString()}) ${i.stored}${i.complete ? '' : '  ← NOT ALL STORED'};` +
          ` client CPU ${(i.clientCpu * 100).toFixed(0)}% (near 100%: client-bound)`,
      );
    if (c)
      parts.push(`${c.passes} claim passes, ${c.lost} claims lost${c.lost > 0 ? '  ← CLAIMS LOST' : ''}`);
    console.log(`${kind}: ${parts.join('; ')}`);
    ok &&= (i?.complete ?? true) && (c?.lost ?? 0) === 0;
  }
  return ok;
}

/** The client child of the ingest section (requests from a process of its own). */
function forkClient(): ChildProcess {
  return fork(import.meta.filename, ['client'], {
    cwd: ROOT,
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
}

async function main(): Promise<void> {
  const sections = sectionsWanted();
  const loadBefore = loadavg();
  const bin = join(ROOT, 'bin/the-loop.js');
  if (!existsSync(join(ROOT, 'dist/cli/main.js')))
    throw new Error('dist/ is missing: run `npm run build` first (npm run bench:store does)');
  const tmp = mkdtempSync(join(tmpdir(), 'the-loop-bench-store-'));
  const children: ChildProcess[] = [];
  let cluster: Cluster | undefined;
  const onSignal = () => {
    for (const c of children) c.kill('SIGKILL');
    cluster?.stop();
    rmSync(tmp, { recursive: true, force: true });
    process.exit(130);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    cluster = await startCluster({ durable: true });
    const b: Bench = { tmp, cluster, bin, children };
    const settings = await durabilitySettings({ dir: tmp, cluster });
    let ingest: Map<StoreKind, IngestFigures> | undefined;
    if (sections.has('ingest')) {
      const client = forkClient();
      children.push(client);
      ingest = await ingestSection({ ...b, client });
      client.disconnect();
      await stopChild(client);
    }
    const claims = sections.has('claims') ? await claimSection(b) : undefined;
    let hosts: HostsRun[] | undefined;
    if (sections.has('hosts')) hosts = await hostsSection(b);
    const loadAfter = loadavg();
    console.log(
      `ingest: issues.opened compacted, ${CONCURRENCY} in flight, keep-alive, ${ROUNDS} rounds × ${REQUESTS.toLocaleString()} requests` +
        ` per daemon after ${WARMUP.toLocaleString()} warm-up; claims: ${ROUNDS} rounds × ${CLAIM_DELIVERIES.toLocaleString()} deliveries` +
        ` over ${CLAIM_ITEMS} work items (${CLAIM_ITEMS} claims a pass); sections: ${[...sections].join(', ')}`,
    );
    console.log(
      `${cpus().length} CPUs; load average ${loadBefore.map((x) => x.toFixed(2)).join(' ')} before, ` +
        `${loadAfter.map((x) => x.toFixed(2)).join(' ')} after; node ${process.version}; tmp ${tmpdir()}`,
    );
    console.log(settings);
    if ((ingest || claims) && !report(ingest, claims)) process.exitCode = 1;
    if (hosts && !reportHosts(hosts)) process.exitCode = 1;
  } finally {
    for (const c of children) c.kill('SIGKILL');
    cluster?.stop();
    rmSync(tmp, { recursive: true, force: true });
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

if (process.argv[2] === 'client') clientRole();
else await main();
