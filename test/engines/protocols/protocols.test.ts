/**
 * The protocol parsers, driven by the real recorded engine output in test/fixtures/streams/, plus
 * hand-written lines for shapes the recordings do not cover (malformed, unknown, hostile).
 * Parsers are pure: these tests feed plain strings and compare plain TurnEvent objects.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { TurnEvent } from '../../../src/core/events.js';
import type { ProtocolName } from '../../../src/engines/preset.js';
import { PROTOCOL_REGISTRY } from '../../../src/engines/protocols/index.js';
import {
  decodeLine,
  nonNegative,
  SUMMARY_LIMIT,
  summarize,
} from '../../../src/engines/protocols/protocol.js';
import { turnUsageFrom } from '../../../src/ledger/usage.js';

const STREAMS = fileURLToPath(new URL('../../fixtures/streams/', import.meta.url));

const fixtureText = (engine: string, file: string): string =>
  readFileSync(`${STREAMS}${engine}/${file}`, 'utf8');

/** Every line of a fixture through a fresh parser, as the process runner does, then end(). */
function parseLines(protocol: ProtocolName, lines: readonly string[]): TurnEvent[] {
  const parser = PROTOCOL_REGISTRY[protocol].create();
  const events: TurnEvent[] = [];
  for (const line of lines) events.push(...parser.push(line));
  events.push(...parser.end());
  return events;
}

const parseFixture = (protocol: ProtocolName, engine: string, file: string): TurnEvent[] =>
  parseLines(protocol, fixtureText(engine, file).split('\n'));

