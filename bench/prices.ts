/**
 * `npm run bench:prices`: what `the-loop usage` says a corpus cost, against ccusage 20.0.24 on the
 * same corpus, model by model (issue 16: every row priced, token totals equal, cost within 1% for the
 * models both price, a made-up model unknown and named).
 *
 * The corpus, in a temp dir:
 *   Claude Code   transcripts written here (`<root>/claude/projects/…/*.jsonl`): claude-opus-4-8,
 *                 claude-sonnet-4-5-20250929 (one request over 200k input: long-context rates),
 *                 claude-haiku-4-5-20251001, some requests with 1-hour cache writes (the
 *                 `cache_creation` split), every message written twice (streamed copies, counted
 *                 once), and a made-up `claude-imaginary-9-9`. Ours: `the-loop usage scan`.
 *   Codex         real `codex exec` turns (the pinned CLI, model gpt-5.5) through `the-loop run`
 *                 against the mock Responses API; ours: the turns' rows; ccusage: the rollouts
 *                 Codex wrote in its CODEX_HOME.
 *   Gemini        real `gemini` turns the same way against the mock Gemini API; ccusage: the chat
 *                 files the CLI wrote under its HOME.
 * The engines run behind the gateway (the default), so their rows are the model responses metered at
 * the wire, each naming its model; without the sandbox, so they write their files where ccusage looks.
 *
 * ccusage 20.0.24 is installed into bench/.out on first use (as bench:scan does) and runs as
 * `ccusage daily --json --offline` with HOME, CODEX_HOME and CLAUDE_CONFIG_DIR pointed at the corpus.
 * Kinds differ: ours are disjoint (reasoning apart from output; Codex's input without its cached
 * part), ccusage folds reasoning into output — the table compares like with like and says how.
 * Figures are printed, never asserted.
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { prepareCodexHome } from '../test/fixtures/engine-homes/codex.js';
import { prepareGeminiHome } from '../test/fixtures/engine-homes/gemini.js';
import { startGeminiMock } from '../test/fixtures/mock-apis/gemini.js';
import { startOpenAIMock } from '../test/fixtures/mock-apis/openai.js';
import type { MockUsage } from '../test/fixtures/mock-apis/types.js';
import { compare, ours, theirs } from './prices-compare.js';
import { claudeCorpus } from './prices-corpus.js';

const ROOT = join(import.meta.dirname, '..');
const OUT = join(ROOT, 'bench', '.out');
const BIN = join(ROOT, 'bin', 'the-loop.js');
const NODE_BIN = join(ROOT, 'node_modules', '.bin');

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

/** Run to its exit (argv, no shell); stdout, or an error with both streams. */
function run(file: string, args: string[], env: NodeJS.ProcessEnv, cwd: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => {
      out += c;
    });
    child.stderr.setEncoding('utf8').on('data', (c: string) => {
      err += c;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 300_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      if (code === 0) resolve(out);
      else reject(new Error(`${file} ${args.join(' ')} exited ${code}\n${out}\n${err}`));
    });
  });
}

/** The usage each model turn of a mock reports: a few turns, all kinds, under any tier threshold. */
const turnUsage = (i: number): MockUsage => ({
  input: 18_000 + i * 1111,
  output: 900 + i * 37,
  cacheRead: 6000 + i * 500,
  cacheCreation: 0,
  reasoning: 300 + i * 11,
});

async function engineTurns(
  root: string,
  work: string,
): Promise<{ env: NodeJS.ProcessEnv; homes: Record<string, string> }> {
  const script = [0, 1, 2].map((i) => ({ kind: 'text' as const, text: `answer ${i}`, usage: turnUsage(i) }));
  const openai = await startOpenAIMock({ script });
  const gemini = await startGeminiMock({ script });
  try {
    // One home for both (ccusage reads ~/.gemini and $CODEX_HOME of one environment).
    const engines = join(root, 'engines');
    const codexHome = prepareCodexHome(engines, openai.url, work);
    const geminiHome = prepareGeminiHome(engines, gemini.url);
    const configPath = join(root, 'config.yaml');
    writeFileSync(
      configPath,
      stringify({
        dataDir: 'data',
        defaults: { engine: 'codex', cwd: work, backstopSeconds: 240 },
        // The gateway meters each model response at the wire (Codex's own events name no model: its
        // turn rows would be unpriced); no sandbox, so the engines keep their files where ccusage looks.
        gateway: { port: 0 },
        sandbox: { mode: 'none' },
        engines: {
          // OPENAI_BASE_URL: where the gateway forwards Codex's requests (its provider is in config.toml).
          codex: {
            binary: join(NODE_BIN, 'codex'),
            env: { ...codexHome.env, OPENAI_BASE_URL: `${openai.url}/v1` },
          },
          gemini: { binary: join(NODE_BIN, 'gemini'), env: geminiHome.env },
        },
      }),
    );
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      LANG: 'C.UTF-8',
      THE_LOOP_CONFIG: configPath,
      [codexHome.credentialEnv]: 'sk-bench-not-a-key',
      [geminiHome.credentialEnv]: 'bench-not-a-key',
    };
    for (const [engine, item] of [
      ['codex', 'github:bench/prices#1'],
      ['gemini', 'github:bench/prices#2'],
    ] as const) {
      // Two turns: the second resumes the session (Codex reports its thread's running total).
      for (const prompt of ['Say one word.', 'Say another word.'])
        await run(process.execPath, [BIN, 'run', item, '--engine', engine, prompt], env, work);
    }
    return {
      env,
      homes: { HOME: codexHome.env.HOME ?? '', CODEX_HOME: codexHome.env.CODEX_HOME ?? '' },
    };
  } finally {
    await openai.close();
    await gemini.close();
  }
}

async function main(): Promise<void> {
  if (!existsSync(join(ROOT, 'dist'))) throw new Error('build first: npm run build');
  const cc = installCcusage('20.0.24');
  const root = mkdtempSync(join(tmpdir(), 'the-loop-bench-prices-'));
  try {
    const work = join(root, 'work');
    mkdirSync(work);
    const claudeDir = join(root, 'claude');
    const written = claudeCorpus(
      join(claudeDir, 'projects', `-bench-${randomUUID().slice(0, 8)}`),
      new Date(),
    );
    console.log(
      `prices bench: ${written.files} Claude Code transcripts, ${written.requests} requests (${written.lines} lines); real codex and gemini turns …`,
    );
    const { env, homes } = await engineTurns(root, work);
    await run(process.execPath, [BIN, 'usage', 'scan', join(claudeDir, 'projects')], env, work);
    const mine = ours(
      await run(process.execPath, [BIN, 'usage', '--json', '--by', 'model', '--since', '30d'], env, work),
    );
    const ccEnv = { PATH: process.env.PATH, LANG: 'C.UTF-8', ...homes, CLAUDE_CONFIG_DIR: claudeDir };
    const theirsRows = theirs(await run(cc, ['daily', '--json', '--offline', '--by-agent'], ccEnv, work));
    compare(mine, theirsRows, written.longContext);
  } finally {
    // BENCH_PRICES_KEEP=1 keeps the corpus and the ledger to look at.
    if (process.env.BENCH_PRICES_KEEP === '1') console.log(`kept: ${root}`);
    else rmSync(root, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
