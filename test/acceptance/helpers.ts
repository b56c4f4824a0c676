import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { expect } from 'vitest';
import { stringify } from 'yaml';
import type { Usage } from '../../src/core/events.js';
import type { MockApi, MockOptions, MockUsage } from '../fixtures/mock-apis/types.js';
import { NODE_BIN_DIR, ROOT, runCli } from '../helpers/cli.js';

export const ARGV_RECORDER = join(ROOT, 'test/fixtures/bin/argv-recorder.mjs');

export interface EngineUnderTest {
  engine: string;
  realBinary: string;
  startMock: (options: MockOptions) => Promise<MockApi>;
  prepareHome: (
    root: string,
    mockUrl: string,
    cwd: string,
  ) => { env: Record<string, string>; credentialEnv: string };
  /** What our registry should hold for one turn, from what the mock reported for that turn's requests. */
  expectedUsage: (reported: MockUsage[]) => Usage;
  /** Header on the mock that carries the credential (to prove it was delivered). */
  credentialHeader: (headers: Record<string, string | string[] | undefined>) => string | undefined;
  /**
   * The engine's variables that name its API's base URL when its home does not (Codex reads its
   * provider from config.toml): where the gateway forwards the engine's model requests.
   */
  gatewayEnv?: (mockUrl: string) => Record<string, string>;
}

export const realBinary = (name: string) => join(NODE_BIN_DIR, name);

const sum = (list: MockUsage[], pick: (u: MockUsage) => number | undefined) =>
  list.reduce((n, u) => n + (pick(u) ?? 0), 0);

/** Anthropic semantics: every kind is already disjoint. */
export const anthropicUsage = (r: MockUsage[]): Usage => ({
  inputTokens: sum(r, (u) => u.input),
  outputTokens: sum(r, (u) => u.output),
  cacheReadTokens: sum(r, (u) => u.cacheRead),
  cacheCreationTokens: sum(r, (u) => u.cacheCreation),
  reasoningTokens: 0,
});

/** OpenAI semantics: cached ⊂ input and reasoning ⊂ output; we keep kinds disjoint. */
export const openaiUsage = (r: MockUsage[]): Usage => ({
  inputTokens: sum(r, (u) => u.input) - sum(r, (u) => u.cacheRead) - sum(r, (u) => u.cacheCreation),
  outputTokens: sum(r, (u) => u.output) - sum(r, (u) => u.reasoning),
  cacheReadTokens: sum(r, (u) => u.cacheRead),
  cacheCreationTokens: sum(r, (u) => u.cacheCreation),
  reasoningTokens: sum(r, (u) => u.reasoning),
});

export interface TwoTurnRun {
  root: string;
  workdir: string;
  dataDir: string;
  mock: MockApi;
  canary: string;
  argvFile: string;
  outputs: { stdout: string; stderr: string }[];
  turnRequests: number[];
  show: {
    session: Record<string, unknown>;
    turns: Array<{
      seq: number;
      status: string;
      endReason: string;
      usage: Usage | null;
      error: string | null;
    }>;
  };
  cleanup: () => Promise<void>;
}

/**
 * Two turns of one work item through `the-loop run`, against the real engine CLI and its mock API,
 * with a canary credential in the-loop's environment.
 */