/** The fixture's own JSON events, to check figures against. */
function fixtureEvents(engine: string, file: string): Record<string, unknown>[] {
  return fixtureText(engine, file)
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

function onlyOne<T extends TurnEvent['type']>(events: TurnEvent[], type: T): Extract<TurnEvent, { type: T }> {
  const found = events.filter((e): e is Extract<TurnEvent, { type: T }> => e.type === type);
  expect(found, `exactly one ${type} event`).toHaveLength(1);
  return found[0] as Extract<TurnEvent, { type: T }>;
}

const types = (events: TurnEvent[]) => events.map((e) => e.type);

describe('claude-stream-json on recorded Claude Code 2.1.197 output', () => {
  it('two-turn-1: session from system/init, text, usage and cost from result, ok end', () => {
    const events = parseFixture('claude-stream-json', 'claude', 'two-turn-1.jsonl');
    expect(events).toEqual([
      {
        type: 'session',
        engineSessionId: '31cf6203-3844-4a5c-92dd-97d991eb4609',
        model: 'claude-opus-4-8[1m]',
      },
      { type: 'text', text: 'Hello! How can I help you today?' },
      {
        type: 'usage',
        usage: {
          inputTokens: 3,
          outputTokens: 12,
          cacheReadTokens: 0,
          cacheCreationTokens: 5120,
          reasoningTokens: 0,
        },
        model: 'claude-opus-4-8[1m]',
        costUsd: 0.032315,
      },
      { type: 'turn-end', ok: true, message: undefined, subtype: 'success' },
    ]);
  });

  it('two-turn-2: the resumed turn keeps the session id and reports its own usage', () => {
    const events = parseFixture('claude-stream-json', 'claude', 'two-turn-2.jsonl');
    expect(types(events)).toEqual(['session', 'text', 'usage', 'turn-end']);
    expect(onlyOne(events, 'session').engineSessionId).toBe('31cf6203-3844-4a5c-92dd-97d991eb4609');
    expect(onlyOne(events, 'text').text).toBe('You asked me to say hello.');
    const usage = onlyOne(events, 'usage');
    expect(usage.usage).toEqual({
      inputTokens: 6,
      outputTokens: 9,
      cacheReadTokens: 5120,
      cacheCreationTokens: 21,
      reasoningTokens: 0,
    });
    expect(usage.costUsd).toBe(0.00294625);
    expect(usage.model).toBe('claude-opus-4-8');
    expect(onlyOne(events, 'turn-end').ok).toBe(true);
  });

  it('usage is taken from the result event only, never from the per-block assistant usage', () => {
    const raw = fixtureEvents('claude', 'tool-use.jsonl');
    const result = raw.find((e) => e.type === 'result') as {
      usage: Record<string, number>;
      total_cost_usd: number;
    };
    const usage = onlyOne(parseFixture('claude-stream-json', 'claude', 'tool-use.jsonl'), 'usage');
    expect(usage.usage).toEqual({
      inputTokens: result.usage.input_tokens,
      outputTokens: result.usage.output_tokens,
      cacheReadTokens: result.usage.cache_read_input_tokens,
      cacheCreationTokens: result.usage.cache_creation_input_tokens,
      reasoningTokens: 0,
    });
    expect(usage.costUsd).toBe(result.total_cost_usd);
  });

  it('tool-use: tool_use block → tool-use, tool_result → tool-result, then the reply text', () => {
    const events = parseFixture('claude-stream-json', 'claude', 'tool-use.jsonl');
    expect(events).toEqual([
      {
        type: 'session',
        engineSessionId: '4ead94aa-d433-4dfd-877b-e79c0e7b37b6',
        model: 'claude-opus-4-8[1m]',
      },
      {
        type: 'tool-use',
        id: 'toolu_T8fVeuVh2egB1mtg',
        name: 'Bash',
        input: { command: 'echo fixture-tool-ok', description: 'Run echo fixture-tool-ok' },
      },
      { type: 'tool-result', id: 'toolu_T8fVeuVh2egB1mtg', ok: true, summary: 'fixture-tool-ok' },
      { type: 'text', text: 'The command printed `fixture-tool-ok`.' },
      {
        type: 'usage',
        usage: {
          inputTokens: 11,
          outputTokens: 62,
          cacheReadTokens: 5200,
          cacheCreationTokens: 5296,
          reasoningTokens: 0,
        },
        model: 'claude-opus-4-8[1m]',
        costUsd: 0.037305,
      },
      { type: 'turn-end', ok: true, message: undefined, subtype: 'success' },
    ]);
  });

  it('api-retry-recovered: the api_retry system event yields nothing; the turn succeeds', () => {
    const events = parseFixture('claude-stream-json', 'claude', 'api-retry-recovered.jsonl');
    expect(types(events)).toEqual(['session', 'text', 'usage', 'turn-end']);
    expect(onlyOne(events, 'text').text).toBe('Hello!');
    expect(onlyOne(events, 'usage').usage).toEqual({
      inputTokens: 3,
      outputTokens: 5,
      cacheReadTokens: 0,
      cacheCreationTokens: 5120,
      reasoningTokens: 0,
    });
    expect(onlyOne(events, 'usage').costUsd).toBe(0.03214);
    expect(onlyOne(events, 'turn-end')).toEqual({
      type: 'turn-end',
      ok: true,
      message: undefined,
      subtype: 'success',
    });
  });

  const failures: { file: string; message: string }[] = [
    {
      file: 'api-error.jsonl',
      message:
        'API Error: 500 Internal server error. This is a server-side issue, usually temporary — try again in a moment. If it persists, check your inference gateway (127.0.0.1:38365).',
    },
    {
      file: 'api-error-retry.jsonl',
      message:
        'API Error: 529 Overloaded. This is a server-side issue, usually temporary — try again in a moment. If it persists, check your inference gateway (127.0.0.1:38037).',
    },
    { file: 'auth-error.jsonl', message: 'Invalid API key · Fix external API key' },
    { file: 'no-credential.jsonl', message: 'Not logged in · Please run /login' },
  ];

  it.each(failures)(
    '$file: result subtype "success" but is_error true → turn-end ok false',
    ({ file, message }) => {
      const raw = fixtureEvents('claude', file);
      const result = raw.find((e) => e.type === 'result');
      // The recording really says "success": the failure is only in is_error.
      expect(result).toMatchObject({ subtype: 'success', is_error: true });
      const events = parseFixture('claude-stream-json', 'claude', file);
      // The <synthetic> assistant message is the engine's error report, not assistant text.
      expect(types(events)).toEqual(['session', 'error', 'usage', 'turn-end']);
      expect(onlyOne(events, 'error').message).toBe(message);
      expect(events.some((e) => e.type === 'text')).toBe(false);
      expect(onlyOne(events, 'turn-end')).toEqual({
        type: 'turn-end',
        ok: false,
        message,
        subtype: 'success',
      });
      // The engine reported zero usage and zero cost for the failed request; no model was used.
      const usage = onlyOne(events, 'usage');
      expect(usage.usage).toEqual({
        inputTokens: 0,
        outputTokens: 0,
        cacheReadTokens: 0,
        cacheCreationTokens: 0,
        reasoningTokens: 0,
      });
      expect(usage.costUsd).toBe(0);
      expect(usage.model).toBeUndefined();
    },
  );

  it('every recorded claude fixture parses without a diagnostic and ends with exactly one turn-end', () => {
    const files = readdirSync(`${STREAMS}claude`).filter((f) => f.endsWith('.jsonl'));
    expect(files.length).toBeGreaterThanOrEqual(8);
    for (const file of files) {
      const events = parseFixture('claude-stream-json', 'claude', file);
      expect(
        events.filter((e) => e.type === 'diagnostic'),
        file,
      ).toEqual([]);
      expect(
        events.filter((e) => e.type === 'turn-end'),
        file,
      ).toHaveLength(1);
      expect(events.at(-1)?.type, file).toBe('turn-end');
      expect(events[0]?.type, file).toBe('session');
    }
  });
});

describe('claude-stream-json on hand-written shapes', () => {
  const push = (...lines: string[]) => parseLines('claude-stream-json', lines);

  it('a tool_result with is_error and text-block content → ok false, blocks joined', () => {
    const line = JSON.stringify({
      type: 'user',
      message: {
        content: [
          {
            type: 'tool_result',
            tool_use_id: 't1',
            is_error: true,
            content: [
              { type: 'text', text: 'PreToolUse:Bash hook error' },
              { type: 'text', text: 'blocked' },
            ],
          },
        ],
      },
    });
    expect(push(line)).toEqual([
      { type: 'tool-result', id: 't1', ok: false, summary: 'PreToolUse:Bash hook error\nblocked' },
    ]);
  });

  it('a user event with string content (the prompt echo) yields nothing', () => {
    expect(push('{"type":"user","message":{"content":"hello"}}')).toEqual([]);
  });

  it('result with an error subtype → ok false, message from errors', () => {
    const events = push(
      JSON.stringify({
        type: 'result',
        subtype: 'error_max_turns',
        is_error: false,
        errors: ['max turns reached'],
      }),
    );
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ type: 'turn-end', ok: false, subtype: 'error_max_turns' });
    expect((events[0] as { message: string }).message).toContain('max turns reached');
  });

  it('a result without usage reports no usage (not zeros)', () => {
    expect(push('{"type":"result","subtype":"success","is_error":false,"result":"done"}')).toEqual([
      { type: 'turn-end', ok: true, message: undefined, subtype: 'success' },
    ]);
    expect(push('{"type":"result","subtype":"success","usage":null}')).toEqual([
      { type: 'turn-end', ok: true, message: undefined, subtype: 'success' },
    ]);
  });

  it('negative, non-finite or null token counts become 0', () => {
    const [usage] = push(
      JSON.stringify({
        type: 'result',
        subtype: 'success',
        usage: { input_tokens: -5, output_tokens: 7, cache_read_input_tokens: null },
      }),
    );
    expect(usage).toMatchObject({
      type: 'usage',
      usage: {
        inputTokens: 0,
        outputTokens: 7,
        cacheReadTokens: 0,
        cacheCreationTokens: 0,
        reasoningTokens: 0,
      },
    });
  });

  it('system/init without a session id, and other system subtypes, yield nothing', () => {
    expect(
      push(
        '{"type":"system","subtype":"init"}',
        '{"type":"system","subtype":"hook_started","session_id":"x"}',
      ),
    ).toEqual([]);
  });

  it('one assistant event with several blocks yields one event per block, in order', () => {
    const line = JSON.stringify({
      type: 'assistant',
      message: {
        model: 'claude-opus-4-8',
        content: [
          { type: 'thinking', thinking: 'hmm' },
          { type: 'text', text: 'a' },
          { type: 'tool_use', id: 'u1', name: 'Read', input: { file_path: '/x' } },
          { type: 'tool_use' },
        ],
      },
    });
    expect(push(line)).toEqual([
      { type: 'text', text: 'a' },
      { type: 'tool-use', id: 'u1', name: 'Read', input: { file_path: '/x' } },
      { type: 'tool-use', id: '', name: 'unknown', input: null },
    ]);
  });

  it('permission denials → tool-refused events (at most 100), before usage and turn-end', () => {
    const line = JSON.stringify({
      type: 'result',
      subtype: 'success',
      usage: { input_tokens: 1 },
      permission_denials: [
        { tool_name: 'Bash', tool_use_id: 't1', tool_input: { command: 'git push' } },
        null,
        'x',
        { tool_name: 7 },
      ],
    });
    expect(push(line)).toEqual([
      { type: 'tool-refused', tool: 'Bash', id: 't1', input: { command: 'git push' } },
      { type: 'tool-refused', tool: 'unknown', id: undefined, input: undefined },
      { type: 'tool-refused', tool: 'unknown', id: undefined, input: undefined },
      { type: 'tool-refused', tool: 'unknown', id: undefined, input: undefined },
      {
        type: 'usage',
        usage: {
          inputTokens: 1,
          outputTokens: 0,
          cacheReadTokens: 0,
          cacheCreationTokens: 0,
          reasoningTokens: 0,
        },
        model: undefined,
        costUsd: undefined,
      },
      { type: 'turn-end', ok: true, message: undefined, subtype: 'success' },
    ]);
    const many = push(
      JSON.stringify({
        type: 'result',
        permission_denials: Array.from({ length: 150 }, (_, i) => ({ tool_name: `T${i}` })),
      }),
    );
    expect(types(many)).toEqual([...Array(100).fill('tool-refused'), 'turn-end']);
  });

  it('the models of modelUsage are named in its key order; none named when it is empty', () => {
    const usage = (modelUsage: unknown) =>
      push(JSON.stringify({ type: 'result', usage: {}, modelUsage }))[0] as { model?: string };
    expect(usage({ 'claude-a': {}, 'claude-b': {} }).model).toBe('claude-a,claude-b');
    expect(usage({}).model).toBeUndefined();
    expect(usage(undefined).model).toBeUndefined();
  });
});

