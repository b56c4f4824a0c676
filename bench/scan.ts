/**
 * `the-loop usage scan` against ccusage on the same synthetic Claude Code transcript corpus, side by
 * side in one run:
 *
 *   npm run bench:scan        (BENCH_SCAN_MB, default 1100; BENCH_SCAN_FILES, default 1000)
 *
 * The corpus (bench/.out/scan-corpus/projects/<project>/<session>.jsonl, built once and reused) has
 * the record mix of real transcripts: user prompts, assistant records — one per content block, each
 * repeating the message's id, request id and usage, the duplicates ccusage and we must count once —,
 * large tool results, sidechain (subagent) records, and the other record types (summary,
 * file-history-snapshot, system turn_duration, attachment, queue-operation). Sizes vary per file
 * (a few KB to several MB). ccusage is installed from npm into bench/.out on first use: 20.0.24 (a
 * native binary behind a JS shim; its linux-x64 package must install) and 18.0.11 (its last
 * TypeScript release).
 *
 * Timed, each as its own process under /usr/bin/time (wall time, peak RSS of the process tree):
 *   ours cold   `the-loop usage scan <corpus>` into a fresh data dir, then `the-loop usage --json`
 *   ccusage 20  `ccusage daily --json --offline`
 *   ccusage 18  `ccusage daily --json --offline`
 *   ours warm   after appending 1% new lines across the corpus, `the-loop usage scan` again
 * and the totals are compared: tokens must agree exactly; costs differ by the price tables.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';

const ROOT = join(import.meta.dirname, '..');
const OUT = join(ROOT, 'bench', '.out');
const CORPUS = join(OUT, 'scan-corpus');
const TARGET_MB = Number(process.env.BENCH_SCAN_MB ?? 1100);
const FILES = Number(process.env.BENCH_SCAN_FILES ?? 1000);
const BIN = join(ROOT, 'bin', 'the-loop.js');
/** Runs of ours and of ccusage 20 (the median is shown); ccusage 18 runs once (it takes long). */
const RUNS = Number(process.env.BENCH_SCAN_RUNS ?? 3);

// ---------------------------------------------------------------------------------------------
// A deterministic PRNG, so the corpus is the same every time it is built.
let seed = 0x2f6b_a1c3;
const rand = () => {
  seed ^= seed << 13;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  return (seed >>> 0) / 0x1_0000_0000;
};
const pick = <T>(list: readonly T[]): T => list[Math.floor(rand() * list.length)] as T;
const int = (lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1));
const hex = (n: number) => Array.from({ length: n }, () => '0123456789abcdef'[int(0, 15)]).join('');
const uuid = () => `${hex(8)}-${hex(4)}-4${hex(3)}-a${hex(3)}-${hex(12)}`;
const WORDS =
  'the a function return value error file test build change import export const let type interface module package config server client request response token cache model session turn engine runner'.split(
    ' ',
  );
const prose = (n: number) => Array.from({ length: n }, () => pick(WORDS)).join(' ');
const CODE_POOL = Array.from({ length: 64 }, () =>
  Array.from(
    { length: 40 },
    () => `  const ${pick(WORDS)}_${int(0, 999)} = ${pick(WORDS)}(${int(0, 99)}); // ${prose(6)}`,
  ).join('\n'),
);
const code = (bytes: number) => {
  let s = '';
  while (s.length < bytes) s += `${pick(CODE_POOL)}\n`;
  return s.slice(0, bytes);
};
const MODELS = [
  ['claude-sonnet-4-5-20250929', 0.7],
  ['claude-opus-4-1-20250805', 0.15],
  ['claude-haiku-4-5-20251001', 0.15],
] as const;
const model = () => {
  const r = rand();
  let acc = 0;
  for (const [m, p] of MODELS) {
    acc += p;
    if (r < acc) return m;
  }
  return MODELS[0][0];
};