export async function runTwoTurns(
  e: EngineUnderTest,
  prompts: [string, string],
  replies: [string, string],
  /** Added to the engine's config override (e.g. `{ otel: { enabled: true } }`). */
  engineConfig: Record<string, unknown> = {},
  /** Added to the top level of the config (e.g. `{ gateway: { enabled: false } }`). */
  topConfig: Record<string, unknown> = {},
): Promise<TwoTurnRun> {
  const root = mkdtempSync(join(tmpdir(), `the-loop-${e.engine}-`));
  const workdir = join(root, 'work');
  mkdirSync(workdir);
  // The engine runs in the sandbox: the stand-in that records its argv writes only here.
  const recordDir = join(root, 'record');
  mkdirSync(recordDir);
  const usage1: MockUsage = { input: 321, output: 12, cacheRead: 40, cacheCreation: 7, reasoning: 3 };
  const usage2: MockUsage = { input: 654, output: 34, cacheRead: 300, cacheCreation: 0, reasoning: 5 };
  const mock = await e.startMock({
    script: [
      { kind: 'text', text: replies[0], usage: usage1 },
      { kind: 'text', text: replies[1], usage: usage2 },
    ],
  });
  const home = e.prepareHome(join(root, 'engine'), mock.url, workdir);
  const argvFile = join(recordDir, 'argv.jsonl');
  const canary = `canary-${e.engine}-${Math.random().toString(36).slice(2)}-SECRET`;
  const configPath = join(root, 'config.yaml');
  writeFileSync(
    configPath,
    stringify({
      dataDir: 'data',
      defaults: { engine: e.engine, backstopSeconds: 120, killGraceSeconds: 2 },
      gateway: { port: 0 },
      sandbox: { writable: [recordDir] },
      ...topConfig,
      engines: {
        [e.engine]: {
          binary: ARGV_RECORDER,
          env: {
            ...home.env,
            ...e.gatewayEnv?.(mock.url),
            REAL_BINARY: e.realBinary,
            ARGV_RECORD_FILE: argvFile,
          },
          ...engineConfig,
        },
      },
    }),
  );
  const env = { [home.credentialEnv]: canary, THE_LOOP_CONFIG: configPath };
  try {
    return await twoTurns();
  } catch (error) {
    // A failed run must not leave its temp dir and mock behind.
    await mock.close();
    rmSync(root, { recursive: true, force: true });
    throw error;
  }
  async function twoTurns(): Promise<TwoTurnRun> {
    const outputs: { stdout: string; stderr: string }[] = [];
    const turnRequests: number[] = [];
    const wi = `github:acme/${e.engine}-demo#7`;
    for (const [i, prompt] of prompts.entries()) {
      const args = i === 0 ? ['run', wi, '--cwd', workdir, '--', prompt] : ['run', wi, '--', prompt];
      const res = await runCli(args, { cwd: root, env, timeoutMs: 150_000 });
      outputs.push({ stdout: res.stdout, stderr: res.stderr });
      expect(res.stderr, `turn ${i + 1} stderr`).toBe('');
      expect(res.code, `turn ${i + 1} exit code; stdout:\n${res.stdout}`).toBe(0);
      turnRequests.push(mock.reported.length);
    }
    const shown = await runCli(['sessions', 'show', wi, '--json'], { cwd: root, env });
    outputs.push({ stdout: shown.stdout, stderr: shown.stderr });
    const list = await runCli(['sessions', 'list', '--all', '--json'], { cwd: root, env });
    outputs.push({ stdout: list.stdout, stderr: list.stderr });
    expect(JSON.parse(list.stdout)).toHaveLength(1);
    return {
      root,
      workdir,
      dataDir: join(root, 'data'),
      mock,
      canary,
      argvFile,
      outputs,
      turnRequests,
      show: JSON.parse(shown.stdout) as TwoTurnRun['show'],
      cleanup: async () => {
        await mock.close();
        rmSync(root, { recursive: true, force: true });
      },
    };
  }
}

/**
 * The usage ledger holds the run's turns: token sums equal to what the mock reported, one row per
 * turn (result-event meters), priced, paid by an API key told apart by a fingerprint — and the
 * report says so without the credential anywhere in it.
 */