describe('codex-json on recorded Codex 0.171.0 output', () => {
  it('two-turn-1: thread id, reasoning item ignored, text, usage split into disjoint kinds', () => {
    const events = parseFixture('codex-json', 'codex', 'two-turn-1.jsonl');
    expect(events).toEqual([
      { type: 'session', engineSessionId: '01a236ca-48e3-7de1-9e0c-9990f37e11eb' },
      { type: 'text', text: 'Hello! This is turn one.' },
      {
        type: 'usage',
        // output_tokens 40 includes reasoning_output_tokens 12 (OpenAI semantics): 28 + 12.
        usage: {
          inputTokens: 1200,
          outputTokens: 28,
          cacheReadTokens: 0,
          cacheCreationTokens: 0,
          reasoningTokens: 12,
        },
      },
      { type: 'turn-end', ok: true },
    ]);
  });

  it('two-turn-2: the resumed thread announces the same id; usage is the running total 2700/1152/65/12', () => {
    const events = parseFixture('codex-json', 'codex', 'two-turn-2.jsonl');
    expect(types(events)).toEqual(['session', 'text', 'usage', 'turn-end']);
    expect(onlyOne(events, 'session').engineSessionId).toBe('01a236ca-48e3-7de1-9e0c-9990f37e11eb');
    expect(onlyOne(events, 'text').text).toBe('You asked me to say hello.');
    const { usage } = onlyOne(events, 'usage');
    expect(usage).toEqual({
      inputTokens: 2700 - 1152,
      outputTokens: 65 - 12,
      cacheReadTokens: 1152,
      cacheCreationTokens: 0,
      reasoningTokens: 12,
    });
  });

  it('README figures: turn 2 own usage = thread total − turn 1 total = {input 1500 (1152 cached), output 25, reasoning 0}', () => {
    const first = turnUsageFrom(parseFixture('codex-json', 'codex', 'two-turn-1.jsonl'), 'thread', null);
    // Turn 1 per README: input 1200, cached 0, output 40 (incl. reasoning 12).
    expect(first.usage).toEqual({
      inputTokens: 1200,
      outputTokens: 28,
      cacheReadTokens: 0,
      cacheCreationTokens: 0,
      reasoningTokens: 12,
    });
    const second = turnUsageFrom(
      parseFixture('codex-json', 'codex', 'two-turn-2.jsonl'),
      'thread',
      first.nextBaseline,
    );
    expect(second.warnings).toEqual([]);
    expect(second.usage).toEqual({
      inputTokens: 1500 - 1152,
      outputTokens: 25,
      cacheReadTokens: 1152,
      cacheCreationTokens: 0,
      reasoningTokens: 0,
    });
  });

  it('tool-use: command_execution → shell tool-use/tool-result, then the reply, usage summed over both requests', () => {
    const events = parseFixture('codex-json', 'codex', 'tool-use.jsonl');
    expect(events).toEqual([
      { type: 'session', engineSessionId: '01a236ca-4dac-7782-9e4c-17c267527f9c' },
      {
        type: 'tool-use',
        id: 'item_0',
        name: 'shell',
        input: { command: "/bin/bash -lc 'echo fixture-tool-ok'" },
      },
      { type: 'tool-result', id: 'item_0', ok: true, summary: 'fixture-tool-ok\n' },
      { type: 'text', text: 'It printed fixture-tool-ok.' },
      {
        type: 'usage',
        // README: {1200, 0, 30, 0} + {1350, 1152, 10, 0} → input 2550 of which 1152 cached.
        usage: {
          inputTokens: 2550 - 1152,
          outputTokens: 40,
          cacheReadTokens: 1152,
          cacheCreationTokens: 0,
          reasoningTokens: 0,
        },
      },
      { type: 'turn-end', ok: true },
    ]);
  });

  it('api-error (401): error event then turn-end ok false with the message', () => {
    const message =
      'unexpected status 401 Unauthorized: Incorrect API key provided: sk-fixture., url: http://127.0.0.1:46053/v1/responses';
    expect(parseFixture('codex-json', 'codex', 'api-error.jsonl')).toEqual([
      { type: 'session', engineSessionId: '01a236ca-5214-7011-92d0-5e85049a410f' },
      { type: 'error', message },
      { type: 'turn-end', ok: false, message },
    ]);
  });

  it('api-error-500: no usage event at all (unmetered, not zero), turn-end ok false', () => {
    const events = parseFixture('codex-json', 'codex', 'api-error-500.jsonl');
    const message = 'We’re currently experiencing high demand, which may cause temporary errors.';
    expect(events).toEqual([
      { type: 'session', engineSessionId: '01a236ca-55aa-74d0-a93f-34852723a170' },
      { type: 'error', message },
      { type: 'turn-end', ok: false, message },
    ]);
    expect(turnUsageFrom(events, 'thread', null).usage).toBeNull();
  });
});

