/**
 * The real Claude Code CLI (`claude -p --output-format stream-json --verbose`, from devDependency
 * @anthropic-ai/claude-code) against the local mock Anthropic Messages API.
 *
 * Observed with 2.1.197 and asserted here:
 * - first turn `--session-id <uuid>`, next turn `--resume <uuid>`; `--` before the prompt works;
 * - the resumed run resends the whole conversation (earlier user prompt and assistant reply);
 * - each `result` event's `usage` is the sum over the turn's model requests, as the API reported them;
 * - a Bash tool call shows up as `assistant` (tool_use) → `user` (tool_result) → `assistant` (text);
 * - an API error exits 1 with a `<synthetic>` assistant message and `result.is_error: true`.
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prepareClaudeHome } from '../fixtures/engine-homes/claude.js';
import { lastConversationMessage, startAnthropicMock } from '../fixtures/mock-apis/anthropic.js';
import type { MockApi, MockStep, MockUsage, RecordedRequest } from '../fixtures/mock-apis/types.js';
import { type EngineEvent, engineRunner, isRecord, type RunResult, usageNumbers } from './run-engine.js';

const CLAUDE_BIN = fileURLToPath(new URL('../../node_modules/.bin/claude', import.meta.url));
const TIMEOUT_MS = 60_000;
const BASE_ARGS = ['-p', '--output-format', 'stream-json', '--verbose'];

const PROMPT_1 = 'Say hello and remember the word pelican.';
const REPLY_1 = 'Hello! I will remember pelican.';
// Starts with "-" on purpose: only safe after "--".
const PROMPT_2 = '-- which word did I ask you to remember?';
const REPLY_2 = 'You asked me to remember pelican.';
const USAGE_1: MockUsage = { input: 3, output: 14, cacheRead: 0, cacheCreation: 5120 };
const USAGE_2: MockUsage = { input: 9, output: 11, cacheRead: 5120, cacheCreation: 40 };

function resultEvent(events: EngineEvent[]): EngineEvent {
  const results = events.filter((e) => e.type === 'result');
  expect(results).toHaveLength(1);
  const r = results[0];
  if (r === undefined) throw new Error('no result event');
  return r;
}

/** The four token counts of a `result` event's usage, in the mock's terms. */
function resultUsage(result: EngineEvent): MockUsage {
  const u = usageNumbers(result.usage, [
    'input_tokens',
    'output_tokens',
    'cache_read_input_tokens',
    'cache_creation_input_tokens',
  ]);
  return {
    input: u.input_tokens,
    output: u.output_tokens,
    cacheRead: u.cache_read_input_tokens,
    cacheCreation: u.cache_creation_input_tokens,
  };
}

function sumUsage(list: MockUsage[]): MockUsage {
  return list.reduce<MockUsage>(
    (a, u) => ({
      input: a.input + u.input,
      output: a.output + u.output,
      cacheRead: (a.cacheRead ?? 0) + (u.cacheRead ?? 0),
      cacheCreation: (a.cacheCreation ?? 0) + (u.cacheCreation ?? 0),
    }),
    { input: 0, output: 0, cacheRead: 0, cacheCreation: 0 },
  );
}

/** Text of a message's content (string or content blocks), text and tool_result blocks only. */
function messageText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((b: unknown) => {
      if (!isRecord(b)) return '';
      if (b.type === 'text' && typeof b.text === 'string') return b.text;
      if (b.type === 'tool_result') return messageText(b.content);
      return '';
    })
    .join('\n');
}

interface WireMessage {
  role: string;
  text: string;
  content: unknown;
}

function requestMessages(req: RecordedRequest | undefined): WireMessage[] {
  if (req === undefined || !isRecord(req.body) || !Array.isArray(req.body.messages)) {
    throw new Error('request has no messages');
  }
  return req.body.messages.filter(isRecord).map((m) => ({
    role: String(m.role),
    text: messageText(m.content),
    content: m.content,
  }));
}

const claude = engineRunner(CLAUDE_BIN, TIMEOUT_MS - 5_000);
const roots: string[] = [];

interface Env {
  mock: MockApi;
  cwd: string;
  env: Record<string, string>;
}

async function setUp(script: MockStep[]): Promise<Env> {
  const root = mkdtempSync(join(tmpdir(), 'the-loop-claude-'));
  roots.push(root);
  const cwd = join(root, 'work');
  mkdirSync(cwd);
  const mock = await startAnthropicMock({ script });
  const home = prepareClaudeHome(root, mock.url);
  // Only PATH is inherited: no ANTHROPIC_* or CLAUDE_* from the outer environment leaks in.
  const env = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    ...home.env,
    [home.credentialEnv]: 'sk-ant-fixture',
  };
  return { mock, cwd, env };
}

const mocks: MockApi[] = [];

afterAll(async () => {
  claude.killAll();
  await Promise.all(mocks.map((m) => m.close()));
  for (const root of roots) rmSync(root, { recursive: true, force: true });
});

