/**
 * `npm run bench:cli`: how long the CLI takes to answer, against a bare Node start, side by side in
 * one run. The registry holds BENCH_CLI_SESSIONS sessions (default 1,000, one turn each) and
 * BENCH_CLI_ROWS ledger rows (default 100,000), and 200 inbox deliveries; each command runs
 * BENCH_CLI_RUNS times (default 9, after one warm-up), interleaved with `node -e 0`, and the median
 * wall times are printed with their ratio. Goal (issue 16): each ≤ 1.5× the bare start. Figures are
 * printed, never asserted; the machine's load skews them and is printed with them.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import type { LedgerEntry } from '../src/core/ports/ledger.js';
import { Ledger } from '../src/ledger/ledger.js';
import { priceTable } from '../src/ledger/pricing.js';
import { openDb } from '../src/store/db.js';
import { SqliteInbox } from '../src/store/sqlite/inbox.js';
import { SqliteLedgerStore } from '../src/store/sqlite/ledger.js';
import { SqliteSessionStore } from '../src/store/sqlite/sessions.js';

const ROOT = join(import.meta.dirname, '..');
const BIN = join(ROOT, 'bin/the-loop.js');
const SESSIONS = Number(process.env.BENCH_CLI_SESSIONS ?? 1000);
const ROWS = Number(process.env.BENCH_CLI_ROWS ?? 100_000);
const RUNS = Number(process.env.BENCH_CLI_RUNS ?? 9);
const COMMANDS = [['sessions', 'list'], ['usage'], ['acts'], ['events', 'list']];
const MODELS = ['claude-sonnet-4-5-20250929', 'claude-opus-4-8', 'claude-haiku-4-5-20251001'];

async function seed(dir: string): Promise<void> {
  mkdirSync(join(dir, '.the-loop'));
  // dataDir is relative to the config file's directory: the registry is .the-loop/data/the-loop.db.
  writeFileSync(join(dir, '.the-loop/config.yaml'), stringify({ dataDir: 'data' }));
  mkdirSync(join(dir, '.the-loop/data'));
  const db = openDb(join(dir, '.the-loop/data/the-loop.db'));
  const store = new SqliteSessionStore(db, { scrub: (t) => t });
  // The rows span the last 30 days: `usage` (its default window, 7 days) reports about a quarter.
  const day = Date.now() - 30 * 86_400_000;
  for (let i = 0; i < SESSIONS; i++) {
    const session = await store.create({
      workItem: `github:octo/widgets#${i + 1}`,
      slug: `github-octo-widgets-${i + 1}-bench`,
      engine: 'claude',
      runner: 'process',
      engineSessionId: null,
      cwd: dir,
      credentialKind: null,
      credentialEnv: null,
    });
    await store.beginTurn(session.id, { promptDigest: 'sha256:x', promptBytes: 10, meter: 'transcript' });
  }
  const entries = function* (): Generator<LedgerEntry> {
    for (let i = 0; i < ROWS; i++) {
      yield {
        meter: 'transcript',
        sourceId: `req_${i}`,
        at: new Date(day + (i % (30 * 24)) * 3_600_000).toISOString(),
        sessionId: null,
        workItem: `github:octo/widgets#${(i % SESSIONS) + 1}`,
        turnId: null,
        engine: 'claude',
        runner: 'process',
        model: MODELS[i % MODELS.length] ?? null,
        usage: {
          inputTokens: 1200,
          outputTokens: 300,
          cacheReadTokens: 40_000,
          cacheCreationTokens: 2000,
          reasoningTokens: 0,
        },
        payer: { kind: 'subscription', id: null },
      };
    }
  };
  await new Ledger(new SqliteLedgerStore(db), priceTable()).add(entries());
  const inbox = new SqliteInbox(db);
  await inbox.acceptMany(
    Array.from({ length: 200 }, (_, i) => ({
      id: `d-${i}`,
      source: 'github' as const,
      event: 'issue_comment',
      action: 'created',
      body: '{}',
      routed: { action: 'ignore' as const, workItem: 'github:octo/widgets#1', reason: 'ignored: bench' },
    })),
  );
  db.close();
}

/** The commands' state home (their validated-config cache), inside the bench's dir, not the user's. */
const benchEnv = (dir: string): NodeJS.ProcessEnv => ({ ...process.env, XDG_STATE_HOME: join(dir, 'state') });