describe('codex-json on hand-written shapes', () => {
  const push = (...lines: string[]) => parseLines('codex-json', lines);
  const item = (type: 'item.started' | 'item.completed', it: Record<string, unknown>) =>
    JSON.stringify({ type, item: it });

  it('a completed tool item never seen started still yields its tool-use first', () => {
    expect(
      push(item('item.completed', { id: 'c1', type: 'command_execution', command: 'false', exit_code: 1 })),
    ).toEqual([
      { type: 'tool-use', id: 'c1', name: 'shell', input: { command: 'false' } },
      { type: 'tool-result', id: 'c1', ok: false, summary: '' },
    ]);
  });

  it('failed, declined and errored tool items are not ok', () => {
    const events = push(
      item('item.completed', { id: 'f1', type: 'file_change', changes: [{ path: 'a' }], status: 'failed' }),
      item('item.completed', {
        id: 'm1',
        type: 'mcp_tool_call',
        server: 'gh',
        tool: 'merge',
        arguments: { pr: 1 },
        status: 'declined',
      }),
      item('item.completed', {
        id: 'm2',
        type: 'mcp_tool_call',
        server: 'gh',
        tool: 'view',
        error: { message: 'nope' },
      }),
    );
    expect(events).toEqual([
      { type: 'tool-use', id: 'f1', name: 'apply_patch', input: { changes: [{ path: 'a' }] } },
      { type: 'tool-result', id: 'f1', ok: false, summary: 'failed' },
      { type: 'tool-use', id: 'm1', name: 'mcp:gh/merge', input: { pr: 1 } },
      { type: 'tool-result', id: 'm1', ok: false, summary: 'declined' },
      { type: 'tool-use', id: 'm2', name: 'mcp:gh/view', input: null },
      { type: 'tool-result', id: 'm2', ok: false, summary: '{"message":"nope"}' },
    ]);
  });

  it('error items become error events; turn.failed without a message still ends the turn', () => {
    expect(
      push(
        item('item.completed', { id: 'e', type: 'error', message: 'stream broke' }),
        '{"type":"turn.failed"}',
      ),
    ).toEqual([
      { type: 'error', message: 'stream broke' },
      { type: 'turn-end', ok: false, message: 'turn failed' },
    ]);
  });

  it('cached tokens larger than input never yield negative input', () => {
    const [usage] = push(
      JSON.stringify({
        type: 'turn.completed',
        usage: { input_tokens: 10, cached_input_tokens: 50, output_tokens: -3 },
      }),
    );
    expect(usage).toEqual({
      type: 'usage',
      usage: {
        inputTokens: 0,
        outputTokens: 0,
        cacheReadTokens: 50,
        cacheCreationTokens: 0,
        reasoningTokens: 0,
      },
    });
  });

  it('the started-id memory is per parser: a new parser re-emits tool-use for a completed item', () => {
    const parser = PROTOCOL_REGISTRY['codex-json'].create();
    parser.push(item('item.started', { id: 'x', type: 'web_search', query: 'q' }));
    expect(
      parser.push(item('item.completed', { id: 'x', type: 'web_search', query: 'q', status: 'completed' })),
    ).toEqual([{ type: 'tool-result', id: 'x', ok: true, summary: 'completed' }]);
    const fresh = PROTOCOL_REGISTRY['codex-json'].create();
    expect(
      types(
        fresh.push(item('item.completed', { id: 'x', type: 'web_search', query: 'q', status: 'completed' })),
      ),
    ).toEqual(['tool-use', 'tool-result']);
  });
});