describe('real claude CLI against the mock Anthropic API: two turns', () => {
  const sessionId = randomUUID();
  let e: Env;
  let turn1: RunResult;
  let turn2: RunResult;

  beforeAll(async () => {
    e = await setUp([
      { kind: 'text', text: REPLY_1, usage: USAGE_1 },
      { kind: 'text', text: REPLY_2, usage: USAGE_2 },
    ]);
    mocks.push(e.mock);
    turn1 = await claude.run(e, [...BASE_ARGS, '--session-id', sessionId, '--', PROMPT_1]);
    turn2 = await claude.run(e, [...BASE_ARGS, '--resume', sessionId, '--', PROMPT_2]);
  }, 2 * TIMEOUT_MS);

  it('both turns succeed in the same session', () => {
    for (const t of [turn1, turn2]) {
      expect(t.code, t.stderr).toBe(0);
      const init = t.events.find((ev) => ev.type === 'system' && ev.subtype === 'init');
      expect(init?.session_id).toBe(sessionId);
      expect(init?.apiKeySource).toBe('ANTHROPIC_API_KEY');
      const result = resultEvent(t.events);
      expect(result.subtype).toBe('success');
      expect(result.is_error).toBe(false);
      expect(result.session_id).toBe(sessionId);
    }
    expect(resultEvent(turn1.events).result).toBe(REPLY_1);
    expect(resultEvent(turn2.events).result).toBe(REPLY_2);
    expect(e.mock.modelTurns()).toHaveLength(2);
  });

  it('the resumed turn sends the first prompt and reply back to the model', () => {
    const second = requestMessages(e.mock.modelTurns()[1]);
    const convo = second.filter((m) => m.role !== 'system');
    expect(convo.map((m) => m.role)).toEqual(['user', 'assistant', 'user']);
    expect(convo[0]?.text).toContain(PROMPT_1);
    expect(convo[1]?.text).toBe(REPLY_1);
    expect(convo[2]?.text).toContain(PROMPT_2);
    // The first request carried only the first prompt.
    const first = requestMessages(e.mock.modelTurns()[0]).filter((m) => m.role !== 'system');
    expect(first).toHaveLength(1);
    expect(first[0]?.text).toContain(PROMPT_1);
    expect(e.mock.modelTurns()[1]?.headers['x-claude-code-session-id']).toBe(sessionId);
  });

  it('result usage equals what the mock reported', () => {
    expect(e.mock.reported).toEqual([USAGE_1, USAGE_2]);
    expect(resultUsage(resultEvent(turn1.events))).toEqual(USAGE_1);
    expect(resultUsage(resultEvent(turn2.events))).toEqual(USAGE_2);
    const cost = resultEvent(turn2.events).total_cost_usd;
    expect(typeof cost === 'number' && cost > 0).toBe(true);
  });
});

describe('real claude CLI against the mock Anthropic API: Bash tool and API error', () => {
  it(
    'runs the Bash tool the mock asks for and sums the usage of both requests',
    async () => {
      const u1: MockUsage = { input: 4, output: 48, cacheRead: 0, cacheCreation: 5200 };
      const u2: MockUsage = { input: 7, output: 14, cacheRead: 5200, cacheCreation: 96 };
      const e = await setUp([
        { kind: 'shell', command: 'echo fixture-tool-ok', usage: u1 },
        { kind: 'text', text: 'It printed fixture-tool-ok.', usage: u2 },
      ]);
      mocks.push(e.mock);
      const args = [...BASE_ARGS, '--dangerously-skip-permissions', '--session-id', randomUUID()];
      const run = await claude.run(e, [...args, '--', 'Run: echo fixture-tool-ok']);
      expect(run.code, run.stderr).toBe(0);
      const toolResult = run.events.find((ev) => ev.type === 'user');
      expect(JSON.stringify(toolResult)).toContain('fixture-tool-ok');
      const result = resultEvent(run.events);
      expect(result.num_turns).toBe(2);
      expect(resultUsage(result)).toEqual(sumUsage([u1, u2]));
      // The second model request carries the tool's output as the last (non-system) user message.
      const last = lastConversationMessage(e.mock.modelTurns()[1]?.body);
      expect(last?.role).toBe('user');
      const block: unknown = Array.isArray(last?.content) ? last.content[0] : undefined;
      expect(isRecord(block) && block.type).toBe('tool_result');
      expect(messageText(last?.content)).toContain('fixture-tool-ok');
    },
    TIMEOUT_MS,
  );

  it(
    'fails fast on an API error',
    async () => {
      const e = await setUp([{ kind: 'error', status: 500, message: 'mock internal failure' }]);
      mocks.push(e.mock);
      const run = await claude.run(e, [...BASE_ARGS, '--session-id', randomUUID(), '--', 'Say hello']);
      expect(run.code).toBe(1);
      const result = resultEvent(run.events);
      expect(result.is_error).toBe(true);
      expect(result.api_error_status).toBe(500);
      expect(String(result.result)).toContain('mock internal failure');
      const assistant = run.events.find((ev) => ev.type === 'assistant');
      expect(JSON.stringify(assistant)).toContain('"model":"<synthetic>"');
      expect(e.mock.reported).toEqual([]);
      // Fast: the one failed request is the end of it, no retry (CLAUDE_CODE_MAX_RETRIES=0).
      expect(e.mock.modelTurns()).toHaveLength(1);
    },
    TIMEOUT_MS,
  );
});
