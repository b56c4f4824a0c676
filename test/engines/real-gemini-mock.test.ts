/**
 * The real Gemini CLI (@google/gemini-cli, devDependency) run headless against the local mock Gemini API.
 *
 * Verifies what the engine adapter relies on: `--session-id` then `--resume` carry the conversation,
 * the stream-json event shapes, and that the `result` event's token stats are the sum of what the API
 * reported during that one process (per turn, not cumulative across a resumed session; router side
 * calls are included, the mock reports zero usage for them).
 */
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { prepareGeminiHome } from '../fixtures/engine-homes/gemini.js';
import { startGeminiMock } from '../fixtures/mock-apis/gemini.js';
import type { MockApi, MockOptions, MockUsage } from '../fixtures/mock-apis/types.js';
import { type EngineEvent, engineRunner, isRecord, type RunResult } from './run-engine.js';

const GEMINI = fileURLToPath(new URL('../../node_modules/.bin/gemini', import.meta.url));
const BASE_ARGS = ['--output-format', 'stream-json', '--yolo', '--skip-trust'];
const RUN_TIMEOUT_MS = 60_000;

const tempRoots: string[] = [];
const mocks: MockApi[] = [];
// GEMINI_CLI_NO_RELAUNCH: there is no relaunched child, so killing the process we started is enough.
const gemini = engineRunner(GEMINI, RUN_TIMEOUT_MS);

afterAll(async () => {
  gemini.killAll();
  await Promise.all(mocks.map((m) => m.close()));
  for (const root of tempRoots) rmSync(root, { recursive: true, force: true });
});

async function setup(options: MockOptions) {
  const mock = await startGeminiMock(options);
  mocks.push(mock);
  const root = mkdtempSync(join(tmpdir(), 'the-loop-gemini-'));
  tempRoots.push(root);
  const { env, credentialEnv } = prepareGeminiHome(root, mock.url);
  const cwd = join(root, 'work');
  mkdirSync(cwd);
  const childEnv: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
    ...env,
    [credentialEnv]: 'fixture-key',
  };
  const run = (args: string[]): Promise<RunResult> => gemini.run({ cwd, env: childEnv }, args);
  return { mock, run };
}

function resultEvent(r: RunResult): EngineEvent {
  const result = r.events.find((e) => e.type === 'result');
  if (!result) throw new Error(`no result event (exit ${r.code})\n${r.stdout}\n--- stderr ---\n${r.stderr}`);
  return result;
}

function stats(result: EngineEvent): Record<string, unknown> {
  const s = result.stats;
  if (!isRecord(s)) throw new Error('result without stats');
  return s;
}

/** What gemini's stream stats should show for these API usages (cached ⊂ input; thoughts only in total). */
function expectedStats(usages: MockUsage[]) {
  const sum = (f: (u: MockUsage) => number) => usages.reduce((a, u) => a + f(u), 0);
  const input = sum((u) => u.input);
  const cached = sum((u) => u.cacheRead ?? 0);
  const output = sum((u) => u.output);
  return {
    input_tokens: input,
    output_tokens: output,
    cached,
    input: input - cached,
    total_tokens: input + output + sum((u) => u.reasoning ?? 0),
  };
}

function assistantText(r: RunResult): string {
  return r.events
    .filter((e) => e.type === 'message' && e.role === 'assistant')
    .map((e) => (typeof e.content === 'string' ? e.content : ''))
    .join('');
}

function contentsOf(body: unknown): { role: string; text: string }[] {
  const contents = isRecord(body) && Array.isArray(body.contents) ? body.contents : [];
  return contents.filter(isRecord).map((c) => ({
    role: typeof c.role === 'string' ? c.role : '',
    text: (Array.isArray(c.parts) ? c.parts : [])
      .filter(isRecord)
      .map((p) => (typeof p.text === 'string' ? p.text : ''))
      .join(''),
  }));
}