describe('gemini-stream-json on hand-written lines (shapes of @google/gemini-cli 0.61.0)', () => {
  const push = (...lines: string[]) => parseLines('gemini-stream-json', lines);
  const json = (...objects: Record<string, unknown>[]) => objects.map((o) => JSON.stringify(o));

  it('a whole turn: init, user echo ignored, deltas joined, tool use/result, result with stats', () => {
    const lines = json(
      { type: 'init', timestamp: 't', session_id: 'c0ffee00-0000-4000-8000-000000000001', model: 'auto' },
      { type: 'message', role: 'user', content: 'Run echo hi' },
      { type: 'message', role: 'assistant', content: 'Let me ', delta: true },
      { type: 'message', role: 'assistant', content: 'run it.', delta: true },
      {
        type: 'tool_use',
        tool_name: 'run_shell_command',
        tool_id: 'call-1',
        parameters: { command: 'echo hi' },
      },
      { type: 'tool_result', tool_id: 'call-1', status: 'success', output: 'hi' },
      { type: 'message', role: 'assistant', content: 'It printed ', delta: true },
      { type: 'message', role: 'assistant', content: 'hi.', delta: true },
      {
        type: 'result',
        status: 'success',
        stats: {
          total_tokens: 1050,
          input_tokens: 1000,
          output_tokens: 50,
          cached: 400,
          input: 600,
          duration_ms: 12,
          tool_calls: 1,
          models: {
            'gemini-router': { total_tokens: 0, input_tokens: 0, output_tokens: 0, cached: 0, input: 0 },
            'gemini-2.5-pro': {
              total_tokens: 1050,
              input_tokens: 1000,
              output_tokens: 50,
              cached: 400,
              input: 600,
            },
          },
        },
      },
    );
    expect(push(...lines)).toEqual([
      { type: 'session', engineSessionId: 'c0ffee00-0000-4000-8000-000000000001', model: 'auto' },
      // Deltas are flushed as one text when something else arrives.
      { type: 'text', text: 'Let me run it.' },
      { type: 'tool-use', id: 'call-1', name: 'run_shell_command', input: { command: 'echo hi' } },
      { type: 'tool-result', id: 'call-1', ok: true, summary: 'hi' },
      { type: 'text', text: 'It printed hi.' },
      {
        type: 'usage',
        usage: {
          inputTokens: 600,
          outputTokens: 50,
          cacheReadTokens: 400,
          cacheCreationTokens: 0,
          reasoningTokens: 0,
        },
        // A model listed with zero tokens (the router) is not named.
        model: 'gemini-2.5-pro',
      },
      { type: 'turn-end', ok: true, message: undefined },
    ]);
  });

  it('pending deltas are flushed by end() when no result arrives (engine killed mid-turn)', () => {
    const parser = PROTOCOL_REGISTRY['gemini-stream-json'].create();
    const during = [
      ...parser.push(JSON.stringify({ type: 'message', role: 'assistant', content: 'half a ', delta: true })),
      ...parser.push(
        JSON.stringify({ type: 'message', role: 'assistant', content: 'sentence', delta: true }),
      ),
    ];
    expect(during).toEqual([]);
    expect(parser.end()).toEqual([{ type: 'text', text: 'half a sentence' }]);
    expect(parser.end()).toEqual([]);
  });

  it('a non-delta assistant message is its own text event, after any pending deltas', () => {
    expect(
      push(
        ...json(
          { type: 'message', role: 'assistant', content: 'a', delta: true },
          { type: 'message', role: 'assistant', content: 'whole' },
        ),
      ),
    ).toEqual([
      { type: 'text', text: 'a' },
      { type: 'text', text: 'whole' },
    ]);
  });

  it('a bad line between deltas is reported without breaking the joined text', () => {
    expect(
      push(
        JSON.stringify({ type: 'message', role: 'assistant', content: 'x', delta: true }),
        'garbage',
        JSON.stringify({ type: 'message', role: 'assistant', content: 'y', delta: true }),
      ),
    ).toEqual([
      { type: 'diagnostic', message: 'not JSON: garbage' },
      { type: 'text', text: 'xy' },
    ]);
  });

  it('a failed tool and an error result → ok false with the error message', () => {
    const events = push(
      ...json(
        { type: 'tool_result', tool_id: 'c2', status: 'error', error: { type: 'X', message: 'denied' } },
        { type: 'error', severity: 'warning', message: 'Loop detected, stopping execution' },
        {
          type: 'result',
          status: 'error',
          error: { type: 'FatalAuthenticationError', message: 'API key not valid' },
        },
      ),
    );
    expect(events).toEqual([
      { type: 'tool-result', id: 'c2', ok: false, summary: 'denied' },
      { type: 'error', message: 'Loop detected, stopping execution' },
      { type: 'turn-end', ok: false, message: 'API key not valid' },
    ]);
  });

  // @google/gemini-cli 0.61.0 `convertToStreamStats` emits total_tokens, input_tokens, output_tokens,
  // cached, input: no thoughts field. Thinking tokens (billed as output) show only in total_tokens.
  it('thinking tokens are recovered as total_tokens − input_tokens − output_tokens', () => {
    const [usage] = push(
      JSON.stringify({
        type: 'result',
        status: 'success',
        stats: { total_tokens: 1080, input_tokens: 1000, output_tokens: 50, cached: 200, input: 800 },
      }),
    );
    expect(usage).toEqual({
      type: 'usage',
      usage: {
        inputTokens: 800,
        outputTokens: 50,
        cacheReadTokens: 200,
        cacheCreationTokens: 0,
        reasoningTokens: 30,
      },
      model: undefined,
    });
    const u = (usage as Extract<TurnEvent, { type: 'usage' }>).usage;
    expect(
      u.inputTokens + u.outputTokens + u.cacheReadTokens + u.cacheCreationTokens + u.reasoningTokens,
    ).toBe(1080);
  });

  it('an explicit thoughts_tokens wins; a total below input+output never gives negative reasoning', () => {
    const [a] = push(
      JSON.stringify({
        type: 'result',
        status: 'success',
        stats: { total_tokens: 999, input_tokens: 10, output_tokens: 5, thoughts_tokens: 7 },
      }),
    );
    expect((a as Extract<TurnEvent, { type: 'usage' }>).usage.reasoningTokens).toBe(7);
    const [b] = push(
      JSON.stringify({
        type: 'result',
        status: 'success',
        stats: { total_tokens: 3, input_tokens: 10, output_tokens: 5 },
      }),
    );
    expect((b as Extract<TurnEvent, { type: 'usage' }>).usage.reasoningTokens).toBe(0);
  });
});

