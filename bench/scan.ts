/**
 * `the-loop usage scan` against ccusage on synthetic Claude Code transcript corpora, side by side in
 * one run, on two corpora of different shapes (bench/scan-corpus.ts builds them under bench/.out):
 *
 *   npm run bench:scan        (BENCH_SCAN_CORPUS=both|standard|dense, default both)
 *
 * - standard: the record mix of real transcripts, ~1.18 GB in 1,000 files, ~57,000 requests
 *   (BENCH_SCAN_MB, default 1100; BENCH_SCAN_FILES, default 1000);
 * - dense: a long history of short exchanges, ~1.16 GB in 1,000 files, ~400,000 small assistant
 *   records — two streamed copies per message — ~200,000 requests: the rows are the work
 *   (BENCH_SCAN_DENSE_MB, default 1140; BENCH_SCAN_DENSE_FILES, default 1000).
 *
 * ccusage is installed from npm into bench/.out on first use: 20.0.24 (a native binary behind a JS
 * shim; its linux-x64 package must install) and 18.0.11 (its last TypeScript release).
 *
 * Timed on each corpus, each as its own process under /usr/bin/time (wall time, peak RSS of the
 * process tree), ours and ccusage 20 taking turns (BENCH_SCAN_RUNS times each, default 3; the
 * median is shown):
 *   ours cold   `the-loop usage scan <corpus> --report` into a fresh data dir
 *   ccusage 20  `ccusage daily --json --offline`
 *   ours warm   after appending 1% new lines across the corpus, `the-loop usage scan` again
 * then ccusage 18 once (it takes long), and the totals are compared: tokens must agree exactly;
 * costs differ by the price tables.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildCorpus, type CorpusShape, corpusStats, prose, uuid } from './scan-corpus.js';

const ROOT = join(import.meta.dirname, '..');
const OUT = join(ROOT, 'bench', '.out');
const BIN = join(ROOT, 'bin', 'the-loop.js');
/** Runs of ours and of ccusage 20 (the median is shown); ccusage 18 runs once (it takes long). */
const RUNS = Number(process.env.BENCH_SCAN_RUNS ?? 3);
/** A corpus of another size than the default is built beside it (the default one is kept). */
function shape(name: string, defaults: { mb: number; files: number }, mb?: string, files?: string) {
  const size = { mb: Number(mb ?? defaults.mb), files: Number(files ?? defaults.files) };
  const own = size.mb === defaults.mb && size.files === defaults.files ? '' : `-${size.mb}mb-${size.files}`;
  return { dir: join(OUT, `${name}${own}`), ...size };
}
const SHAPES: Record<CorpusShape, { dir: string; mb: number; files: number }> = {
  standard: shape(
    'scan-corpus',
    { mb: 1100, files: 1000 },
    process.env.BENCH_SCAN_MB,
    process.env.BENCH_SCAN_FILES,
  ),
  dense: shape(
    'scan-corpus-dense',
    { mb: 1140, files: 1000 },
    process.env.BENCH_SCAN_DENSE_MB,
    process.env.BENCH_SCAN_DENSE_FILES,
  ),
};

// ---------------------------------------------------------------------------------------------
function installCcusage(version: string): string {
  const dir = join(OUT, `ccusage-${version}`);
  const bin = join(dir, 'node_modules', '.bin', 'ccusage');
  if (!existsSync(bin)) {
    console.log(`installing ccusage@${version} into ${dir} …`);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'package.json'), '{"private":true}');
    execFileSync('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', `ccusage@${version}`], {
      cwd: dir,
      stdio: 'inherit',
    });
  }
  return bin;
}

interface Timed {
  wallS: number;
  /** User + system CPU seconds, all threads (less moved by other load on the machine than wall time). */
  cpuS: number;
  rssMB: number;
  stdout: string;
}