export async function expectLedgerMatches(run: TwoTurnRun, e: EngineUnderTest, meter: string): Promise<void> {
  const env = { THE_LOOP_CONFIG: join(run.root, 'config.yaml') };
  const json = await runCli(['usage', '--json', '--by', 'payer'], { cwd: run.root, env });
  const text = await runCli(['usage', '--by', 'engine'], { cwd: run.root, env });
  run.outputs.push(
    { stdout: json.stdout, stderr: json.stderr },
    { stdout: text.stdout, stderr: text.stderr },
  );
  expect(json.code, json.stderr).toBe(0);
  const report = JSON.parse(json.stdout) as {
    total: { rows: number; turns: number; usage: Usage; costUsd: number | null };
    groups: Array<{ key: string; rows: number }>;
    notIncluded: { unmeteredCount: number };
  };
  expect(report.total.usage).toEqual(e.expectedUsage(run.mock.reported));
  // At the wire every response with usage is a row: side calls too (Gemini's router answers with
  // zero tokens; the mock reports only model turns).
  if (meter !== 'wire') expect(report.total).toMatchObject({ rows: 2, turns: 2 });
  else expect(report.total.turns).toBe(2);
  expect(report.notIncluded.unmeteredCount).toBe(0);
  expect(report.groups).toHaveLength(1);
  expect(report.groups[0]?.key).toMatch(/^api-key key:[0-9a-f]{12}$/);
  expect(text.stdout).toContain(e.engine);
  // Nothing unmetered; a mock model missing from the price table is unknown, never $0.
  expect(text.stdout).not.toMatch(/unmetered run/);
  expect(text.stdout).not.toContain('$0.00');
  if (report.total.costUsd === null) expect(text.stdout).toMatch(/estimated cost unknown/);
  // The ledger knows where each figure came from: one row per turn of the engine's result meter.
  const db = new Database(join(run.dataDir, 'the-loop.db'), { readonly: true });
  try {
    const all = db
      .prepare(
        'SELECT meter, source_id, payer_kind, cost_usd, cost_basis, input_tokens + output_tokens AS tokens FROM usage_ledger ORDER BY id',
      )
      .all() as Array<{
      tokens: number;
      meter: string;
      source_id: string;
      payer_kind: string;
      cost_usd: number | null;
      cost_basis: string | null;
    }>;
    const rows = meter === 'wire' ? all.filter((r) => r.tokens > 0) : all;
    // The wire meter has a row per model response (keyed by its id); result meters one per turn.
    const perResponse = meter === 'wire';
    expect(rows.map((r) => [r.meter, r.payer_kind])).toEqual(
      Array.from({ length: perResponse ? run.mock.reported.length : 2 }, () => [meter, 'api-key']),
    );
    for (const r of rows) {
      expect(r.source_id).toMatch(perResponse ? /^(anthropic|openai|gemini):\S+$/ : /^turn:\d+$/);
      // A cost has its basis; an unknown cost (a model without a price) is NULL, never 0.
      if (r.cost_usd === null) expect(r.cost_basis).toBeNull();
      else expect(['engine-reported', 'list-price']).toContain(r.cost_basis);
    }
  } finally {
    db.close();
  }
}

/** The canary must appear in none of: the engine's argv, the data dir (DB, WAL, logs), any CLI output. */
export function expectCanaryNowhere(run: TwoTurnRun): void {
  const argv = readFileSync(run.argvFile, 'utf8');
  expect(argv.trim().split('\n')).toHaveLength(2);
  expect(argv).not.toContain(run.canary);
  for (const name of ['the-loop.db', 'the-loop.db-wal', 'the-loop.db-shm', 'the-loop.log']) {
    const path = join(run.dataDir, name);
    if (!existsSync(path)) continue;
    expect(readFileSync(path).includes(run.canary), `${name} holds the canary`).toBe(false);
  }
  expect(readFileSync(join(run.dataDir, 'the-loop.log'), 'utf8')).toMatch(/turn ended/);
  for (const out of run.outputs) {
    expect(out.stdout).not.toContain(run.canary);
    expect(out.stderr).not.toContain(run.canary);
  }
}

/** Gemini semantics: cached ⊂ prompt tokens; thinking tokens apart from output; no cache writes. */
export const geminiUsage = (r: MockUsage[]): Usage => ({
  inputTokens: sum(r, (u) => u.input) - sum(r, (u) => u.cacheRead),
  outputTokens: sum(r, (u) => u.output),
  cacheReadTokens: sum(r, (u) => u.cacheRead),
  cacheCreationTokens: 0,
  reasoningTokens: sum(r, (u) => u.reasoning),
});