describe('gemini-stream-json on recorded Gemini CLI 0.61.0 output', () => {
  it('two-turn-1: session from init, deltas joined, usage from stats, ok end', () => {
    expect(parseFixture('gemini-stream-json', 'gemini', 'two-turn-1.jsonl')).toEqual([
      { type: 'session', engineSessionId: '7f3c2a10-4b5d-4e6f-8a9b-0c1d2e3f4a5b', model: 'auto' },
      { type: 'text', text: 'Hello! The answer is 4.' },
      {
        type: 'usage',
        usage: {
          inputTokens: 1200,
          outputTokens: 35,
          cacheReadTokens: 0,
          cacheCreationTokens: 0,
          reasoningTokens: 0,
        },
        model: 'gemini-3.8-flash',
      },
      { type: 'turn-end', ok: true, message: undefined },
    ]);
  });

  it('two-turn-2: same session id; 1000 of 1300 input cached; 12 thinking tokens seen only in total_tokens', () => {
    expect(parseFixture('gemini-stream-json', 'gemini', 'two-turn-2.jsonl')).toEqual([
      { type: 'session', engineSessionId: '7f3c2a10-4b5d-4e6f-8a9b-0c1d2e3f4a5b', model: 'auto' },
      { type: 'text', text: 'You asked what 2+2 is; I said 4.' },
      {
        type: 'usage',
        usage: {
          inputTokens: 300,
          outputTokens: 40,
          cacheReadTokens: 1000,
          cacheCreationTokens: 0,
          reasoningTokens: 12,
        },
        model: 'gemini-3.8-flash',
      },
      { type: 'turn-end', ok: true, message: undefined },
    ]);
  });

  it('tool-use: run_shell_command use and result, then the reply; usage of both requests', () => {
    const id = 'run_shell_command__run_shell_command_1796216346392_0';
    expect(parseFixture('gemini-stream-json', 'gemini', 'tool-use.jsonl')).toEqual([
      { type: 'session', engineSessionId: '8a4d3b21-5c6e-4f70-9bac-1d2e3f4a5b6c', model: 'auto' },
      { type: 'tool-use', id, name: 'run_shell_command', input: { command: 'echo fixture-tool-ok' } },
      { type: 'tool-result', id, ok: true, summary: 'fixture-tool-ok' },
      { type: 'text', text: 'The command printed fixture-tool-ok.' },
      {
        type: 'usage',
        // {900, 25} + {1000, 30, 800 cached} → 1900 input of which 800 cached, 55 output.
        usage: {
          inputTokens: 1100,
          outputTokens: 55,
          cacheReadTokens: 800,
          cacheCreationTokens: 0,
          reasoningTokens: 0,
        },
        model: 'gemini-3.8-flash',
      },
      { type: 'turn-end', ok: true, message: undefined },
    ]);
  });

  it.each([
    ['api-error.jsonl', '9b5e4c32-6d7f-4081-8cbd-2e3f4a5b6c7d', 500, 'Internal error encountered.'],
    [
      'api-error-401.jsonl',
      'ac6f5d43-7e80-4192-9dce-3f4a5b6c7d8e',
      401,
      'API key not valid. Please pass a valid API key.',
    ],
  ])(
    '%s: result status error → ok false with the API error; zero usage, no model named',
    (file, id, code, text) => {
      const events = parseFixture('gemini-stream-json', 'gemini', file);
      expect(types(events)).toEqual(['session', 'usage', 'turn-end']);
      expect(events[0]).toEqual({ type: 'session', engineSessionId: id, model: 'auto' });
      expect(onlyOne(events, 'usage')).toEqual({
        type: 'usage',
        usage: {
          inputTokens: 0,
          outputTokens: 0,
          cacheReadTokens: 0,
          cacheCreationTokens: 0,
          reasoningTokens: 0,
        },
        model: undefined,
      });
      const end = onlyOne(events, 'turn-end');
      expect(end.ok).toBe(false);
      expect(end.message).toContain(`"code":${code}`);
      expect(end.message).toContain(text);
    },
  );

  it('empty-response: the error event carries the reason; the turn fails; the 500 input tokens are counted', () => {
    const events = parseFixture('gemini-stream-json', 'gemini', 'empty-response.jsonl');
    expect(types(events)).toEqual(['session', 'error', 'usage', 'turn-end']);
    expect(onlyOne(events, 'error').message).toBe(
      'The model returned an empty response with no text or thoughts. This may be a transient API issue; please try again.',
    );
    expect(onlyOne(events, 'usage').usage).toEqual({
      inputTokens: 500,
      outputTokens: 0,
      cacheReadTokens: 0,
      cacheCreationTokens: 0,
      reasoningTokens: 0,
    });
    expect(onlyOne(events, 'turn-end').ok).toBe(false);
    // The result has no error of its own: the turn says why with the error event's words.
    expect(onlyOne(events, 'turn-end').message).toMatch(/^The model returned an empty response/);
  });
});

const GEMINI_DIR = `${STREAMS}gemini`;
const geminiFiles = existsSync(GEMINI_DIR) ? readdirSync(GEMINI_DIR).filter((f) => f.endsWith('.jsonl')) : [];

describe('gemini-stream-json: every recorded fixture against its own result event', () => {
  it.skipIf(geminiFiles.length === 0)(
    `all ${geminiFiles.length} fixtures in test/fixtures/streams/gemini (skipped when there are none)`,
    () => {
      for (const file of geminiFiles) {
        const raw = fixtureEvents('gemini', file);
        const events = parseFixture('gemini-stream-json', 'gemini', file);
        expect(
          events.filter((e) => e.type === 'diagnostic'),
          file,
        ).toEqual([]);
        const init = raw.find((e) => e.type === 'init');
        if (init)
          expect(events[0], file).toEqual({
            type: 'session',
            engineSessionId: init.session_id,
            model: init.model,
          });
        const result = raw.find((e) => e.type === 'result') as
          | {
              status: string;
              stats?: { input_tokens: number; output_tokens: number; cached: number; total_tokens: number };
            }
          | undefined;
        if (!result) continue;
        const end = onlyOne(events, 'turn-end');
        expect(end.ok, file).toBe(result.status === 'success');
        expect(events.at(-1), file).toBe(end);
        if (result.stats) {
          const { usage } = onlyOne(events, 'usage');
          expect(usage.cacheReadTokens, file).toBe(result.stats.cached);
          expect(usage.inputTokens + usage.cacheReadTokens, file).toBe(result.stats.input_tokens);
          expect(usage.outputTokens, file).toBe(result.stats.output_tokens);
          const sum = usage.inputTokens + usage.outputTokens + usage.cacheReadTokens + usage.reasoningTokens;
          expect(sum, file).toBe(result.stats.total_tokens);
        }
        const assistantText = raw
          .filter((e) => e.type === 'message' && e.role === 'assistant')
          .map((e) => e.content)
          .join('');
        const text = events
          .filter((e): e is Extract<TurnEvent, { type: 'text' }> => e.type === 'text')
          .map((e) => e.text)
          .join('');
        expect(text, file).toBe(assistantText);
      }
    },
  );
});

describe('text protocol', () => {
  it('every non-empty chunk is text; there is no result event', () => {
    const protocol = PROTOCOL_REGISTRY.text;
    expect(protocol.framing).toBe('text');
    expect(protocol.hasResultEvent).toBe(false);
    const parser = protocol.create();
    expect(parser.push('')).toEqual([]);
    expect(parser.push('not {json}\n')).toEqual([{ type: 'text', text: 'not {json}\n' }]);
    expect(parser.push('{"type":"result"}')).toEqual([{ type: 'text', text: '{"type":"result"}' }]);
    expect(parser.end()).toEqual([]);
  });

  it('the jsonl protocols declare jsonl framing and a result event', () => {
    for (const name of ['claude-stream-json', 'codex-json', 'gemini-stream-json'] as const) {
      expect(PROTOCOL_REGISTRY[name].framing, name).toBe('jsonl');
      expect(PROTOCOL_REGISTRY[name].hasResultEvent, name).toBe(true);
    }
  });
});

const JSONL: ProtocolName[] = ['claude-stream-json', 'codex-json', 'gemini-stream-json'];