function session(file: string, project: string, bytes: number, start: number): number {
  const sessionId = uuid();
  const cwd = `/home/dev/${project}`;
  const base = {
    cwd,
    sessionId,
    version: '2.1.197',
    gitBranch: 'main',
    userType: 'external',
    entrypoint: 'cli',
  };
  const lines: string[] = [];
  let size = 0;
  let at = start;
  let parent: string | null = null;
  const push = (record: Record<string, unknown>) => {
    const line = JSON.stringify(record);
    lines.push(line);
    size += line.length + 1;
  };
  push({ type: 'summary', summary: prose(8), leafUuid: uuid() });
  let requests = 0;
  while (size < bytes) {
    at += int(5_000, 600_000);
    const promptId = uuid();
    const userUuid = uuid();
    push({
      type: 'file-history-snapshot',
      messageId: userUuid,
      snapshot: { messageId: userUuid, trackedFileBackups: {}, timestamp: new Date(at).toISOString() },
      isSnapshotUpdate: false,
    });
    push({
      ...base,
      parentUuid: parent,
      isSidechain: false,
      promptId,
      type: 'user',
      message: { role: 'user', content: prose(int(10, 300)) },
      uuid: userUuid,
      timestamp: new Date(at).toISOString(),
    });
    parent = userUuid;
    if (rand() < 0.3)
      push({
        ...base,
        parentUuid: parent,
        isSidechain: false,
        type: 'attachment',
        attachment: { type: 'skill_listing', content: prose(40) },
        uuid: uuid(),
        timestamp: new Date(at).toISOString(),
      });
    const steps = int(1, 6);
    for (let step = 0; step < steps; step++) {
      at += int(1_000, 60_000);
      const sidechain = rand() < 0.1;
      const messageId = `msg_${randomBytes(12).toString('base64url')}`;
      const requestId = `req_${randomBytes(12).toString('base64url')}`;
      const written = rand() < 0.5 ? int(0, 20_000) : 0;
      const usage = {
        input_tokens: int(1, 4000),
        cache_creation_input_tokens: written,
        cache_read_input_tokens: int(0, 150_000),
        output_tokens: int(1, 3000),
        service_tier: 'standard',
        // As Claude Code writes it: the same cache writes, split by lifetime.
        cache_creation: { ephemeral_5m_input_tokens: written, ephemeral_1h_input_tokens: 0 },
        server_tool_use: { web_search_requests: 0, web_fetch_requests: 0 },
      };
      const m = model();
      const blocks: Array<Record<string, unknown>> = [];
      if (rand() < 0.4)
        blocks.push({
          type: 'thinking',
          thinking: prose(int(20, 200)),
          signature: randomBytes(64).toString('base64'),
        });
      blocks.push({ type: 'text', text: prose(int(5, 250)) });
      const tool = step < steps - 1 || rand() < 0.3;
      const toolId = `toolu_${randomBytes(12).toString('base64url')}`;
      if (tool)
        blocks.push({
          type: 'tool_use',
          id: toolId,
          name: pick(['Read', 'Edit', 'Bash', 'Grep', 'Write']),
          input: { file_path: `${cwd}/src/${pick(WORDS)}.ts`, command: prose(6) },
        });
      for (const block of blocks) {
        const id = uuid();
        push({
          ...base,
          parentUuid: parent,
          isSidechain: sidechain,
          message: {
            id: messageId,
            type: 'message',
            role: 'assistant',
            model: m,
            content: [block],
            stop_reason: tool ? 'tool_use' : 'end_turn',
            stop_sequence: null,
            usage,
          },
          requestId,
          type: 'assistant',
          uuid: id,
          timestamp: new Date(at).toISOString(),
        });
        parent = id;
      }
      requests += 1;
      if (tool) {
        const output = code(rand() < 0.15 ? int(20_000, 80_000) : int(200, 6_000));
        const id = uuid();
        push({
          ...base,
          parentUuid: parent,
          isSidechain: sidechain,
          promptId,
          type: 'user',
          message: { role: 'user', content: [{ tool_use_id: toolId, type: 'tool_result', content: output }] },
          uuid: id,
          timestamp: new Date(at + 500).toISOString(),
          toolUseResult: { stdout: output, stderr: '', interrupted: false, isImage: false },
        });
        parent = id;
      }
    }
    push({
      ...base,
      parentUuid: parent,
      isSidechain: false,
      type: 'system',
      subtype: 'turn_duration',
      durationMs: int(1000, 90_000),
      uuid: uuid(),
      timestamp: new Date(at).toISOString(),
    });
    if (rand() < 0.2)
      push({
        type: 'queue-operation',
        operation: 'enqueue',
        timestamp: new Date(at).toISOString(),
        sessionId,
        content: prose(5),
      });
  }
  writeFileSync(file, `${lines.join('\n')}\n`);
  return requests;
}