function wall(args: string[], cwd: string): number {
  const t0 = performance.now();
  const r = spawnSync(process.execPath, args, {
    cwd,
    env: benchEnv(cwd),
    stdio: ['ignore', 'ignore', 'pipe'],
    encoding: 'utf8',
  });
  const ms = performance.now() - t0;
  if (r.status !== 0) throw new Error(`${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  return ms;
}

/** The commands must read the seeded registry (a bench of an empty one measures nothing). */
function checkSeen(dir: string): void {
  const json = (args: string[]) =>
    JSON.parse(
      spawnSync(process.execPath, [BIN, ...args, '--json'], {
        cwd: dir,
        env: benchEnv(dir),
        encoding: 'utf8',
      }).stdout,
    );
  const sessions = json(['sessions', 'list']).length;
  const deliveries = json(['events', 'list']).length;
  const rows = json(['usage']).total?.rows ?? 0;
  console.log(
    `  seen: ${sessions} sessions, ${deliveries} deliveries (list limit 50), ${rows} ledger rows in usage's 7 days`,
  );
  if (sessions !== SESSIONS || deliveries === 0 || rows === 0)
    throw new Error('the commands do not see the seeded registry');
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
const quantile = (xs: number[], q: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * q))] ?? Number.NaN;

async function main(): Promise<void> {
  // BENCH_CLI_DIR keeps the seeded registry there (seeded once) for profiling a command by hand.
  const keep = process.env.BENCH_CLI_DIR;
  const dir = keep ?? mkdtempSync(join(tmpdir(), 'the-loop-bench-cli-'));
  try {
    const t0 = performance.now();
    if (!keep || !existsSync(join(dir, '.the-loop'))) await seed(dir);
    console.log(
      `cli bench: ${cpus().length} CPUs, load average ${loadavg()
        .map((l) => l.toFixed(2))
        .join(
          ' ',
        )}; node ${process.version}; ${SESSIONS} sessions, ${ROWS} ledger rows (seeded in ${((performance.now() - t0) / 1000).toFixed(1)} s)`,
    );
    const bare: number[] = [];
    const times = new Map<string, number[]>(COMMANDS.map((c) => [c.join(' '), []]));
    for (const c of COMMANDS) wall([BIN, ...c], dir);
    checkSeen(dir);
    for (let i = 0; i < RUNS; i++) {
      bare.push(wall(['-e', '0'], dir));
      for (const c of COMMANDS) times.get(c.join(' '))?.push(wall([BIN, ...c], dir));
    }
    const floor = median(bare);
    const spread = (xs: number[]) => `${quantile(xs, 0.25).toFixed(0)}–${quantile(xs, 0.75).toFixed(0)}`;
    console.log(`\nmedian wall time of ${RUNS} runs each, interleaved (goal: each ≤ 1.5× node -e 0)`);
    console.log(
      `  ${'node -e 0'.padEnd(16)} ${floor.toFixed(0).padStart(5)} ms  (quartiles ${spread(bare)})`,
    );
    for (const [name, ms] of times) {
      const m = median(ms);
      // Each run against the bare start of its own round: a figure drifts on a shared VM between
      // rounds, less within one.
      const paired = median(ms.map((t, i) => t / (bare[i] ?? Number.NaN)));
      console.log(
        `  ${name.padEnd(16)} ${m.toFixed(0).padStart(5)} ms  ${(m / floor).toFixed(2)}×  ${m / floor <= 1.5 ? 'met' : 'NOT met'}  (quartiles ${spread(ms)}; per-round ratio, median ${paired.toFixed(2)}×)`,
      );
    }
  } finally {
    if (!keep) rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
