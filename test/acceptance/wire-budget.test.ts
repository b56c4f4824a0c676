/**
 * Budgets at the wire, with the real engine CLIs (process runner, bubblewrap sandbox, the gateway
 * in front of their model API) through the real `the-loop run`: a token ceiling that the first model
 * response of a turn reaches stops the turn's next model request at the gateway. The mock never gets
 * it, the CLI shows our vendor-shaped refusal and does not retry it (each CLI with its own default
 * retry settings), the turn ends, and the session is held `over-budget` until a person raises the
 * ceiling; the held delivery then runs.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import type { Usage } from '../../src/core/events.js';
import { prepareClaudeHome } from '../fixtures/engine-homes/claude.js';
import { prepareCodexHome } from '../fixtures/engine-homes/codex.js';
import { prepareGeminiHome } from '../fixtures/engine-homes/gemini.js';
import { startAnthropicMock } from '../fixtures/mock-apis/anthropic.js';
import { startGeminiMock } from '../fixtures/mock-apis/gemini.js';
import { startOpenAIMock } from '../fixtures/mock-apis/openai.js';
import type { MockApi, MockOptions, MockUsage } from '../fixtures/mock-apis/types.js';
import { type CliResult, freePort, runCli } from '../helpers/cli.js';
import { anthropicUsage, geminiUsage, openaiUsage, realBinary } from './helpers.js';

interface Engine {
  engine: 'claude' | 'codex' | 'gemini';
  start: (options: MockOptions) => Promise<MockApi>;
  /** The engine's isolated home, with the CLI's own default retry behaviour (the fixtures turn it off). */
  home: (
    root: string,
    mockUrl: string,
    cwd: string,
  ) => { env: Record<string, string>; credentialEnv: string };
  expectedUsage: (reported: MockUsage[]) => Usage;
  /** How the CLI ends a turn whose model request was refused (observed with the pinned versions). */
  exitCode: number;
  /** What of our vendor-shaped refusal the CLI prints. */
  shows: RegExp;
}

const CLAUDE: Engine = {
  engine: 'claude',
  start: startAnthropicMock,
  home: (root, url) => {
    const home = prepareClaudeHome(root, url);
    // The SDK's own retries (10 by default) must be in play: a refusal it retried would show.
    delete home.env.CLAUDE_CODE_MAX_RETRIES;
    return home;
  },
  expectedUsage: anthropicUsage,
  exitCode: 1,
  // Claude Code labels every 403 "Failed to authenticate"; our message follows.
  shows: /API Error: 403 \[the-loop budget\] token ceiling reached: 600 tokens of 500 tokens \(session\)/,
};

const CODEX: Engine = {
  engine: 'codex',
  start: startOpenAIMock,
  // The gateway forwards where OPENAI_BASE_URL says; the preset's own provider (on the command line)
  // keeps Codex's default request retries.
  home: (root, url, cwd) => {
    const home = prepareCodexHome(root, url, cwd);
    return { ...home, env: { ...home.env, OPENAI_BASE_URL: `${url}/v1` } };
  },
  expectedUsage: openaiUsage,
  exitCode: 1,
  shows:
    /"message":"\[the-loop budget\] token ceiling reached: 600 tokens of 500 tokens \(session\)","type":"insufficient_quota"/,
};

const GEMINI: Engine = {
  engine: 'gemini',
  start: startGeminiMock,
  home: (root, url) => {
    const home = prepareGeminiHome(root, url);
    const file = join(home.env.HOME ?? '', '.gemini', 'settings.json');
    const settings = JSON.parse(readFileSync(file, 'utf8')) as { general: Record<string, unknown> };
    delete settings.general.maxAttempts;
    writeFileSync(file, JSON.stringify(settings));
    return home;
  },
  expectedUsage: geminiUsage,
  // 0.61.0 ends a turn whose API call failed with exit code 147.
  exitCode: 147,
  shows:
    /API Error: \{"error":\{"code":403,"message":"\[the-loop budget\] token ceiling reached: 600 tokens of 500 tokens \(session\)","status":"PERMISSION_DENIED"\}\}/,
};

