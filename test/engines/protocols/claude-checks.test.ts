/**
 * The claude-stream-json parser checks the common events by hand (quick checks) and falls back to
 * the zod schemas. These tests hold the checks to the schemas: on every recorded line and on
 * thousands of hostile variants of them, a check accepts exactly what its schema accepts, and the
 * parser gives exactly the events (and diagnostics) of the schema-only parser.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { isDeepStrictEqual } from 'node:util';
import { describe, expect, it } from 'vitest';
import type { TurnEvent } from '../../../src/core/events.js';
import {
  claudeEventSchemas,
  claudeQuickCheck,
  claudeStreamJsonParser,
} from '../../../src/engines/protocols/claude-stream-json.js';

const DIR = fileURLToPath(new URL('../../fixtures/streams/claude/', import.meta.url));
const RECORDED: string[] = readdirSync(DIR)
  .filter((f) => f.endsWith('.jsonl'))
  .flatMap((f) => readFileSync(`${DIR}${f}`, 'utf8').split('\n'))
  .filter((line) => line.trim() !== '');
const TYPES = Object.keys(claudeEventSchemas) as (keyof typeof claudeEventSchemas)[];

/** Stands for a number JSON.stringify cannot write: replaced by 1e999 (JSON.parse reads Infinity). */
const HUGE = '__huge_number__';
const HOSTILE: unknown[] = [
  null,
  true,
  false,
  0,
  -1,
  1.5,
  HUGE,
  '',
  'text',
  '<synthetic>',
  [],
  [null],
  ['text'],
  [{}],
  [{ type: 'text', text: 1 }],
  [{ type: 'tool_use', id: 'u', name: 'n', input: { a: 1 } }],
  [{ type: 'tool_result', tool_use_id: 't', is_error: null, content: [{ type: 'text', text: 'x' }] }],
  {},
  { type: 'text' },
  { input_tokens: -5, output_tokens: HUGE },
  JSON.parse('{"__proto__":{"x":1},"claude-x":{}}'),
];
/** Fields the schemas read, so variants also add them where a recording lacks them. */
const FIELDS = [
  'subtype',
  'session_id',
  'model',
  'message',
  'is_error',
  'result',
  'total_cost_usd',
  'usage',
  'modelUsage',
  'errors',
  'permission_denials',
  'api_error_status',
];
const MESSAGE_FIELDS = ['id', 'model', 'content'];
const BLOCK_FIELDS = ['type', 'text', 'id', 'name', 'input', 'tool_use_id', 'content', 'is_error'];
const USAGE_FIELDS = [
  'input_tokens',
  'output_tokens',
  'cache_read_input_tokens',
  'cache_creation_input_tokens',
];

type Path = (string | number)[];

/** Every path to a value in `value` (to depth 4), plus the schema fields absent at known places. */
function paths(value: unknown, at: Path = [], depth = 0): Path[] {
  const out: Path[] = [];
  if (depth > 4 || !value || typeof value !== 'object') return out;
  const keys: (string | number)[] = Array.isArray(value)
    ? value.map((_, i) => i)
    : Object.keys(value as object);
  const extra =
    depth === 0
      ? FIELDS
      : at.at(-1) === 'message'
        ? MESSAGE_FIELDS
        : at.at(-1) === 'usage'
          ? USAGE_FIELDS
          : at.at(-2) === 'content'
            ? BLOCK_FIELDS
            : [];
  for (const key of new Set([...keys, ...extra])) {
    out.push([...at, key]);
    out.push(...paths((value as Record<string | number, unknown>)[key], [...at, key], depth + 1));
  }
  return out;
}

/** `base` with the value at `path` replaced (`undefined` removes the key), as one JSON line. */
function variant(base: unknown, path: Path, value: unknown): string {
  const copy = structuredClone(base) as Record<string | number, unknown>;
  let node = copy;
  for (const key of path.slice(0, -1)) node = node[key] as Record<string | number, unknown>;
  const last = path.at(-1) as string | number;
  if (value === undefined) delete node[last];
  else node[last] = value;
  return JSON.stringify(copy).replaceAll(`"${HUGE}"`, '1e999');
}

