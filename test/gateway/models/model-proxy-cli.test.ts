/**
 * The real engine CLIs, one headless turn each, with their model API reached only through the
 * model handler (mounted by a stub gateway) in front of the local mock API: the real key reaches the
 * mock, the capability token never does, and the wire rows add up to what the mock reported. Then
 * the same CLIs over budget: our refusal is shown, and not retried.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Usage } from '../../../src/core/events.js';
import { createModelHandler } from '../../../src/gateway/models/model-proxy.js';
import type { WireUsage } from '../../../src/gateway/types.js';
import { realBinary } from '../../acceptance/helpers.js';
import { prepareClaudeHome } from '../../fixtures/engine-homes/claude.js';
import { prepareCodexHome } from '../../fixtures/engine-homes/codex.js';
import { prepareGeminiHome } from '../../fixtures/engine-homes/gemini.js';
import type { MockApi } from '../../fixtures/mock-apis/types.js';
import { ANTHROPIC, type ApiCase, GEMINI, OPENAI, USAGE } from '../model-requests.js';
import { type FakePorts, fakePorts, REAL_KEY, type Stub, startStub, TOKEN } from '../model-stub.js';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Run a CLI (argv array, stdin closed) with only the environment given: nothing of ours leaks in. */
function run(binary: string, args: string[], env: Record<string, string>, cwd: string): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, args, {
      cwd,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C.UTF-8', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    const timer = setTimeout(() => child.kill('SIGKILL'), 150_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

interface Setup {
  root: string;
  mock: MockApi;
  ports: FakePorts;
  gw: Stub;
}

async function setup(c: ApiCase): Promise<Setup> {
  const root = mkdtempSync(join(tmpdir(), `the-loop-gw-${c.api}-`));
  cleanups.push(() => rmSync(root, { recursive: true, force: true }));
  const mock = await c.start({
    script: [{ kind: 'text', text: 'Hello through the gateway.', usage: USAGE }],
  });
  cleanups.push(() => mock.close());
  const ports = fakePorts({
    api: c.api,
    upstream: c.upstream(mock),
    credential: { value: REAL_KEY, kind: 'api-key' },
  });
  const handler = createModelHandler();
  cleanups.push(async () => handler.close());
  const gw = await startStub(handler, ports);
  cleanups.push(() => gw.close());
  return { root, mock, ports, gw };
}

const total = (rows: WireUsage[]): Usage =>
  rows.reduce(
    (t, r) => ({
      inputTokens: t.inputTokens + r.usage.inputTokens,
      outputTokens: t.outputTokens + r.usage.outputTokens,
      cacheReadTokens: t.cacheReadTokens + r.usage.cacheReadTokens,
      cacheCreationTokens: t.cacheCreationTokens + r.usage.cacheCreationTokens,
      reasoningTokens: t.reasoningTokens + r.usage.reasoningTokens,
    }),
    { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheCreationTokens: 0, reasoningTokens: 0 },
  );

/** The turn went through us: real key upstream, token nowhere upstream, rows = what the mock reported. */
function expectMetered(c: ApiCase, s: Setup, out: Run): void {
  const why = `stdout:\n${out.stdout}\nstderr:\n${out.stderr}\nseen:\n${s.gw.seen.join('\n')}`;
  expect(out.code, why).toBe(0);
  expect(s.mock.modelTurns().length, why).toBeGreaterThan(0);
  const posts = s.mock.requests.filter((q) => q.method === 'POST');
  for (const q of posts) expect(c.keySeen(q.headers, q.path)).toBe(REAL_KEY);
  expect(JSON.stringify(s.mock.requests)).not.toContain(TOKEN);
  // One row per answered request (side requests — titles, routing — report zero usage).
  expect(s.ports.rows).toHaveLength(posts.length);
  expect(s.ports.rows.every((r) => !r.partial && r.api === c.api && r.responseId)).toBe(true);
  expect(total(s.ports.rows)).toEqual(c.expected(s.mock.reported));
  expect(s.ports.logs.join('\n')).not.toContain(TOKEN);
}

function claudeEnv(s: Setup): Record<string, string> {
  const home = prepareClaudeHome(join(s.root, 'claude'), `${s.gw.url}/m/${TOKEN}`);
  return { ...home.env, ANTHROPIC_API_KEY: TOKEN };
}
const CLAUDE_ARGS = ['-p', '--output-format', 'stream-json', '--verbose', '--', 'Say hello.'];

/** Codex ignores OPENAI_BASE_URL: the provider is declared with -c, as the codex preset does. */
function codexArgs(s: Setup): string[] {
  const provider = `{ name = "the-loop", base_url = "${s.gw.url}/m/_", env_key = "OPENAI_API_KEY", wire_api = "responses" }`;
  return [
    'exec',
    '--json',
    '--skip-git-repo-check',
    '-c',
    'model_provider="the-loop"',
    '-c',
    `model_providers.the-loop=${provider}`,
    '--',
    'Say hello.',
  ];
}
function codexEnv(s: Setup): Record<string, string> {
  const work = join(s.root, 'work');
  mkdirSync(work, { recursive: true });
  // The home's own provider points at a dead port: only the -c override can reach the mock.
  const home = prepareCodexHome(join(s.root, 'codex'), 'http://127.0.0.1:9', work);
  return { ...home.env, OPENAI_API_KEY: TOKEN };
}

function geminiEnv(s: Setup, retries: boolean): Record<string, string> {
  const home = prepareGeminiHome(join(s.root, 'gemini'), `${s.gw.url}/m/${TOKEN}`);
  if (retries) {
    // The fixture turns retries off (maxAttempts: 1); the budget check wants the CLI's default.
    const file = join(home.env.HOME ?? '', '.gemini', 'settings.json');
    const settings = JSON.parse(readFileSync(file, 'utf8')) as { general: Record<string, unknown> };
    delete settings.general.maxAttempts;
    writeFileSync(file, JSON.stringify(settings));
  }
  return { ...home.env, GEMINI_API_KEY: TOKEN };
}
const GEMINI_ARGS = ['--output-format', 'stream-json', '--skip-trust', '--prompt=Say hello.'];

describe('real CLIs through the model handler', () => {
  it('Claude Code: ANTHROPIC_BASE_URL=<gw>/m/<token>, ANTHROPIC_API_KEY=<token>', async () => {
    const s = await setup(ANTHROPIC);
    const out = await run(realBinary('claude'), CLAUDE_ARGS, claudeEnv(s), s.root);
    expectMetered(ANTHROPIC, s, out);
    // Its reachability check on the bare prefix is answered by us, never forwarded.
    expect(s.gw.seen).toContain(`HEAD /m/${TOKEN}`);
    expect(s.mock.requests.filter((q) => q.method === 'HEAD')).toEqual([]);
    expect(
      s.gw.seen
        .filter((l) => l.startsWith('POST'))
        .every((l) => l.startsWith(`POST /m/${TOKEN}/v1/messages`)),
    ).toBe(true);
  });

  it('Codex: a -c model provider with base_url <gw>/m/_ and env_key holding the token', async () => {
    const s = await setup(OPENAI);
    const out = await run(realBinary('codex'), codexArgs(s), codexEnv(s), s.root);
    expectMetered(OPENAI, s, out);
    expect(s.gw.seen.filter((l) => l.startsWith('POST'))).toEqual(
      s.mock.requests.filter((q) => q.method === 'POST').map(() => 'POST /m/_/responses'),
    );
    // Plain JSON, never `background`: the Responses body check reads it and lets it pass.
    for (const q of s.mock.requests) {
      expect(q.headers['content-encoding']).toBeUndefined();
      expect((q.body as Record<string, unknown>).background).toBeUndefined();
    }
  });

  it('Gemini CLI: GOOGLE_GEMINI_BASE_URL=<gw>/m/<token> keeps its path prefix', async () => {
    const s = await setup(GEMINI);
    const out = await run(realBinary('gemini'), GEMINI_ARGS, geminiEnv(s, false), s.root);
    expectMetered(GEMINI, s, out);
    expect(s.gw.seen.length).toBeGreaterThan(0);
    expect(s.gw.seen.every((l) => l.includes(` /m/${TOKEN}/v1beta/models/`))).toBe(true);
  });
});

describe('real CLIs over budget: the refusal is shown and not retried', () => {
  it('Claude Code', async () => {
    const s = await setup(ANTHROPIC);
    s.ports.over = 'work item over its token budget';
    const env = claudeEnv(s);
    delete env.CLAUDE_CODE_MAX_RETRIES;
    const out = await run(realBinary('claude'), CLAUDE_ARGS, env, s.root);
    expect(out.code).toBe(1);
    expect(out.stdout).toContain('[the-loop budget] work item over its token budget');
    expect(s.mock.requests.filter((q) => q.method === 'POST')).toEqual([]);
    expect(s.ports.budgetChecks).toBe(1);
  });

  it('Codex', async () => {
    const s = await setup(OPENAI);
    s.ports.over = 'work item over its token budget';
    const out = await run(realBinary('codex'), codexArgs(s), codexEnv(s), s.root);
    expect(out.code).toBe(1);
    expect(out.stdout).toContain('[the-loop budget] work item over its token budget');
    expect(s.mock.requests.filter((q) => q.method === 'POST')).toEqual([]);
    expect(s.ports.budgetChecks).toBe(1);
  });

  it('Gemini CLI', async () => {
    const s = await setup(GEMINI);
    s.ports.over = 'work item over its token budget';
    const out = await run(realBinary('gemini'), GEMINI_ARGS, geminiEnv(s, true), s.root);
    // 0.61.0 exits 147 here, with the error in its result event.
    expect(out.code).not.toBe(0);
    expect(out.stdout).toContain('[the-loop budget] work item over its token budget');
    expect(s.mock.requests.filter((q) => q.method === 'POST')).toEqual([]);
    // The router's classifier call fails (the CLI goes on with its default model), then the turn
    // itself: each asked once, none retried.
    expect(s.gw.seen.map((l) => l.replace(/^.*\/models\/[^:]+/, ''))).toEqual([
      ':generateContent',
      ':streamGenerateContent?alt=sse',
    ]);
    expect(s.ports.budgetChecks).toBe(2);
  });
});

/**
 * Each CLI with its base URL under a path off the allow-list, so that its every request is one the
 * gateway refuses: the refusal is shown, not retried, and nothing reaches the mock. (This is what
 * chose the statuses: Codex retries a 403 or 404 five times, Claude Code sends again after a 404.)
 */
describe('real CLIs at a path off the allow-list: refused, shown, not retried', () => {
  const refused = (s: Setup) => s.ports.logs.filter((l) => l.includes('refused at the gateway: not allowed'));

  it('Claude Code', async () => {
    const s = await setup(ANTHROPIC);
    const env: Record<string, string> = {
      ...claudeEnv(s),
      ANTHROPIC_BASE_URL: `${s.gw.url}/m/${TOKEN}/v1/files`,
    };
    delete env.CLAUDE_CODE_MAX_RETRIES;
    const out = await run(realBinary('claude'), CLAUDE_ARGS, env, s.root);
    expect(out.code).toBe(1);
    expect(out.stdout).toContain(
      '[the-loop gateway] POST /v1/files/v1/messages is not allowed through the gateway',
    );
    // Its reachability HEAD (refused too: not the bare base), then the turn, asked once.
    expect(s.gw.seen.map((l) => l.replace(TOKEN, 'T'))).toEqual([
      'HEAD /m/T/v1/files',
      'POST /m/T/v1/files/v1/messages?beta=true',
    ]);
    expect(refused(s)).toHaveLength(2);
    expect(s.mock.requests).toEqual([]);
  });

  it('Codex', async () => {
    const s = await setup(OPENAI);
    const args = codexArgs(s).map((a) => a.replace(`${s.gw.url}/m/_`, `${s.gw.url}/m/_/batches`));
    const out = await run(realBinary('codex'), args, codexEnv(s), s.root);
    expect(out.code).toBe(1);
    expect(out.stdout).toContain(
      '[the-loop gateway] POST /batches/responses is not allowed through the gateway',
    );
    expect(s.gw.seen).toEqual(['POST /m/_/batches/responses']);
    expect(s.mock.requests).toEqual([]);
  });

  it('Gemini CLI', async () => {
    const s = await setup(GEMINI);
    const env = { ...geminiEnv(s, true), GOOGLE_GEMINI_BASE_URL: `${s.gw.url}/m/${TOKEN}/upload` };
    const out = await run(realBinary('gemini'), GEMINI_ARGS, env, s.root);
    expect(out.code).not.toBe(0);
    expect(out.stdout).toMatch(
      /\[the-loop gateway\] POST \/upload\/v1beta\/models\/[^ ]+:streamGenerateContent is not allowed through the gateway/,
    );
    // The router's classifier call, then the turn: each asked once.
    expect(s.gw.seen.map((l) => l.replace(/^.*\/models\/[^:]+/, ''))).toEqual([
      ':generateContent',
      ':streamGenerateContent?alt=sse',
    ]);
    expect(s.mock.requests).toEqual([]);
  });
});