/** Run argv under /usr/bin/time: wall seconds, CPU seconds and peak RSS (the process and what it waited for). */
function timed(argv: string[], env: Record<string, string | undefined>): Timed {
  const stats = join(mkdtempSync(join(tmpdir(), 'bench-scan-')), 'time.txt');
  const r = spawnSync('/usr/bin/time', ['-o', stats, '-f', '%e %U %S %M', ...argv], {
    env: { ...process.env, ...env },
    encoding: 'utf8',
    maxBuffer: 256 * 1024 * 1024,
  });
  if (r.status !== 0) throw new Error(`${argv.join(' ')} failed (${r.status}): ${r.stderr.slice(0, 2000)}`);
  const [wall, user, system, rss] = readFileSync(stats, 'utf8').trim().split('\n').at(-1)?.split(' ') ?? [];
  rmSync(join(stats, '..'), { recursive: true, force: true });
  return {
    wallS: Number(wall),
    cpuS: Number(user) + Number(system),
    rssMB: Number(rss) / 1024,
    stdout: r.stdout,
  };
}

/** The run with the median wall time. */
function median(runs: Timed[]): Timed {
  return [...runs].sort((a, b) => a.wallS - b.wallS)[Math.floor(runs.length / 2)] as Timed;
}

interface Totals {
  input: number;
  output: number;
  cacheCreation: number;
  cacheRead: number;
  cost: number | null;
}

function ccusageTotals(stdout: string): Totals {
  const json = JSON.parse(stdout) as { totals: Record<string, number> };
  const t = json.totals;
  return {
    input: t.inputTokens ?? 0,
    output: t.outputTokens ?? 0,
    cacheCreation: t.cacheCreationTokens ?? 0,
    cacheRead: t.cacheReadTokens ?? 0,
    cost: t.totalCost ?? null,
  };
}

/** One appended assistant record (a fresh request) for the warm re-scan. */
function appendedLine(n: number): string {
  return `${JSON.stringify({
    parentUuid: null,
    isSidechain: false,
    message: {
      id: `msg_new${n}_${randomBytes(6).toString('hex')}`,
      type: 'message',
      role: 'assistant',
      model: 'claude-sonnet-4-5-20250929',
      content: [{ type: 'text', text: prose(200) }],
      stop_reason: 'end_turn',
      usage: {
        input_tokens: 10,
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: 100,
        output_tokens: 5,
      },
    },
    requestId: `req_new${n}`,
    type: 'assistant',
    uuid: uuid(),
    timestamp: new Date(Date.UTC(2026, 10, 20)).toISOString(),
    sessionId: 'appended',
  })}\n`;
}

/** What one corpus gave: its ratios against the goals. */
interface Outcome {
  shape: CorpusShape;
  gb: number;
  requests: number;
  time20: number;
  memory20: number;
  faster18: number;
  tokensAgree: boolean;
}

function ourTotals(report: { total: { usage: Record<string, number>; costUsd: number | null } }): Totals {
  const t = report.total.usage;
  return {
    input: t.inputTokens ?? 0,
    output: t.outputTokens ?? 0,
    cacheCreation: t.cacheCreationTokens ?? 0,
    cacheRead: t.cacheReadTokens ?? 0,
    cost: report.total.costUsd,
  };
}

