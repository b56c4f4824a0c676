import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { recordOf, type ScannedRecord, scanFile } from '../../src/ledger/scan-file.js';
import { referenceRecordOf } from '../helpers/scan-record-reference.js';

/**
 * The fast reading of a candidate line (usage object parsed from its bytes, canonical timestamps
 * taken as they are) against the reference — JSON.parse of the object, Date for the time — on real
 * transcript lines and on thousands of mutations of them: the same record or the same reason, and
 * the same corrections to the records seen before (copies), every time.
 */

let seed = 0x1234_abcd;
const rand = () => {
  seed ^= seed << 13;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  return (seed >>> 0) / 0x1_0000_0000;
};
const pick = <T>(list: readonly T[]): T => list[Math.floor(rand() * list.length)] as T;

const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'transcripts', 'claude');

/** Assistant lines with usage from the recorded transcripts, and lines as Claude Code writes them. */
function baseLines(): string[] {
  const real = readdirSync(FIXTURES)
    .filter((f) => f.endsWith('.jsonl'))
    .flatMap((f) => readFileSync(join(FIXTURES, f), 'utf8').split('\n'))
    .filter((l) => l.includes('"usage":{') && l.includes('"type":"assistant"'));
  const made = Array.from({ length: 20 }, (_, i) =>
    JSON.stringify({
      parentUuid: null,
      isSidechain: false,
      cwd: '/home/dev/p',
      sessionId: `sess-${i % 3}`,
      message: {
        id: `msg_${i % 7}`,
        type: 'message',
        role: 'assistant',
        model: pick(['claude-sonnet-4-5-20250929', 'claude-opus-4-1-20250805', '<synthetic>']),
        content: [{ type: 'text', text: 'a "usage":{"input_tokens":9} look-alike' }],
        stop_reason: 'end_turn',
        usage: {
          input_tokens: i * 13,
          cache_creation_input_tokens: i * 7,
          cache_read_input_tokens: i * 1000,
          output_tokens: i % 5,
          service_tier: 'standard',
          cache_creation: { ephemeral_5m_input_tokens: i, ephemeral_1h_input_tokens: i % 4 },
          server_tool_use: { web_search_requests: 0, web_fetch_requests: null },
          flags: [true, false, null, [], {}, 'x'],
        },
      },
      requestId: `req_${i % 9}`,
      type: 'assistant',
      uuid: `u-${i}`,
      timestamp: new Date(Date.UTC(2026, i % 12, 1 + ((i * 3) % 31), i % 24, 7, 9, i)).toISOString(),
    }),
  );
  expect(real.length).toBeGreaterThan(3);
  return [...real, ...made];
}

/** Values a count (or the 1-hour split) may be written with, odd ones included. */
const VALUES = [
  '0',
  '7',
  '123456789012345',
  '1234567890123456',
  '99999999999999999999',
  '007',
  '1.0',
  '1.5',
  '-5',
  '-0',
  '1e3',
  '2E2',
  'null',
  'true',
  'false',
  '"5"',
  '""',
  '{}',
  '[]',
  '[1,2]',
  '{"ephemeral_1h_input_tokens":3}',
  '{"ephemeral_1h_input_tokens":999999,"ephemeral_5m_input_tokens":1}',
  '{"ephemeral_1h_input_tokens":"3"}',
  '{"a":{"b":{"c":[1,{"d":null}]}}}',
  ' 5',
  '5 ',
  '"a\\"b"',
  '"\u0001"',
  '"é✓"',
];
const KEYS = [
  'input_tokens',
  'output_tokens',
  'cache_read_input_tokens',
  'cache_creation_input_tokens',
  'cache_creation',
  'ephemeral_1h_input_tokens',
  'other',
];
const TIMES = [
  '2026-11-20T10:00:00.000Z',
  '2026-11-20T10:00:00Z',
  '2026-02-28T23:59:59.999Z',
  '2026-02-29T00:00:00.000Z',
  '2026-02-30T00:00:00.000Z',
  '2026-04-31T00:00:00.000Z',
  '2026-13-01T00:00:00.000Z',
  '2026-00-10T00:00:00.000Z',
  '2026-11-00T00:00:00.000Z',
  '2026-11-20T24:00:00.000Z',
  '2026-11-20T23:60:00.000Z',
  '2026-11-20T23:59:60.000Z',
  '0000-01-01T00:00:00.000Z',
  '2026-11-20T10:00:00.000+01:00',
  '2026-11-20 10:00:00',
  'yesterday',
  '',
  '2026-11-20T10:00:00.000Zx',
  '2026-11-20T10:00:00.0000Z',
];

