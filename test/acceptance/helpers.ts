import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { stringify } from 'yaml';
import type { Usage } from '../../src/engines/protocols/types.js';
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
): Promise<TwoTurnRun> {
  const root = mkdtempSync(join(tmpdir(), `the-loop-${e.engine}-`));
  const workdir = join(root, 'work');
  mkdirSync(workdir);
  const usage1: MockUsage = { input: 321, output: 12, cacheRead: 40, cacheCreation: 7, reasoning: 3 };
  const usage2: MockUsage = { input: 654, output: 34, cacheRead: 300, cacheCreation: 0, reasoning: 5 };
  const mock = await e.startMock({
    script: [
      { kind: 'text', text: replies[0], usage: usage1 },
      { kind: 'text', text: replies[1], usage: usage2 },
    ],
  });
  const home = e.prepareHome(join(root, 'engine'), mock.url, workdir);
  const argvFile = join(root, 'argv.jsonl');
  const canary = `canary-${e.engine}-${Math.random().toString(36).slice(2)}-SECRET`;
  const configPath = join(root, 'config.yaml');
  writeFileSync(
    configPath,
    stringify({
      dataDir: 'data',
      defaults: { engine: e.engine, backstopSeconds: 120, killGraceSeconds: 2 },
      engines: {
        [e.engine]: {
          binary: ARGV_RECORDER,
          env: { ...home.env, REAL_BINARY: e.realBinary, ARGV_RECORD_FILE: argvFile },
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