function hostileLines(): string[] {
  const lines = new Set<string>();
  for (const line of RECORDED) {
    const base = JSON.parse(line) as Record<string, unknown>;
    for (const type of TYPES) lines.add(JSON.stringify({ ...base, type }));
    for (const path of paths(base)) {
      if (path.length === 1 && path[0] === 'type') continue;
      for (const value of [undefined, ...HOSTILE]) lines.add(variant(base, path, value));
    }
  }
  return [...lines];
}

const parseAll = (quick: boolean, lines: readonly string[]): TurnEvent[][] => {
  const parser = claudeStreamJsonParser(quick);
  return lines.map((line) => parser.push(line));
};

describe('claude-stream-json quick checks', () => {
  const hostile = hostileLines();

  it('are tried on thousands of variants of the recordings, accepted and refused alike', () => {
    expect(RECORDED.length).toBeGreaterThanOrEqual(28);
    expect(hostile.length).toBeGreaterThan(5000);
    const verdicts = hostile.map((line) => {
      const value = JSON.parse(line) as Record<string, unknown>;
      const type = value.type as keyof typeof claudeEventSchemas;
      return claudeEventSchemas[type].safeParse(value).success;
    });
    expect(verdicts.filter((ok) => ok).length).toBeGreaterThan(1000);
    expect(verdicts.filter((ok) => !ok).length).toBeGreaterThan(1000);
  });

  it('accept exactly what the schemas accept, on every recorded line and every variant', () => {
    const mismatches: string[] = [];
    for (const line of [...RECORDED, ...hostile]) {
      const value = JSON.parse(line) as Record<string, unknown>;
      const type = value.type as keyof typeof claudeEventSchemas;
      const schema = claudeEventSchemas[type].safeParse(value).success;
      const check = claudeQuickCheck(type, value);
      if (schema !== check) mismatches.push(`schema ${schema}, check ${check}: ${line.slice(0, 300)}`);
    }
    expect(mismatches).toEqual([]);
  });

  it('accept no unknown type, Object.prototype names included (the schemas decide those)', () => {
    for (const type of ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'stream_event', '']) {
      expect(claudeQuickCheck(type, { type, message: {} }), type).toBe(false);
    }
  });

  it('give the events of the schema-only parser on every recorded line', () => {
    expect(parseAll(true, RECORDED)).toStrictEqual(parseAll(false, RECORDED));
  });

  it('give the events and diagnostics of the schema-only parser on every variant', () => {
    const quick = parseAll(true, hostile);
    const reference = parseAll(false, hostile);
    const first = hostile.findIndex((_, i) => !isDeepStrictEqual(quick[i], reference[i]));
    if (first !== -1) expect(quick[first], hostile[first]).toStrictEqual(reference[first]);
    // The variants reach every kind of outcome, bad events included.
    const kinds = new Set(quick.flat().map((e) => e.type));
    for (const kind of ['session', 'text', 'error', 'tool-use', 'tool-result', 'usage', 'turn-end']) {
      expect(kinds, kind).toContain(kind);
    }
    expect(kinds).toContain('diagnostic');
  });

  it('a refused value still gets the schema error, worded by zod', () => {
    const parser = claudeStreamJsonParser();
    expect(parser.push('{"type":"result","total_cost_usd":1e999}')).toEqual([
      { type: 'diagnostic', message: expect.stringMatching(/^bad "result" event: total_cost_usd: /) },
    ]);
    expect(parser.push('{"type":"assistant","message":{"content":[{"type":"text","text":7}]}}')).toEqual([
      {
        type: 'diagnostic',
        message: expect.stringMatching(/^bad "assistant" event: message\.content\.0\.text: /),
      },
    ]);
    expect(parser.push('{"type":"user"}')).toEqual([
      { type: 'diagnostic', message: expect.stringMatching(/^bad "user" event: message: /) },
    ]);
  });

  it('a "__proto__" key in modelUsage is not a model name (as the schema reads it)', () => {
    const line = '{"type":"result","usage":{},"modelUsage":{"__proto__":{},"claude-x":{}}}';
    const [usage] = claudeStreamJsonParser().push(line);
    expect(usage).toMatchObject({ type: 'usage', model: 'claude-x' });
    expect(claudeStreamJsonParser(false).push(line)).toStrictEqual(claudeStreamJsonParser().push(line));
  });
});
