/**
 * The real Codex CLI (`codex exec --json`, from devDependency @openai/codex) against the local mock
 * Responses API: two turns on one thread (first turn, then `resume <thread_id>`).
 *
 * Observed with 0.171.0 and asserted here:
 * - the thread id comes from `thread.started` and is repeated by the resumed run;
 * - codex resends the whole conversation in `input` (store:false, no previous_response_id);
 * - `turn.completed.usage` is the thread's running total (input/cached/output/reasoning summed over
 *   every model request of the thread, across processes), not the turn's own figures.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prepareCodexHome } from '../fixtures/engine-homes/codex.js';
import { startOpenAIMock } from '../fixtures/mock-apis/openai.js';
import type { MockApi, MockUsage } from '../fixtures/mock-apis/types.js';
import { type EngineEvent, engineRunner, isRecord, type RunResult, usageNumbers } from './run-engine.js';

const CODEX_BIN = fileURLToPath(new URL('../../node_modules/.bin/codex', import.meta.url));
const TIMEOUT_MS = 60_000;
const codex = engineRunner(CODEX_BIN, TIMEOUT_MS - 5_000);

const PROMPT_1 = 'Say hello and remember the word pelican.';
const REPLY_1 = 'Hello! I will remember pelican.';
const PROMPT_2 = 'Which word did I ask you to remember?';
const REPLY_2 = 'You asked me to remember pelican.';
const USAGE_1: MockUsage = { input: 1200, output: 40, cacheRead: 0, reasoning: 12 };
const USAGE_2: MockUsage = { input: 1500, output: 25, cacheRead: 1152, reasoning: 0 };

interface CodexUsage {
  input_tokens: number;
  cached_input_tokens: number;
  output_tokens: number;
  reasoning_output_tokens: number;
}

function turnUsage(events: EngineEvent[]): CodexUsage {
  const done = events.find((e) => e.type === 'turn.completed');
  if (done === undefined) throw new Error('no turn.completed');
  return usageNumbers(done.usage, [
    'input_tokens',
    'cached_input_tokens',
    'output_tokens',
    'reasoning_output_tokens',
  ]);
}

function asCodexUsage(u: MockUsage): CodexUsage {
  return {
    input_tokens: u.input,
    cached_input_tokens: u.cacheRead ?? 0,
    output_tokens: u.output,
    reasoning_output_tokens: u.reasoning ?? 0,
  };
}

function agentMessages(events: EngineEvent[]): string[] {
  const out: string[] = [];
  for (const e of events) {
    if (e.type !== 'item.completed' || !isRecord(e.item)) continue;
    if (e.item.type === 'agent_message' && typeof e.item.text === 'string') out.push(e.item.text);
  }
  return out;
}

/** Concatenated text of every `input` message with this role in a Responses API request body. */
function inputTexts(body: unknown, role: string): string[] {
  if (!isRecord(body) || !Array.isArray(body.input)) return [];
  const texts: string[] = [];
  for (const item of body.input) {
    if (!isRecord(item) || item.type !== 'message' || item.role !== role || !Array.isArray(item.content))
      continue;
    const parts = item.content
      .map((c: unknown) => (isRecord(c) && typeof c.text === 'string' ? c.text : ''))
      .join('');
    texts.push(parts);
  }
  return texts;
}

describe('real codex CLI against the mock OpenAI Responses API', () => {
  let mock: MockApi;
  let root: string;
  let cwd: string;
  let childEnv: Record<string, string>;
  const runCodex = (args: string[]): Promise<RunResult> => codex.run({ cwd, env: childEnv }, args);

  beforeAll(async () => {
    mock = await startOpenAIMock({
      script: [
        { kind: 'text', text: REPLY_1, usage: USAGE_1 },
        { kind: 'text', text: REPLY_2, usage: USAGE_2 },
      ],
    });
    root = mkdtempSync(join(tmpdir(), 'the-loop-codex-'));
    cwd = join(root, 'work');
    mkdirSync(cwd);
    const { env, credentialEnv } = prepareCodexHome(root, mock.url, cwd);
    childEnv = {
      PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
      ...env,
      [credentialEnv]: 'sk-fixture',
    };
  }, TIMEOUT_MS);

  afterAll(async () => {
    codex.killAll();
    await mock?.close();
    if (root !== undefined) rmSync(root, { recursive: true, force: true });
  }, TIMEOUT_MS);

  it(
    'runs two turns on one thread; usage on the resumed turn is the running total',
    async () => {
      // Turn 1.
      const first = await runCodex(['exec', '--json', '--skip-git-repo-check', PROMPT_1]);
      expect(first.code, first.stderr).toBe(0);
      const started = first.events[0];
      expect(started?.type).toBe('thread.started');
      const threadId = started?.thread_id;
      expect(typeof threadId).toBe('string');
      if (typeof threadId !== 'string') throw new Error('no thread id');
      expect(threadId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
      expect(first.events.map((e) => e.type)).toContain('turn.started');
      expect(agentMessages(first.events)).toEqual([REPLY_1]);
      expect(turnUsage(first.events)).toEqual(asCodexUsage(USAGE_1));

      // Turn 2: resume the thread.
      const second = await runCodex([
        'exec',
        '--json',
        '--skip-git-repo-check',
        'resume',
        threadId,
        PROMPT_2,
      ]);
      expect(second.code, second.stderr).toBe(0);
      expect(second.events[0]).toEqual({ type: 'thread.started', thread_id: threadId });
      expect(agentMessages(second.events)).toEqual([REPLY_2]);

      // The mock saw exactly two model turns, and the second carries the whole conversation.
      const turns = mock.modelTurns();
      expect(turns).toHaveLength(2);
      const body2 = turns[1]?.body;
      expect(isRecord(body2) && body2.previous_response_id === undefined).toBe(true);
      expect(isRecord(body2) && body2.stream === true).toBe(true);
      const users = inputTexts(body2, 'user');
      expect(users).toContain(PROMPT_1);
      expect(users.at(-1)).toBe(PROMPT_2);
      expect(inputTexts(body2, 'assistant')).toContain(REPLY_1);
      expect(turns[1]?.headers.authorization).toBe('Bearer sk-fixture');

      // Usage: what the mock reported, and the resumed turn's figure is the thread's running total.
      expect(mock.reported).toEqual([USAGE_1, USAGE_2]);
      const u1 = turnUsage(first.events);
      const u2 = turnUsage(second.events);
      const sum = (a: CodexUsage, b: CodexUsage): CodexUsage => ({
        input_tokens: a.input_tokens + b.input_tokens,
        cached_input_tokens: a.cached_input_tokens + b.cached_input_tokens,
        output_tokens: a.output_tokens + b.output_tokens,
        reasoning_output_tokens: a.reasoning_output_tokens + b.reasoning_output_tokens,
      });
      expect(u2).toEqual(sum(asCodexUsage(USAGE_1), asCodexUsage(USAGE_2)));
      // So the turn's own usage is the difference between consecutive turn.completed figures.
      expect({
        input_tokens: u2.input_tokens - u1.input_tokens,
        cached_input_tokens: u2.cached_input_tokens - u1.cached_input_tokens,
        output_tokens: u2.output_tokens - u1.output_tokens,
        reasoning_output_tokens: u2.reasoning_output_tokens - u1.reasoning_output_tokens,
      }).toEqual(asCodexUsage(USAGE_2));
    },
    TIMEOUT_MS * 2,
  );
});