/** The first model response alone reaches the 500-token ceiling. */
const FIRST: MockUsage = { input: 400, output: 200 };
const CEILING = 500;
const REFUSED = 'model request refused at the gateway: over budget';

interface Setup {
  root: string;
  work: string;
  mock: MockApi;
  wi: string;
  cli: (args: string[]) => Promise<CliResult>;
  /** How many model requests the gateway refused (one log line each). */
  refusals: () => number;
  show: () => Promise<Show>;
}

interface Show {
  session: { hold: { kind: string; dimension: string; used: number; limit: number } | null };
  turns: Array<{ seq: number; status: string; endReason: string; deliveryId: string }>;
}

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function setup(e: Engine): Promise<Setup> {
  const root = mkdtempSync(join(tmpdir(), `the-loop-wire-budget-${e.engine}-`));
  cleanups.push(async () => rmSync(root, { recursive: true, force: true }));
  const work = join(root, 'work');
  mkdirSync(work);
  // A shell step first: the turn needs a second model request after the first response.
  const mock = await e.start({
    script: [
      { kind: 'shell', command: 'echo ran > step.txt', usage: FIRST },
      { kind: 'text', text: 'Done after the raise.', usage: { input: 10, output: 5 } },
    ],
  });
  cleanups.push(() => mock.close());
  const home = e.home(join(root, 'engine'), mock.url, work);
  const configPath = join(root, 'config.yaml');
  writeFileSync(
    configPath,
    stringify({
      dataDir: 'data',
      defaults: { engine: e.engine, backstopSeconds: 150, killGraceSeconds: 2 },
      gateway: { port: await freePort() },
      budgets: { session: { maxTokens: CEILING } },
      engines: { [e.engine]: { binary: realBinary(e.engine), env: home.env } },
    }),
  );
  const env = { [home.credentialEnv]: `real-key-${e.engine}-0123456789`, THE_LOOP_CONFIG: configPath };
  const cli = (args: string[]) => runCli(args, { cwd: root, env, timeoutMs: 200_000 });
  const wi = `github:acme/wire-${e.engine}#3`;
  return {
    root,
    work,
    mock,
    wi,
    cli,
    refusals: () =>
      readFileSync(join(root, 'data', 'the-loop.log'), 'utf8')
        .split('\n')
        .filter((l) => l.includes(REFUSED)).length,
    show: async () => {
      const res = await cli(['sessions', 'show', wi, '--json']);
      expect(res.code, res.stderr).toBe(0);
      return JSON.parse(res.stdout) as Show;
    },
  };
}

/** One turn of `e` that the ceiling stops mid-turn: everything but the resume. */
async function refusedMidTurn(e: Engine): Promise<Setup> {
  const s = await setup(e);
  const res = await s.cli(['run', s.wi, '--cwd', s.work, '--', 'Run the step, then finish.']);
  const why = `exit ${res.code}\nstdout:\n${res.stdout}\nstderr:\n${res.stderr}`;
  // The first response was answered and its shell step ran: the refusal came mid-turn.
  expect(existsSync(join(s.work, 'step.txt')), why).toBe(true);
  // The request after the ceiling never reached the mock: one model request, nothing after it.
  const turns = s.mock.modelTurns();
  expect(turns, why).toHaveLength(1);
  const last = turns.at(-1);
  expect(last && s.mock.requests.slice(s.mock.requests.indexOf(last) + 1)).toEqual([]);
  // The CLI showed our refusal, did not retry it (one refused request), and ended the turn.
  expect(res.stdout, why).toMatch(e.shows);
  expect(s.refusals(), why).toBe(1);
  expect(res.code, why).toBe(1);
  expect(res.stdout).toMatch(/✖ turn 1 failed · ended by result/);
  expect(res.stderr).toBe('');
  const show = await s.show();
  expect(show.turns.map((t) => [t.seq, t.status, t.endReason])).toEqual([[1, 'failed', 'result']]);
  expect(show.session.hold).toMatchObject({
    kind: 'over-budget',
    dimension: 'tokens',
    used: 600,
    limit: CEILING,
  });
  // The refused turn is metered at the wire: the one forwarded response, nothing left out.
  const usage = await s.cli(['usage', '--json']);
  const report = JSON.parse(usage.stdout) as {
    total: { usage: Usage };
    notIncluded: { unmeteredCount: number };
  };
  expect(report.total.usage).toEqual(e.expectedUsage([FIRST]));
  expect(report.notIncluded.unmeteredCount).toBe(0);
  // What the engine itself exited with (the-loop's `run` exits 1 for any failed turn).
  const log = readFileSync(join(s.root, 'data', 'the-loop.log'), 'utf8');
  expect(log).toContain(`"msg":"turn ended"`);
  expect(log).toMatch(new RegExp(`"status":"failed","endReason":"result","exitCode":${e.exitCode},`));
  return s;
}