/** The runs on one corpus: ours cold and ccusage 20 taking turns, ours warm after each, then ccusage 18. */
function measure(
  shape: CorpusShape,
  home: string,
  cc: { c20: string; c18: string },
): { colds: Timed[]; warms: Timed[]; c20s: Timed[]; c18: Timed; report: Timed; appended: number } {
  const { dir } = SHAPES[shape];
  const { files, bytes } = corpusStats(dir);
  const env = { CLAUDE_CONFIG_DIR: dir, HOME: home, THE_LOOP_CONFIG: undefined, NO_COLOR: '1' };
  const originalSizes = new Map<string, number>(files.map((f) => [f, statSync(f).size]));
  /** Warm: append 1% new lines (assistant records with fresh ids), spread over the files. */
  const appendOnePercent = (): number => {
    let appended = 0;
    for (let n = 0; appended < bytes * 0.01; n++) {
      const line = appendedLine(n);
      appendFileSync(files[n % files.length] as string, line);
      appended += line.length;
    }
    return appended;
  };
  // Page cache warm for everyone: the corpus is read again before each timed command (the kernel
  // may page out what was not read for a while).
  const warmed = (argv: string[]): Timed => {
    for (const f of files) readFileSync(f);
    return timed(argv, env);
  };
  try {
    const colds: Timed[] = [];
    const warms: Timed[] = [];
    const c20s: Timed[] = [];
    let appended = 0;
    for (let run = 0; run < RUNS; run++) {
      const ours = ['node', BIN, '--data-dir', join(home, `${shape}-${run}`)];
      // Cold: import everything, then the report, in one command.
      colds.push(
        warmed([...ours, 'usage', 'scan', join(dir, 'projects'), '--report', '--since', '3650d', '--json']),
      );
      c20s.push(warmed([cc.c20, 'daily', '--json', '--offline']));
      appended = appendOnePercent();
      warms.push(warmed([...ours, 'usage', 'scan', join(dir, 'projects'), '--json']));
      for (const [f, size] of originalSizes) truncateSync(f, size);
    }
    // The report alone, for reference (a second command on the filled ledger).
    const report = warmed([
      'node',
      BIN,
      '--data-dir',
      join(home, `${shape}-0`),
      'usage',
      '--since',
      '3650d',
      '--json',
    ]);
    const c18 = warmed([cc.c18, 'daily', '--json', '--offline']);
    return { colds, warms, c20s, c18, report, appended };
  } finally {
    // The corpus is reused by the next run: put it back as it was built.
    for (const [f, size] of originalSizes) if (statSync(f).size !== size) truncateSync(f, size);
  }
}

function runCorpus(shape: CorpusShape, home: string, cc: { c20: string; c18: string }): Outcome {
  const { dir, mb, files: fileCount } = SHAPES[shape];
  buildCorpus(dir, shape, mb, fileCount);
  const { files, bytes } = corpusStats(dir);
  console.log(
    `\n=== ${shape} corpus: ${files.length} files, ${(bytes / 1e9).toFixed(2)} GB; ${cpus().length} CPUs, load average ${loadavg()[0]?.toFixed(1)} before the run; node ${process.version}`,
  );
  const m = measure(shape, home, cc);
  const scan = median(m.colds);
  const warm = median(m.warms);
  const c20 = median(m.c20s);
  const { scan: scanSummary, report: ourReport } = JSON.parse(scan.stdout) as {
    scan: { records: number; added: number; workers: number };
    report: { total: { usage: Record<string, number>; costUsd: number | null; rows: number } };
  };
  const warmSummary = JSON.parse(warm.stdout) as {
    bytesRead: number;
    added: number;
    filesRead: number;
    ms: number;
  };
  const row = (name: string, x: Timed) =>
    `${name.padEnd(34)} ${x.wallS.toFixed(2).padStart(7)} s  ${x.cpuS.toFixed(2).padStart(7)} s  ${x.rssMB.toFixed(0).padStart(6)} MB`;
  console.log(`\n${''.padEnd(34)}    wall      CPU     peak RSS`);
  console.log(row(`ours: cold scan --report (${scanSummary.workers} thr.)`, scan));
  console.log(row('  (report alone: usage --json)', m.report));
  console.log(row('ccusage 20.0.24 daily --offline', c20));
  console.log(row('ccusage 18.0.11 daily --offline', m.c18));
  console.log(row(`ours: warm re-scan (+${(m.appended / 1e6).toFixed(1)} MB)`, warm));
  console.log(
    `runs (wall s): ours cold ${m.colds.map((t) => t.wallS.toFixed(2)).join(' ')} · ccusage 20 ${m.c20s.map((t) => t.wallS.toFixed(2)).join(' ')}`,
  );
  const outcome: Outcome = {
    shape,
    gb: bytes / 1e9,
    requests: scanSummary.added,
    time20: scan.wallS / c20.wallS,
    memory20: scan.rssMB / c20.rssMB,
    faster18: m.c18.wallS / scan.wallS,
    tokensAgree: false,
  };
  console.log(
    `\nratios: cold vs ccusage 20: time ${outcome.time20.toFixed(2)}× (goal ≤ 1), memory ${outcome.memory20.toFixed(2)}× (goal < 1)`,
  );
  console.log(`        ccusage 18 / ours cold: ${outcome.faster18.toFixed(1)}× faster (goal ≥ 20×)`);
  console.log(
    `        CPU (all threads; less moved by other load than wall time): ours / ccusage 20 ${(scan.cpuS / c20.cpuS).toFixed(2)}×, ccusage 18 / ours ${(m.c18.cpuS / scan.cpuS).toFixed(1)}×`,
  );
  console.log(
    `        ccusage 20 full / ours warm: ${(c20.wallS / warm.wallS).toFixed(1)}× faster; warm read ${(warmSummary.bytesRead / 1e6).toFixed(1)} MB in ${warmSummary.filesRead} files, added ${warmSummary.added}, its own work (summary.ms) ${warmSummary.ms} ms`,
  );
  console.log(
    `\nrequests: ${scanSummary.records} records read, ${scanSummary.added} unique added; ledger rows ${ourReport.total.rows}`,
  );
  const ours = ourTotals(ourReport);
  const t20 = ccusageTotals(c20.stdout);
  const t18 = ccusageTotals(m.c18.stdout);
  const fmt = (x: Totals) =>
    `in ${x.input} out ${x.output} cache-write ${x.cacheCreation} cache-read ${x.cacheRead} cost ${x.cost === null ? 'unknown' : `$${x.cost.toFixed(2)}`}`;
  console.log(`totals:\n  ours        ${fmt(ours)}\n  ccusage 20  ${fmt(t20)}\n  ccusage 18  ${fmt(t18)}`);
  const same = (a: Totals, b: Totals) =>
    a.input === b.input &&
    a.output === b.output &&
    a.cacheCreation === b.cacheCreation &&
    a.cacheRead === b.cacheRead;
  outcome.tokensAgree = same(ours, t20) && same(ours, t18);
  const costs =
    ours.cost !== null && t20.cost !== null
      ? `$${(ours.cost - t20.cost).toFixed(2)} (${(((ours.cost - t20.cost) / t20.cost) * 100).toFixed(2)}%) — the price tables differ (ours: @pydantic/genai-prices; ccusage: its bundled LiteLLM table)`
      : 'n/a';
  console.log(
    `tokens agree: ccusage 20 ${same(ours, t20) ? 'yes' : 'NO'}, ccusage 18 ${same(ours, t18) ? 'yes' : 'NO'}; cost difference vs ccusage 20: ${costs}`,
  );
  return outcome;
}