describe.each(JSONL)('%s: malformed, unknown and hostile lines', (protocol) => {
  const one = (line: string): TurnEvent[] => PROTOCOL_REGISTRY[protocol].create().push(line);

  it.each([
    ['not JSON', 'this is not json', 'not JSON: this is not json'],
    ['truncated JSON', '{"type":"result","usage":{', 'not JSON: '],
    ['a JSON array', '[{"type":"result"}]', 'not an event object: '],
    ['an object without type', '{"subtype":"init"}', 'not an event object: '],
    ['a non-string type', '{"type":7}', 'not an event object: '],
    ['null', 'null', 'not an event object: '],
    ['a number', '42', 'not an event object: '],
    ['a string', '"result"', 'not an event object: '],
    ['a raw NUL byte inside a JSON string', '{"type":"x\u0000"}', 'not JSON: '],
  ])('%s → exactly one diagnostic', (_name, line, prefix) => {
    const events = one(line);
    expect(events).toHaveLength(1);
    expect(events[0]?.type).toBe('diagnostic');
    expect((events[0] as { message: string }).message.startsWith(prefix)).toBe(true);
  });

  it('blank and whitespace-only lines yield nothing', () => {
    expect(one('')).toEqual([]);
    expect(one('   \t\r')).toEqual([]);
    // Blank as String.prototype.trim reads it, though JSON whitespace is only space, tab, CR, LF.
    expect(one('\u00a0\ufeff\u2028 ')).toEqual([]);
  });

  it('unknown event types yield no event and no diagnostic', () => {
    for (const type of ['stream_event', 'turn.started', 'item.updated', 'heartbeat', 'x'.repeat(1000)]) {
      expect(one(JSON.stringify({ type, anything: { nested: [1, 2] } })), type).toEqual([]);
    }
  });

  it('type names that are Object.prototype keys are unknown types, not lookups', () => {
    for (const type of ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf']) {
      expect(one(JSON.stringify({ type })), type).toEqual([]);
    }
  });

  it('a bad line in the middle is reported once and the stream goes on', () => {
    const parser = PROTOCOL_REGISTRY[protocol].create();
    const before = parser.push('{oops');
    const after = parser.push('[]');
    expect(types([...before, ...after])).toEqual(['diagnostic', 'diagnostic']);
    // A known, well-formed line still parses after the bad ones.
    const good: Record<ProtocolName, string> = {
      'claude-stream-json': '{"type":"system","subtype":"init","session_id":"s1"}',
      'codex-json': '{"type":"thread.started","thread_id":"s1"}',
      'gemini-stream-json': '{"type":"init","session_id":"s1"}',
      text: '',
    };
    expect(parser.push(good[protocol])).toMatchObject([{ type: 'session', engineSessionId: 's1' }]);
  });

  it('a diagnostic quotes at most a bounded excerpt of a 5 MB bad line', () => {
    const events = one(`{${'x'.repeat(5 * 1024 * 1024)}`);
    expect(events).toHaveLength(1);
    expect((events[0] as { message: string }).message.length).toBeLessThan(400);
  });

  it('a hostile known-type line (5 MB string, deep nesting in an extra field, __proto__ keys, NUL/ESC) does not throw', () => {
    const big = 'A'.repeat(5 * 1024 * 1024);
    const deep = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;
    const controls = 'a\u0000b\u001b[2J\u001b]0;title\u0007\u009b\ud800c';
    const lines: Record<ProtocolName, string[]> = {
      'claude-stream-json': [
        `{"type":"system","subtype":"init","session_id":${JSON.stringify(controls)},"extra":${deep},"__proto__":{"polluted":true}}`,
        JSON.stringify({ type: 'assistant', message: { content: [{ type: 'text', text: big }] } }),
        JSON.stringify({
          type: 'user',
          message: { content: [{ type: 'tool_result', tool_use_id: 'u', content: big }] },
        }),
        `{"type":"result","subtype":"success","result":"ok","__proto__":{"is_error":true},"usage":{"input_tokens":1e308,"__proto__":{}}}`,
      ],
      'codex-json': [
        `{"type":"thread.started","thread_id":${JSON.stringify(controls)},"extra":${deep},"__proto__":{"polluted":true}}`,
        JSON.stringify({ type: 'item.completed', item: { id: 'a', type: 'agent_message', text: big } }),
        JSON.stringify({
          type: 'item.completed',
          item: { id: 'b', type: 'command_execution', aggregated_output: big },
        }),
        `{"type":"turn.completed","usage":{"input_tokens":1e308,"__proto__":{"output_tokens":5}}}`,
      ],
      'gemini-stream-json': [
        `{"type":"init","session_id":${JSON.stringify(controls)},"extra":${deep},"__proto__":{"polluted":true}}`,
        JSON.stringify({ type: 'message', role: 'assistant', content: big }),
        JSON.stringify({ type: 'tool_result', tool_id: 't', status: 'success', output: big }),
        `{"type":"result","status":"success","__proto__":{"status":"error"},"stats":{"input_tokens":1e308}}`,
      ],
      text: [],
    };
    const parser = PROTOCOL_REGISTRY[protocol].create();
    const events = lines[protocol].flatMap((line) => parser.push(line));
    expect(Object.hasOwn(Object.prototype, 'polluted')).toBe(false);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    // The id arrives intact (NUL, ESC and all): parsers carry data, scrubbing happens at the edges.
    expect(events[0]).toMatchObject({ type: 'session', engineSessionId: controls });
    // The big text is kept whole (it is the reply); a tool output summary is bounded.
    expect(events.some((e) => e.type === 'text' && e.text.length === big.length)).toBe(true);
    const result = events.find((e) => e.type === 'tool-result') as { summary: string };
    expect(result.summary.length).toBeLessThanOrEqual(SUMMARY_LIMIT + 40);
    expect(result.summary.startsWith('AAAA')).toBe(true);
    // Absurd token counts are carried as finite numbers, never NaN.
    const usage = events.find((e) => e.type === 'usage') as Extract<TurnEvent, { type: 'usage' }>;
    for (const value of Object.values(usage.usage)) expect(Number.isFinite(value)).toBe(true);
    // The own "__proto__" key does not flip the outcome.
    expect(events.at(-1)).toMatchObject({ type: 'turn-end', ok: true });
  });

  it('wrong-shaped known events → one diagnostic naming the event type and field', () => {
    const cases: Record<ProtocolName, [string, string][]> = {
      'claude-stream-json': [
        ['{"type":"assistant","message":"hi"}', 'bad "assistant" event: message'],
        ['{"type":"assistant"}', 'bad "assistant" event: message'],
        ['{"type":"system","subtype":"init","session_id":5}', 'bad "system" event: session_id'],
        ['{"type":"user","message":{"content":7}}', 'bad "user" event: message.content'],
        ['{"type":"result","usage":{"input_tokens":"many"}}', 'bad "result" event: usage.input_tokens'],
        ['{"type":"result","is_error":"yes"}', 'bad "result" event: is_error'],
      ],
      'codex-json': [
        ['{"type":"thread.started","thread_id":42}', 'bad "thread.started" event: thread_id'],
        ['{"type":"thread.started"}', 'bad "thread.started" event: thread_id'],
        ['{"type":"item.completed","item":{"id":"x"}}', 'bad "item.completed" event: item.type'],
        ['{"type":"item.started","item":null}', 'bad "item.started" event: item'],
        [
          '{"type":"turn.completed","usage":{"input_tokens":"10"}}',
          'bad "turn.completed" event: usage.input_tokens',
        ],
        ['{"type":"error","message":{"text":"x"}}', 'bad "error" event: message'],
      ],
      'gemini-stream-json': [
        ['{"type":"init","session_id":1}', 'bad "init" event: session_id'],
        ['{"type":"tool_use","tool_name":7}', 'bad "tool_use" event: tool_name'],
        ['{"type":"tool_result","status":false}', 'bad "tool_result" event: status'],
        ['{"type":"result","stats":{"input_tokens":"many"}}', 'bad "result" event: stats.input_tokens'],
        ['{"type":"error","message":[]}', 'bad "error" event: message'],
      ],
      text: [],
    };
    for (const [line, prefix] of cases[protocol]) {
      const events = one(line);
      expect(events, line).toHaveLength(1);
      expect(events[0]?.type, line).toBe('diagnostic');
      expect((events[0] as { message: string }).message, line).toContain(prefix);
    }
  });
});