function buildCorpus(): void {
  const marker = join(CORPUS, `.built-${TARGET_MB}mb-${FILES}files`);
  if (existsSync(marker)) return;
  rmSync(CORPUS, { recursive: true, force: true });
  const t0 = Date.now();
  const target = TARGET_MB * 1e6;
  // Sizes: a long tail — most sessions small, a few large — scaled to the target.
  const weights = Array.from({ length: FILES }, () => Math.exp(rand() * 4));
  const sum = weights.reduce((a, b) => a + b, 0);
  const start = Date.UTC(2026, 10, 1);
  let requests = 0;
  for (const [i, w] of weights.entries()) {
    const project = `-home-dev-project-${i % 40}`;
    const dir = join(CORPUS, 'projects', project);
    mkdirSync(dir, { recursive: true });
    requests += session(
      join(dir, `${uuid()}.jsonl`),
      project,
      (w / sum) * target,
      start + int(0, 25) * 86_400_000,
    );
    if (i % 100 === 99) process.stdout.write(`  corpus: ${i + 1}/${FILES} files\r`);
  }
  writeFileSync(marker, String(requests));
  console.log(`built the corpus in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}

function corpusStats(): { files: string[]; bytes: number } {
  const files: string[] = [];
  let bytes = 0;
  for (const project of readdirSync(join(CORPUS, 'projects'))) {
    for (const name of readdirSync(join(CORPUS, 'projects', project))) {
      const path = join(CORPUS, 'projects', project, name);
      files.push(path);
      bytes += statSync(path).size;
    }
  }
  return { files, bytes };
}

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
  rssMB: number;
  stdout: string;
}

/** Run argv under /usr/bin/time: wall seconds and peak RSS (the process and what it waited for). */
function timed(argv: string[], env: Record<string, string | undefined>): Timed {
  const stats = join(mkdtempSync(join(tmpdir(), 'bench-scan-')), 'time.txt');
  const r = spawnSync('/usr/bin/time', ['-o', stats, '-f', '%e %M', ...argv], {
    env: { ...process.env, ...env },
    encoding: 'utf8',
    maxBuffer: 256 * 1024 * 1024,
  });
  if (r.status !== 0) throw new Error(`${argv.join(' ')} failed (${r.status}): ${r.stderr.slice(0, 2000)}`);
  const [wall, rss] = readFileSync(stats, 'utf8').trim().split('\n').at(-1)?.split(' ') ?? [];
  rmSync(join(stats, '..'), { recursive: true, force: true });
  return { wallS: Number(wall), rssMB: Number(rss) / 1024, stdout: r.stdout };
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

function main(): void {
  if (!existsSync(join(ROOT, 'dist', 'cli', 'main.js'))) throw new Error('build first: npm run build');
  mkdirSync(OUT, { recursive: true });
  buildCorpus();
  const { files, bytes } = corpusStats();
  const cc20 = installCcusage('20.0.24');
  const cc18 = installCcusage('18.0.11');
  const home = mkdtempSync(join(tmpdir(), 'bench-scan-home-'));
  const env = { CLAUDE_CONFIG_DIR: CORPUS, HOME: home, THE_LOOP_CONFIG: undefined, NO_COLOR: '1' };
  const originalSizes = new Map<string, number>(files.map((f) => [f, statSync(f).size]));
  /** Warm: append 1% new lines (assistant records with fresh ids), spread over the files. */
  const appendOnePercent = (): number => {
    let appended = 0;
    for (let n = 0; appended < bytes * 0.01; n++) {
      const file = files[n % files.length] as string;
      const line = `${JSON.stringify({
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
      appendFileSync(file, line);
      appended += line.length;
    }
    return appended;
  };
  console.log(
    `corpus: ${files.length} files, ${(bytes / 1e9).toFixed(2)} GB; ${cpus().length} CPUs, load average ${loadavg()[0]?.toFixed(1)} before the run; node ${process.version}`,
  );
  try {
    // Page cache warm for everyone: read the corpus once first.
    for (const f of files) readFileSync(f);

    // Each of ours runs RUNS times (a fresh data dir each time), ccusage 20 too; the median is shown.
    const colds: Timed[] = [];
    const warms: Timed[] = [];
    let appended = 0;
    for (let run = 0; run < RUNS; run++) {
      const ours = ['node', BIN, '--data-dir', join(home, `data-${run}`)];
      // Cold: import everything, then the report, in one command.
      colds.push(
        timed(
          [...ours, 'usage', 'scan', join(CORPUS, 'projects'), '--report', '--since', '3650d', '--json'],
          env,
        ),
      );
      appended = appendOnePercent();
      warms.push(timed([...ours, 'usage', 'scan', join(CORPUS, 'projects'), '--json'], env));
      for (const [f, size] of originalSizes) truncateSync(f, size);
    }
    const scan = median(colds);
    const warm = median(warms);
    const { scan: scanSummary, report: ourReport } = JSON.parse(scan.stdout) as {
      scan: { records: number; added: number; workers: number };
      report: { total: { usage: Record<string, number>; costUsd: number | null; rows: number } };
    };
    // The report alone, for reference (a second command on the filled ledger).
    const report = timed(
      ['node', BIN, '--data-dir', join(home, 'data-0'), 'usage', '--since', '3650d', '--json'],
      env,
    );
    const c20 = median(
      Array.from({ length: RUNS }, () => timed([cc20, 'daily', '--json', '--offline'], env)),
    );
    const c18 = timed([cc18, 'daily', '--json', '--offline'], env);
    const warmSummary = JSON.parse(warm.stdout) as {
      bytesRead: number;
      added: number;
      filesRead: number;
      ms: number;
    };
    // What any Node.js command costs before it does anything: the floor under a warm re-scan.
    const floor = median(Array.from({ length: RUNS }, () => timed(['node', '-e', '0'], env)));

    const t = ourReport.total.usage;
    const oursTotals: Totals = {
      input: t.inputTokens ?? 0,
      output: t.outputTokens ?? 0,
      cacheCreation: t.cacheCreationTokens ?? 0,
      cacheRead: t.cacheReadTokens ?? 0,
      cost: ourReport.total.costUsd,
    };
    const t20 = ccusageTotals(c20.stdout);
    const t18 = ccusageTotals(c18.stdout);
    const oursCold = scan.wallS;
    const row = (name: string, x: Timed | { wallS: number; rssMB: number }) =>
      `${name.padEnd(34)} ${x.wallS.toFixed(2).padStart(7)} s  ${x.rssMB.toFixed(0).padStart(6)} MB`;
    console.log(`\n${''.padEnd(34)}    wall     peak RSS`);
    console.log(row(`ours: cold scan --report (${scanSummary.workers} thr.)`, scan));
    console.log(row('  (report alone: usage --json)', report));
    console.log(row('ccusage 20.0.24 daily --offline', c20));
    console.log(row('ccusage 18.0.11 daily --offline', c18));
    console.log(row(`ours: warm re-scan (+${(appended / 1e6).toFixed(1)} MB)`, warm));
    console.log(row('  (node -e 0: start-up floor)', floor));
    console.log(
      `\nratios: cold vs ccusage 20: time ${(oursCold / c20.wallS).toFixed(2)}× (goal ≤ 1), memory ${(scan.rssMB / c20.rssMB).toFixed(2)}× (goal < 1)`,
    );
    console.log(`        ccusage 18 / ours cold: ${(c18.wallS / oursCold).toFixed(1)}× faster (goal ≥ 20×)`);
    console.log(
      `        ccusage 20 full / ours warm: ${(c20.wallS / warm.wallS).toFixed(1)}× faster (goal ≥ 20×); warm read ${(warmSummary.bytesRead / 1e6).toFixed(1)} MB in ${warmSummary.filesRead} files, added ${warmSummary.added}`,
    );
    console.log(
      `        warm re-scan's own work (reading, parsing, inserting; summary.ms): ${warmSummary.ms} ms; ccusage 20 full / that: ${((c20.wallS * 1000) / warmSummary.ms).toFixed(1)}×; a Node.js process takes ${floor.wallS.toFixed(2)} s to start, so 20× on wall time (${((c20.wallS / 20) * 1000).toFixed(0)} ms) is below any Node.js command`,
    );
    console.log(
      `\nrequests: ${scanSummary.records} records read, ${scanSummary.added} unique added; ledger rows ${ourReport.total.rows}`,
    );
    const fmt = (x: Totals) =>
      `in ${x.input} out ${x.output} cache-write ${x.cacheCreation} cache-read ${x.cacheRead} cost ${x.cost === null ? 'unknown' : `$${x.cost.toFixed(2)}`}`;
    console.log(
      `totals (before the warm append):\n  ours        ${fmt(oursTotals)}\n  ccusage 20  ${fmt(t20)}\n  ccusage 18  ${fmt(t18)}`,
    );
    const same = (a: Totals, b: Totals) =>
      a.input === b.input &&
      a.output === b.output &&
      a.cacheCreation === b.cacheCreation &&
      a.cacheRead === b.cacheRead;
    console.log(
      `tokens agree: ccusage 20 ${same(oursTotals, t20) ? 'yes' : 'NO'}, ccusage 18 ${same(oursTotals, t18) ? 'yes' : 'NO'}; cost difference vs ccusage 20: ${oursTotals.cost !== null && t20.cost !== null ? `$${(oursTotals.cost - t20.cost).toFixed(2)} (${(((oursTotals.cost - t20.cost) / t20.cost) * 100).toFixed(2)}%) — the price tables differ (ours: src/ledger/pricing.ts, list prices as of 2025-11; ccusage: its bundled LiteLLM table)` : 'n/a'}`,
    );
  } finally {
    // The corpus is reused by the next run: put it back as it was built.
    for (const [f, size] of originalSizes) if (statSync(f).size !== size) truncateSync(f, size);
    rmSync(home, { recursive: true, force: true });
  }
}

main();