describe.skipIf(!existsSync(GEMINI))('real gemini CLI against the mock Gemini API', () => {
  it('runs two turns: --session-id then --resume carries the conversation; usage is per process', async () => {
    const first: MockUsage = { input: 1200, output: 35 };
    const second: MockUsage = { input: 1300, output: 40, cacheRead: 1000, reasoning: 12 };
    const { mock, run } = await setup({
      script: [
        { kind: 'text', text: 'The answer is 4.', usage: first },
        { kind: 'text', text: 'You asked what 2+2 is.', usage: second },
      ],
    });
    const sessionId = randomUUID();

    const r1 = await run([...BASE_ARGS, '--session-id', sessionId, '--prompt=What is 2+2?']);
    expect(r1.code, r1.stderr).toBe(0);
    const types1 = r1.events.map((e) => e.type);
    expect(types1[0]).toBe('init');
    expect(r1.events[0]?.session_id).toBe(sessionId);
    expect(r1.events).toContainEqual(
      expect.objectContaining({ type: 'message', role: 'user', content: 'What is 2+2?' }),
    );
    expect(assistantText(r1)).toBe('The answer is 4.');
    const res1 = resultEvent(r1);
    expect(res1.status).toBe('success');
    expect(stats(res1)).toMatchObject({ ...expectedStats([first]), tool_calls: 0 });

    // Text starting with '-' works in the --prompt=<text> form.
    const r2 = await run([...BASE_ARGS, '--resume', sessionId, '--prompt=-- what did I ask?']);
    expect(r2.code, r2.stderr).toBe(0);
    expect(r2.events[0]).toMatchObject({ type: 'init', session_id: sessionId });
    expect(assistantText(r2)).toBe('You asked what 2+2 is.');
    const res2 = resultEvent(r2);
    expect(res2.status).toBe('success');
    // Per turn (this process only), not the session's running total.
    expect(stats(res2)).toMatchObject(expectedStats([second]));

    expect(mock.reported).toEqual([first, second]);
    const turns = mock.modelTurns();
    expect(turns).toHaveLength(2);
    const secondContents = contentsOf(turns[1]?.body);
    expect(secondContents.some((c) => c.role === 'user' && c.text.includes('What is 2+2?'))).toBe(true);
    expect(secondContents).toContainEqual({ role: 'model', text: 'The answer is 4.' });
    expect(secondContents.at(-1)).toEqual({ role: 'user', text: '-- what did I ask?' });

    // Each turn also made one router call (`:generateContent`, not a model turn); its model shows in
    // stats.models with the zero usage the mock reports for side calls.
    const side = mock.requests.filter((r) => !r.isModelTurn);
    expect(side.length).toBe(2);
    for (const r of side) expect(r.path).toMatch(/:generateContent$/);
    const turnModel = /\/models\/([^:]+):/.exec(turns[1]?.path ?? '')?.[1] ?? '';
    const models = stats(res2).models;
    expect(isRecord(models) ? models[turnModel] : undefined).toMatchObject(expectedStats([second]));
    for (const r of mock.requests) expect(r.headers['x-goog-api-key']).toBe('fixture-key');
  });

  it('runs the shell tool when the model asks for it', async () => {
    const usages: MockUsage[] = [
      { input: 900, output: 25 },
      { input: 1000, output: 30, cacheRead: 800 },
    ];
    const { mock, run } = await setup({
      script: [
        { kind: 'shell', command: 'echo fixture-tool-ok', usage: usages[0] },
        { kind: 'text', text: 'It printed fixture-tool-ok.', usage: usages[1] },
      ],
    });
    const r = await run([...BASE_ARGS, '--session-id', randomUUID(), '--prompt=Run echo fixture-tool-ok']);
    expect(r.code, r.stderr).toBe(0);
    const toolUse = r.events.find((e) => e.type === 'tool_use');
    expect(toolUse).toMatchObject({
      tool_name: 'run_shell_command',
      parameters: { command: 'echo fixture-tool-ok' },
    });
    const toolResult = r.events.find((e) => e.type === 'tool_result');
    expect(toolResult).toMatchObject({
      tool_id: toolUse?.tool_id,
      status: 'success',
      output: 'fixture-tool-ok',
    });
    expect(stats(resultEvent(r))).toMatchObject({ ...expectedStats(usages), tool_calls: 1 });

    const turns = mock.modelTurns();
    expect(turns).toHaveLength(2);
    const last =
      isRecord(turns[1]?.body) && Array.isArray(turns[1].body.contents)
        ? turns[1].body.contents.at(-1)
        : undefined;
    expect(JSON.stringify(last)).toContain('fixture-tool-ok');
    expect(JSON.stringify(last)).toContain('functionResponse');
  });

  it('fails fast on an API error (general.maxAttempts 1): result status error, exit code = HTTP status & 0xff', async () => {
    const { mock, run } = await setup({
      script: [{ kind: 'error', status: 500, message: 'Internal error encountered.' }],
    });
    const r = await run([...BASE_ARGS, '--session-id', randomUUID(), '--prompt=hello']);
    expect(r.code).toBe(500 & 0xff);
    const result = resultEvent(r);
    expect(result.status).toBe('error');
    expect(result.error).toMatchObject({ message: expect.stringContaining('Internal error encountered.') });
    // Fast: the one failed request is the end of it, no retry (general.maxAttempts 1).
    expect(mock.modelTurns()).toHaveLength(1);
    expect(mock.reported).toEqual([]);
  });
});
