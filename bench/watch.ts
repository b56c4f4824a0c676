/**
 * `npm run bench:watch`: how soon what is appended to a transcript the daemon watches shows in the
 * usage ledger, against what it takes without the watcher — `the-loop usage scan` of the same bytes
 * then `the-loop usage --json`, each its own process — side by side in one run.
 *
 * A real daemon (`the-loop serve`, built dist) watches a directory (`usage.watch`). Each of
 * BENCH_WATCH_ROUNDS rounds (default 5) appends BENCH_WATCH_MB (default 10) of transcript records to
 * one file in a single write, then measures, from the end of the write:
 *   ledger   until the rows are in the daemon's registry (a read-only connection polled every 5 ms)
 *   usage    until a `the-loop usage --json` started after the write shows them (what a person sees;
 *            its resolution is one CLI run)
 *   anchor   `the-loop usage scan <dir>` of the same bytes into another data dir, then `usage --json`
 * Goal (issue 16): usage ≤ 2 s. Figures are printed, never asserted; the machine's load skews them
 * and is printed with them. The daemon's peak memory (VmHWM) is printed for information.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { stringify } from 'yaml';
import { transcriptBytes } from '../test/helpers/transcripts.js';

const ROOT = join(import.meta.dirname, '..');
const BIN = join(ROOT, 'bin', 'the-loop.js');
const ROUNDS = Number(process.env.BENCH_WATCH_ROUNDS ?? 5);
const MB = Number(process.env.BENCH_WATCH_MB ?? 10);
const GOAL_MS = 2000;

const dir = mkdtempSync(join(tmpdir(), 'the-loop-bench-watch-'));
const watched = join(dir, 'transcripts', '-work-repo');
const file = join(watched, 'session.jsonl');
const env = {
  PATH: process.env.PATH,
  HOME: process.env.HOME,
  LANG: 'C.UTF-8',
  THE_LOOP_CONFIG: join(dir, 'config.yaml'),
};

function writeConfig(): void {
  mkdirSync(watched, { recursive: true });
  writeFileSync(file, '');
  const config = {
    dataDir: 'data',
    webhook: { secret: 'bench-watch-secret-0123456789abcdef' },
    sandbox: { mode: 'none' },
    gateway: { port: 0 },
    console: { port: 0 },
    usage: { watch: ['transcripts'], watchClaude: false },
  };
  writeFileSync(join(dir, 'config.yaml'), stringify(config));
}

function startDaemon(): Promise<ChildProcess> {
  const child = spawn(process.execPath, [BIN, 'serve', '--port', '0'], {
    cwd: dir,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  return new Promise((resolve, reject) => {
    const take = (c: Buffer) => {
      out += c.toString();
      if (/Ready\./.test(out)) resolve(child);
    };
    child.stdout?.on('data', take);
    child.stderr?.on('data', take);
    child.once('exit', (code) => reject(new Error(`the daemon exited (${code}):\n${out}`)));
  });
}

/** One CLI run (asynchronous: the ledger is polled meanwhile). */
function cli(args: string[], dataDir?: string): Promise<{ ms: number; stdout: string }> {
  const started = performance.now();
  const argv = [BIN, ...(dataDir ? ['--data-dir', dataDir] : []), ...args];
  return new Promise((resolve, reject) =>
    execFile(
      process.execPath,
      argv,
      { cwd: dir, env, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) =>
        error
          ? reject(new Error(`the-loop ${args.join(' ')} failed: ${stderr}`))
          : resolve({ ms: performance.now() - started, stdout }),
    ),
  );
}

const rowsOf = (stdout: string) => (JSON.parse(stdout) as { total: { rows: number } }).total.rows;

async function main(): Promise<void> {
  writeConfig();
  const daemon = await startDaemon();
  const ledger = new Database(join(dir, 'data', 'the-loop.db'), { readonly: true });
  const count = ledger.prepare('SELECT COUNT(*) AS n FROM usage_ledger');
  const anchorData = join(dir, 'anchor-data');
  const results: Array<{ ledger: number; usage: number; anchor: number; requests: number }> = [];
  let expected = 0;
  try {
    for (let round = 0; round < ROUNDS; round++) {
      const { text, totals } = transcriptBytes(MB * 1024 * 1024, `r${round}`);
      expected += totals.requests;
      appendFileSync(file, text);
      const written = performance.now();
      let ledgerMs = Number.NaN;
      let usageMs = Number.NaN;
      // The ledger polled every 5 ms; `usage --json` run back to back until it shows the rows.
      const poll = setInterval(() => {
        if (Number.isNaN(ledgerMs) && (count.get() as { n: number }).n >= expected)
          ledgerMs = performance.now() - written;
      }, 5);
      for (let tries = 0; Number.isNaN(usageMs) && tries < 200; tries++) {
        const res = await cli(['usage', '--json']);
        if (rowsOf(res.stdout) >= expected) usageMs = performance.now() - written;
      }
      while (Number.isNaN(ledgerMs)) await new Promise((r) => setTimeout(r, 5));
      clearInterval(poll);
      // The anchor: the same bytes imported by a scan, then read, each its own process.
      const scan = await cli(['usage', 'scan', join(dir, 'transcripts')], anchorData);
      const report = await cli(['usage', '--json'], anchorData);
      if (rowsOf(report.stdout) !== expected) throw new Error('the anchor counted other rows');
      results.push({
        ledger: ledgerMs,
        usage: usageMs,
        anchor: scan.ms + report.ms,
        requests: totals.requests,
      });
    }
  } finally {
    const hwm = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${daemon.pid}/status`, 'utf8'))?.[1];
    daemon.kill('SIGTERM');
    await new Promise((r) => daemon.once('exit', r));
    ledger.close();
    print(results, hwm ? Number(hwm) / 1024 : Number.NaN);
    rmSync(dir, { recursive: true, force: true });
  }
}

function print(
  results: Array<{ ledger: number; usage: number; anchor: number; requests: number }>,
  daemonPeakMb: number,
): void {
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
  const f = (ms: number) => `${(ms / 1000).toFixed(3)} s`;
  console.log(
    `bench:watch — ${ROUNDS} rounds of ${MB} MB appended (${results[0]?.requests ?? 0} requests each) · ${cpus().length} cores, load ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
  console.log('round  ledger    usage --json   anchor (scan + usage)   usage / anchor');
  for (const [i, r] of results.entries())
    console.log(
      `${String(i + 1).padStart(5)}  ${f(r.ledger)}   ${f(r.usage)}        ${f(r.anchor)}               ${(r.usage / r.anchor).toFixed(2)}x`,
    );
  const m = { ledger: median(results.map((r) => r.ledger)), usage: median(results.map((r) => r.usage)) };
  const anchor = median(results.map((r) => r.anchor));
  console.log(
    `median ${f(m.ledger)}   ${f(m.usage)}        ${f(anchor)}               ${(m.usage / anchor).toFixed(2)}x   (goal: usage ≤ ${f(GOAL_MS)}: ${m.usage <= GOAL_MS ? 'met' : 'NOT met'}, max ${f(Math.max(...results.map((r) => r.usage)))})`,
  );
  console.log(`daemon peak memory (VmHWM): ${daemonPeakMb.toFixed(1)} MB`);
}

await main();