/*
 * Values the parsers summarize (tool results, error details) go through JSON.stringify, which is
 * recursive in V8 and throws RangeError ("Maximum call stack size exceeded") at ~10k levels, while
 * JSON.parse accepts far deeper input. The parser then throws out of push(), i.e. out of the
 * child's stdout 'data' handler in the process runner: an uncaught exception, not a diagnostic.
 */
describe('deeply nested values in summarized fields', () => {
  const deep = `${'['.repeat(20_000)}${']'.repeat(20_000)}`;
  const deepObject = `${'{"a":'.repeat(20_000)}1${'}'.repeat(20_000)}`;

  it('claude tool_result with deeply nested content does not throw', () => {
    const line = `{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":${deep}}]}}`;
    expect(() => PROTOCOL_REGISTRY['claude-stream-json'].create().push(line)).not.toThrow();
  });

  it('codex tool item with a deeply nested result does not throw', () => {
    const line = `{"type":"item.completed","item":{"id":"m","type":"mcp_tool_call","server":"s","tool":"t","result":${deepObject}}}`;
    expect(() => PROTOCOL_REGISTRY['codex-json'].create().push(line)).not.toThrow();
  });

  it('gemini tool_result with a deeply nested output does not throw', () => {
    const line = `{"type":"tool_result","tool_id":"t","status":"success","output":${deepObject}}`;
    expect(() => PROTOCOL_REGISTRY['gemini-stream-json'].create().push(line)).not.toThrow();
  });

  it('deep nesting in a field the parser passes through (tool input) does not throw in the parser', () => {
    const line = `{"type":"assistant","message":{"content":[{"type":"tool_use","id":"u","name":"X","input":${deepObject}}]}}`;
    const [event] = PROTOCOL_REGISTRY['claude-stream-json'].create().push(line);
    expect(event).toMatchObject({ type: 'tool-use', id: 'u', name: 'X' });
  });
});

describe('protocol.ts helpers', () => {
  it('summarize: strings, text-block arrays, objects, null/undefined, and the bound', () => {
    expect(summarize('plain')).toBe('plain');
    expect(summarize([{ type: 'text', text: 'a' }, { type: 'image' }, 'raw'])).toBe(
      'a\n{"type":"image"}\n"raw"',
    );
    expect(summarize({ a: 1 })).toBe('{"a":1}');
    expect(summarize(42)).toBe('42');
    expect(summarize(null)).toBe('');
    expect(summarize(undefined)).toBe('');
    expect(summarize('abcdef', 4)).toBe('abcd… [2 more chars]');
    expect(summarize('x'.repeat(SUMMARY_LIMIT))).toBe('x'.repeat(SUMMARY_LIMIT));
    expect(summarize('x'.repeat(SUMMARY_LIMIT + 1))).toBe(`${'x'.repeat(SUMMARY_LIMIT)}… [1 more chars]`);
  });

  it('nonNegative keeps finite non-negative numbers and maps everything else to 0', () => {
    expect(nonNegative(5)).toBe(5);
    expect(nonNegative(0)).toBe(0);
    expect(nonNegative(-1)).toBe(0);
    expect(nonNegative(Number.NaN)).toBe(0);
    expect(nonNegative(Number.POSITIVE_INFINITY)).toBe(0);
    expect(nonNegative('7')).toBe(0);
    expect(nonNegative(undefined)).toBe(0);
  });

  it('decodeLine validates against the schema of the line type', async () => {
    const { z } = await import('zod');
    const schemas = { ping: z.looseObject({ type: z.literal('ping'), n: z.number() }) };
    expect(decodeLine('{"type":"ping","n":1,"extra":true}', schemas)).toEqual({
      ok: true,
      type: 'ping',
      value: { type: 'ping', n: 1, extra: true },
    });
    expect(decodeLine('{"type":"pong"}', schemas)).toEqual({ ok: false, event: null });
    expect(decodeLine('', schemas)).toEqual({ ok: false, event: null });
    expect(decodeLine('{"type":"ping","n":"1"}', schemas)).toEqual({
      ok: false,
      event: {
        type: 'diagnostic',
        message: 'bad "ping" event: n: Invalid input: expected number, received string',
      },
    });
  });
});