describe('budgets at the wire with the real CLIs: a token ceiling stops the next model request mid-turn', () => {
  it('Claude Code: refused once, the turn fails, the session is held; resume --raise releases the held delivery', async () => {
    const s = await refusedMidTurn(CLAUDE);

    // The next delivery waits: nothing reaches the engine or the mock.
    const held = await s.cli(['run', s.wi, '--', 'Go on with the work.']);
    expect(held.code, held.stdout).toBe(1);
    expect(held.stdout).toMatch(
      /⏸ held: token ceiling reached: 600 tokens of 500 tokens \(session\)\. manual-\S+ stays queued/,
    );
    expect(held.stdout).toContain(`the-loop sessions resume ${s.wi} --raise <amount>`);
    const heldId = /(manual-[0-9a-f-]{36}) stays queued/.exec(held.stdout)?.[1];
    expect(heldId).toBeDefined();
    expect(s.mock.modelTurns()).toHaveLength(1);
    expect((await s.show()).turns).toHaveLength(1);

    const resumed = await s.cli(['sessions', 'resume', s.wi, '--raise', '1000']);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stdout).toMatch(/resumed; session ceiling raised by 1,000 tokens/);
    expect((await s.show()).session.hold).toBeNull();

    // The next `run` dispatches the held delivery first, then its own.
    const next = await s.cli(['run', s.wi, '--', 'And wrap up.']);
    expect(next.code, `${next.stdout}\n${next.stderr}`).toBe(0);
    const show = await s.show();
    expect(show.turns.map((t) => [t.seq, t.status, t.endReason])).toEqual([
      [1, 'failed', 'result'],
      [2, 'succeeded', 'result'],
      [3, 'succeeded', 'result'],
    ]);
    expect(show.turns[1]?.deliveryId).toBe(heldId);
    const event = JSON.parse((await s.cli(['events', 'show', heldId ?? '', '--json'])).stdout) as {
      delivery: { status: string; reason: string | null };
    };
    expect(event.delivery).toMatchObject({ status: 'done', reason: null });
    // The model saw the held prompt, answered from the rest of the script, then the last prompt.
    const models = s.mock.modelTurns();
    expect(models).toHaveLength(3);
    expect(JSON.stringify(models[1]?.body)).toContain('Go on with the work.');
    expect(JSON.stringify(models[2]?.body)).toContain('And wrap up.');
    expect(show.session.hold).toBeNull();
    expect(s.refusals()).toBe(1);
  }, 400_000);

  it.each([
    ['Codex (400 insufficient_quota)', CODEX],
    ['Gemini CLI (403 PERMISSION_DENIED)', GEMINI],
  ])(
    '%s: refused once, not retried, the turn fails, the session is held',
    async (_name, e) => {
      const s = await refusedMidTurn(e);
      const held = await s.cli(['run', s.wi, '--', 'Go on.']);
      expect(held.code).toBe(1);
      expect(held.stdout).toMatch(/⏸ held: token ceiling reached: 600 tokens of 500 tokens \(session\)/);
      expect(s.mock.modelTurns()).toHaveLength(1);
      expect(s.refusals()).toBe(1);
    },
    300_000,
  );
});