/** Where the object opened at `open` closes (by depth, strings skipped), or -1. */
function closingBrace(line: string, open: number): number {
  let depth = 0;
  let inString = false;
  for (let i = open; i < line.length; i++) {
    const c = line[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{') depth++;
    else if (c === '}' && --depth === 0) return i;
  }
  return -1;
}

/** One random change to a line, aimed at the parts the reading decodes. */
function mutate(line: string): string {
  const u = line.lastIndexOf('"usage":{');
  switch (Math.floor(rand() * 9)) {
    case 0: {
      // A count written otherwise.
      const key = pick(KEYS);
      const at = line.indexOf(`"${key}":`, u);
      if (at < 0) return line.replace('"usage":{', `"usage":{"${key}":${pick(VALUES)},`);
      const from = at + key.length + 3;
      let to = from;
      while (to < line.length && !',}'.includes(line[to] as string)) to++;
      return line.slice(0, from) + pick(VALUES) + line.slice(to);
    }
    case 1: {
      // A key again, before the others or after them (the last one counts).
      if (rand() < 0.3) return line.replace('"usage":{', `"usage":{"${pick(KEYS)}":${pick(VALUES)},`);
      const close = closingBrace(line, u + 8);
      if (close < 0) return line;
      return `${line.slice(0, close)},"${pick(KEYS)}":${pick(VALUES)}${line.slice(close)}`;
    }
    case 2:
      return line.replace(/"timestamp":"[^"]*"/, `"timestamp":"${pick(TIMES)}"`);
    case 3: {
      // A byte inserted, removed or changed in the usage object.
      const at = u + 9 + Math.floor(rand() * 120);
      const op = Math.floor(rand() * 3);
      const c = pick([' ', ',', '}', '{', '"', '\\', ':', '0', 'e', '-', '.', ']', '[', '\n']);
      if (op === 0) return line.slice(0, at) + c + line.slice(at);
      if (op === 1) return line.slice(0, at) + line.slice(at + 1);
      return line.slice(0, at) + c + line.slice(at + 1);
    }
    case 4:
      // Ids: escaped, long, empty, gone.
      return line.replace(
        /"id":"[^"]*"/,
        pick(['"id":"a\\"b"', `"id":"${'x'.repeat(600)}"`, '"id":""', '"idx":"1"', '"id":"msg_0"']),
      );
    case 5:
      return line.replace(
        /"requestId":"[^"]*"/,
        pick(['"requestId":"req_0"', '"requestId":"r\\n"', '"rid":"1"']),
      );
    case 6:
      // The object cut short, or far too long.
      return rand() < 0.5
        ? line.slice(0, u + 9 + Math.floor(rand() * 80))
        : line.replace('"usage":{', `"usage":{"pad":"${'p'.repeat(17_000)}",`);
    case 7:
      return line.replace(
        /"sessionId":"[^"]*"/,
        pick(['"sessionId":"sess-0"', '"sessionId":"s\\u0031"', '']),
      );
    default:
      return line.replace(/"model":"[^"]*"/, pick(['"model":"m"', '"model":"a\\"b"', '"model":""', '']));
  }
}

/** Each line read with its own seen map by both readings: results and the maps' records agree. */
function compare(lines: readonly string[], metered?: ReadonlySet<string>): void {
  const fast = new Map<string, ScannedRecord>();
  const reference = new Map<string, ScannedRecord>();
  for (const line of lines) {
    const bytes = Buffer.from(line);
    const a = recordOf(bytes, fast, metered);
    const b = referenceRecordOf(bytes, reference, metered);
    expect({ line, result: a }).toEqual({ line, result: b });
    if (Array.isArray(a)) fast.set(a[0], a);
    if (Array.isArray(b)) reference.set(b[0], b);
  }
  expect([...fast]).toEqual([...reference]);
}

describe('the fast reading of a line agrees with the reference', () => {
  it('on real and generated lines, alone and as copies of each other', () => {
    const lines = baseLines();
    compare(lines);
    compare([...lines, ...lines], new Set(['sess-1']));
  });

  it('on 6,000 mutated lines, mutations stacked, with copies among them', () => {
    const lines = baseLines();
    for (let round = 0; round < 300; round++) {
      const batch = Array.from({ length: 20 }, () => {
        let line = pick(lines);
        for (let k = 1 + Math.floor(rand() * 3); k > 0; k--) line = mutate(line);
        return line;
      });
      compare(batch, round % 2 === 0 ? new Set(['sess-0']) : undefined);
    }
  });
});

describe('scanFile reads the same records as the reference, line by line', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'the-loop-scan-record-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('in a file of mutated lines among other records', () => {
    const lines = baseLines();
    const all: string[] = [];
    for (let i = 0; i < 3000; i++) {
      let line = pick(lines);
      if (rand() < 0.7) line = mutate(line);
      all.push(line.includes('\n') ? line.replaceAll('\n', '') : line);
      if (rand() < 0.3)
        all.push(JSON.stringify({ type: 'user', message: { role: 'user', content: 'x'.repeat(50) } }));
    }
    const path = join(dir, 'a.jsonl');
    writeFileSync(path, `${all.join('\n')}\n`);
    const seen = new Map<string, ScannedRecord>();
    const scan = scanFile(path, { offset: 0 }, seen);
    // The reference, on the lines the scan looks at: an assistant record with usage before its type.
    const expected: ScannedRecord[] = [];
    const reference = new Map<string, ScannedRecord>();
    let skipped = 0;
    let duplicates = 0;
    for (const line of all) {
      const a = line.indexOf(',"type":"assistant"');
      if (a < 0 || line.lastIndexOf('"usage":{', a) < 0) continue;
      const r = referenceRecordOf(Buffer.from(line), reference);
      if (r === null) duplicates += 1;
      else if (typeof r === 'string') skipped += 1;
      else {
        reference.set(r[0], r);
        expected.push(r);
      }
    }
    expect(scan.records).toEqual(expected);
    expect({ skipped: scan.skipped, duplicates: scan.duplicates }).toEqual({ skipped, duplicates });
  });
});
