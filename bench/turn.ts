/**
 * `npm run bench:turn`: one turn of the real Claude Code CLI (the pinned devDependency) against the
 * local Anthropic mock, through `the-loop run` and bare, side by side in one run:
 *
 *   bare       `claude -p --output-format stream-json --verbose --session-id <uuid>
 *              --dangerously-skip-permissions -- <prompt>`: the argv the-loop gives a first turn,
 *              the same environment (isolated home, the mock as ANTHROPIC_BASE_URL, the key).
 *   the-loop   `node bin/the-loop.js run github:bench/turn#<n> <prompt>` with the default guard (the
 *              gateway in front of the model API, the bubblewrap sandbox where it runs), a new
 *              work item each run (a first turn, as bare).
 *   unguarded  the same with `gateway.enabled: false` and `sandbox.mode: none`: what the guard costs
 *              against what the CLI, the registry and the ledger cost.
 *
 * BENCH_TURN_RUNS rounds (default 9, after one warm-up round), interleaved, the order rotating each
 * round; each run's wall time from spawn to exit. Medians and ratios against bare are printed.
 * Goal (issue 16): the-loop ≤ 1.2× bare. Figures are printed, never asserted; the machine's load
 * skews them and is printed with them. BENCH_TURN_BASE=<another checkout's bin/the-loop.js> adds
 * that build (default guard, a config and data dir of its own) to the rounds, to compare two
 * versions in one run.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { prepareClaudeHome } from '../test/fixtures/engine-homes/claude.js';
import { startAnthropicMock } from '../test/fixtures/mock-apis/anthropic.js';

const ROOT = join(import.meta.dirname, '..');
const BIN = join(ROOT, 'bin/the-loop.js');
// Resolved: a base build's sandbox (BENCH_TURN_BASE, another checkout under /tmp) sees this
// checkout's node_modules only through where it really is.
const CLAUDE = realpathSync(join(ROOT, 'node_modules/.bin/claude'));
const RUNS = Number(process.env.BENCH_TURN_RUNS ?? 9);
const PROMPT = 'Say hello in one word.';
const KEY = 'sk-ant-bench-not-a-real-key';

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
const load = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

interface Ran {
  ms: number;
  stdout: string;
  stderr: string;
}

/** Run one process to its exit (argv array, no shell); wall time from spawn to `close`. */
function timed(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(cmd, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => {
      stdout += c;
    });
    child.stderr.setEncoding('utf8').on('data', (c: string) => {
      stderr += c;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      const ms = performance.now() - t0;
      if (code !== 0) reject(new Error(`${cmd} ${args.join(' ')} exited ${code}\n${stdout}\n${stderr}`));
      else resolve({ ms, stdout, stderr });
    });
  });
}

interface Rig {
  root: string;
  work: string;
  env: NodeJS.ProcessEnv;
  guarded: string;
  unguarded: string;
  /** BENCH_TURN_BASE's: the same config as the-loop's, in a directory (and data dir) of its own. */
  base: string;
}

function rig(mockUrl: string): Rig {
  const root = mkdtempSync(join(tmpdir(), 'the-loop-bench-turn-'));
  const work = join(root, 'work');
  mkdirSync(work);
  const home = prepareClaudeHome(join(root, 'engine'), mockUrl);
  const config = (dir: string, extra: Record<string, unknown>) => {
    mkdirSync(join(root, dir));
    const path = join(root, dir, 'config.yaml');
    writeFileSync(
      path,
      stringify({
        dataDir: 'data',
        defaults: { engine: 'claude', cwd: work },
        gateway: { port: 0 },
        engines: { claude: { binary: CLAUDE, env: home.env } },
        ...extra,
      }),
    );
    return path;
  };
  return {
    root,
    work,
    // The engine's own variables as the-loop gives them (its config's env), plus the key.
    env: { PATH: process.env.PATH, LANG: 'C.UTF-8', ...home.env, [home.credentialEnv]: KEY },
    guarded: config('guarded', {}),
    unguarded: config('unguarded', { gateway: { enabled: false }, sandbox: { mode: 'none' } }),
    base: config('base', {}),
  };
}

type Kind = 'bare' | 'the-loop' | 'unguarded' | 'base';
const BASE = process.env.BENCH_TURN_BASE;

function once(r: Rig, kind: Kind, n: number): Promise<Ran> {
  if (kind === 'bare') {
    const args = ['-p', '--output-format', 'stream-json', '--verbose', '--session-id', randomUUID()];
    return timed(CLAUDE, [...args, '--dangerously-skip-permissions', '--', PROMPT], r.work, r.env);
  }
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    // the-loop's state home (its validated-config cache) in the rig: removed with it, and never
    // shared with the user's (two builds would each find the other's entry for a config, not theirs).
    XDG_STATE_HOME: join(r.root, 'state'),
    LANG: 'C.UTF-8',
    ANTHROPIC_API_KEY: KEY,
    THE_LOOP_CONFIG: kind === 'unguarded' ? r.unguarded : kind === 'base' ? r.base : r.guarded,
  };
  const bin = kind === 'base' && BASE ? BASE : BIN;
  return timed(process.execPath, [bin, 'run', `github:bench/turn#${n}`, PROMPT], r.work, env);
}

async function main(): Promise<void> {
  const mock = await startAnthropicMock({ defaultUsage: { input: 120, output: 8, cacheRead: 0 } });
  const r = rig(mock.url);
  try {
    console.log(
      `turn bench: ${cpus().length} CPUs, load average ${load()}; node ${process.version}; ${RUNS} rounds`,
    );
    const kinds: Kind[] = ['bare', 'the-loop', 'unguarded', ...(BASE ? (['base'] as const) : [])];
    const times = new Map<Kind, number[]>(kinds.map((k) => [k, []]));
    let n = 0;
    for (let round = 0; round <= RUNS; round++) {
      // Round 0 warms the caches (the CLI's bundle, the-loop's modules) and is not counted.
      const order = kinds.map((_, i) => kinds[(i + round) % kinds.length] as Kind);
      for (const kind of order) {
        const ran = await once(r, kind, ++n);
        if (round > 0) times.get(kind)?.push(ran.ms);
      }
    }
    const bare = median(times.get('bare') ?? []);
    console.log(`\nmedian wall time of ${RUNS} runs each, interleaved (goal: the-loop ≤ 1.2× bare)`);
    for (const [kind, ms] of times) {
      const m = median(ms);
      const goal = kind === 'the-loop' || kind === 'base' ? `  ${m / bare <= 1.2 ? 'met' : 'NOT met'}` : '';
      console.log(
        `  ${kind.padEnd(10)} ${m.toFixed(0).padStart(6)} ms  ${(m / bare).toFixed(2)}×${goal}  (min ${Math.min(...ms).toFixed(0)}, max ${Math.max(...ms).toFixed(0)})`,
      );
    }
    if (BASE) console.log(`  (base: ${BASE}, the same config as the-loop, its own data dir)`);
    console.log(`load average after: ${load()}`);
  } finally {
    await mock.close();
    rmSync(r.root, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
