/**
 * The figures of bench/store-hosts.ts (the `hosts` section of bench/store.ts): its knobs, what a run
 * measured (from the turns in PostgreSQL, the database's statistics, /proc), and the report.
 */
import { readFileSync } from 'node:fs';
import type pg from 'pg';
import { median, percentile } from './store-client.js';

const knob = (name: string, fallback: number) => Number(process.env[name] ?? fallback);
export const HOSTS_ITEMS = knob('BENCH_HOSTS_ITEMS', 60);
export const HOSTS_TURNS = knob('BENCH_HOSTS_TURNS', 2);
export const HOSTS_TURN_MS = knob('BENCH_HOSTS_TURN_MS', 1000);
export const HOSTS_CONCURRENCY = knob('BENCH_HOSTS_CONCURRENCY', 2);
export const SKIP = knob('BENCH_HOSTS_SKIP', 10);
export const GOAL = 2.5;
/** node: test/fixtures/bin/fake-engine.mjs (a node process a turn); sh: the chaos test's shell engine. */
export const HOSTS_ENGINE = process.env.BENCH_HOSTS_ENGINE ?? 'node';
if (HOSTS_ENGINE !== 'node' && HOSTS_ENGINE !== 'sh')
  throw new Error(`BENCH_HOSTS_ENGINE: node or sh, not ${JSON.stringify(HOSTS_ENGINE)}`);

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
  /** A freed slot's wait for its next turn (the k-th start after the (k−concurrency)-th end), ms. */
  gapP50: number;
  gapP90: number;
  /** The database's commits and the cluster's WAL flushes (fsync) per turn, during the run. */
  commits: number;
  syncs: number;
  /** Share of the machine's CPUs busy during the run (every process, not only the-loop's). */
  machine: number;
  sendMs: number;
}

export interface TurnRow {
  host_id: string | null;
  work_item: string;
  epoch: number | null;
  status: string;
  started_at: string;
  ended_at: string | null;
}

/** Busy and total jiffies of the machine (the first line of /proc/stat). */
export function machineTicks(): { busy: number; total: number } {
  const fields = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/).slice(1);
  const n = fields.map(Number);
  const total = n.reduce((sum, x) => sum + x, 0);
  return { busy: total - (n[3] ?? 0) - (n[4] ?? 0), total };
}

/** CPU seconds a process has used (utime + stime of /proc/<pid>/stat, at 100 ticks a second). */
export function cpuSeconds(pid: number | undefined): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const after = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(after[11]) + Number(after[12])) / 100;
  } catch {
    return Number.NaN;
  }
}

const ms = (s: string | null) => (s ? Date.parse(s) : Number.NaN);

/** Per host, how long each freed slot waited for its next turn: start k after end k − concurrency. */
function slotGaps(ended: TurnRow[], ids: string[]): number[] {
  const gaps: number[] = [];
  for (const id of ids) {
    const mine = ended.filter((t) => t.host_id === id);
    const starts = mine.map((t) => ms(t.started_at)).sort((x, y) => x - y);
    const ends = mine.map((t) => ms(t.ended_at)).sort((x, y) => x - y);
    for (let k = HOSTS_CONCURRENCY; k < starts.length; k++)
      gaps.push((starts[k] as number) - (ends[k - HOSTS_CONCURRENCY] as number));
  }
  return gaps.sort((x, y) => x - y);
}

export interface StoreStats {
  commits: number;
  syncs: number;
}

/** The database's commits and the cluster's WAL syncs so far (PostgreSQL's cumulative statistics). */
export async function storeStats(client: pg.Client): Promise<StoreStats> {
  const r = await client.query(
    `SELECT (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database())::float8 AS commits,
            (SELECT wal_sync FROM pg_stat_wal)::float8 AS syncs`,
  );
  return r.rows[0] as StoreStats;
}

/** The figures of a run, from its turns. */
export function figuresOf(
  rows: TurnRow[],
  ids: string[],
  extra: { cpu: number[]; machine: number; sendMs: number; stats: StoreStats },
): HostsRun {
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
  const gaps = slotGaps(ended, ids);
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
    gapP50: percentile(gaps, 50),
    gapP90: percentile(gaps, 90),
    commits: extra.stats.commits / ended.length,
    syncs: extra.stats.syncs / ended.length,
    machine: extra.machine,
    sendMs: extra.sendMs,
  };
}

const f2 = (x: number) => x.toFixed(2);
const pct = (x: number) => `${(x * 100).toFixed(0)}%`;

/** Print the section's figures; whether every turn succeeded (the goal is reported, not enforced). */
export function reportHosts(runs: HostsRun[]): boolean {
  console.log(
    `\nhosts: ${HOSTS_ITEMS} work items × ${HOSTS_TURNS} turns, fake engine (${HOSTS_ENGINE}) ${HOSTS_TURN_MS} ms a turn, concurrency ${HOSTS_CONCURRENCY} per host; ` +
      `turns/s from the ${SKIP}th turn ended to the last`,
  );
  console.log(
    `${'hosts'.padEnd(6)} ${'turns/s'.padStart(8)} ${'whole run'.padStart(10)} ${'span s'.padStart(7)} ` +
      `${'turn p50'.padStart(9)} ${'slots busy'.padStart(10)} ${'slot gap p50'.padStart(12)} ${'p90'.padStart(8)} ` +
      `${'commits/turn'.padStart(12)} ${'fsyncs/turn'.padStart(11)} ${'machine CPU'.padStart(11)}`,
  );
  let ok = true;
  const msOf = (x: number) => `${x.toFixed(0)} ms`;
  for (const r of runs) {
    const per = r.perHost
      .map((h) => `${h.id} ${h.turns} / ${h.leased} / ${h.cpu.toFixed(1)} / ${pct(h.busy)}`)
      .join(', ');
    console.log(
      `${String(r.hosts).padEnd(6)} ${f2(r.rate).padStart(8)} ${f2(r.wholeRate).padStart(10)} ${r.span.toFixed(1).padStart(7)} ` +
        `${msOf(r.turnMs).padStart(9)} ${pct(r.busy).padStart(10)} ${msOf(r.gapP50).padStart(12)} ${msOf(r.gapP90).padStart(8)} ` +
        `${r.commits.toFixed(1).padStart(12)} ${r.syncs.toFixed(1).padStart(11)} ${pct(r.machine).padStart(11)}`,
    );
    console.log(
      `       sent in ${(r.sendMs / 1000).toFixed(1)} s; per host (turns / leases / daemon CPU s / slots busy): ${per}`,
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