function main(): void {
  if (!existsSync(join(ROOT, 'dist', 'cli', 'main.js'))) throw new Error('build first: npm run build');
  mkdirSync(OUT, { recursive: true });
  const which = process.env.BENCH_SCAN_CORPUS ?? 'both';
  const shapes: CorpusShape[] =
    which === 'both' ? ['standard', 'dense'] : which === 'standard' || which === 'dense' ? [which] : [];
  if (shapes.length === 0) throw new Error(`BENCH_SCAN_CORPUS is both, standard or dense, not ${which}`);
  const cc = { c20: installCcusage('20.0.24'), c18: installCcusage('18.0.11') };
  const home = mkdtempSync(join(tmpdir(), 'bench-scan-home-'));
  const outcomes: Outcome[] = [];
  try {
    for (const shape of shapes) outcomes.push(runCorpus(shape, home, cc));
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
  // What a Node.js command costs before it does anything, for reference.
  const floor = median(Array.from({ length: RUNS }, () => timed(['node', '-e', '0'], {})));
  console.log(`\nnode -e 0 (start-up floor): ${floor.wallS.toFixed(2)} s, ${floor.rssMB.toFixed(0)} MB`);
  console.log(
    '\nsummary (cold scan --report; goals: time ≤ 1× and memory < 1× ccusage 20, ≥ 20× faster than ccusage 18)',
  );
  for (const o of outcomes) {
    const ok = o.time20 <= 1 && o.memory20 < 1 && o.faster18 >= 20 && o.tokensAgree;
    console.log(
      `  ${o.shape.padEnd(8)} ${o.gb.toFixed(2)} GB, ${o.requests} requests: time ${o.time20.toFixed(2)}×, memory ${o.memory20.toFixed(2)}× ccusage 20; ${o.faster18.toFixed(1)}× faster than ccusage 18; tokens ${o.tokensAgree ? 'agree' : 'DIFFER'} — ${ok ? 'met' : 'NOT met'}`,
    );
  }
}

main();
