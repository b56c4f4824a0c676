import { describe, expect, it } from 'vitest';
import { type SseEvent, SseParser } from '../../../src/gateway/models/sse.js';
import { prng } from '../../helpers/check.js';

function parse(chunks: Array<Buffer | string>, maxEventBytes?: number, accept?: (name: string) => boolean) {
  const events: SseEvent[] = [];
  const oversized: number[] = [];
  const parser = new SseParser({
    onEvent: (e) => events.push(e),
    onOversized: (n) => oversized.push(n),
    ...(maxEventBytes === undefined ? {} : { maxEventBytes }),
    ...(accept === undefined ? {} : { accept }),
  });
  for (const c of chunks) parser.push(c);
  parser.end();
  return { events, oversized };
}

/** Every way of cutting `bytes` in two, and in three around each point. */
function* splits(bytes: Buffer): Generator<Buffer[]> {
  for (let i = 0; i <= bytes.length; i++) {
    yield [bytes.subarray(0, i), bytes.subarray(i)];
    const j = Math.min(bytes.length, i + 3);
    yield [bytes.subarray(0, i), bytes.subarray(i, j), bytes.subarray(j)];
  }
}

// Mixed line ends, a comment, multi-line data, an id, a multi-byte character split across bytes.
const STREAM = Buffer.from(
  ': keep-alive\r\n' +
    'event: message_start\r\n' +
    'data: {"a":1}\r\n' +
    '\r\n' +
    'event: delta\n' +
    'data: line one\n' +
    'data:line two — ünïcødé 🚀\n' +
    'id: 7\n' +
    '\n' +
    'data: cr only\r' +
    'retry: 1000\r' +
    '\r' +
    'data\n' +
    '\n',
  'utf8',
);
const EXPECTED: SseEvent[] = [
  { event: 'message_start', data: '{"a":1}' },
  { event: 'delta', data: 'line one\nline two — ünïcødé 🚀', id: '7' },
  { event: '', data: 'cr only' },
  { event: '', data: '' },
];

describe('SseParser', () => {
  it('reads fields, comments, multi-line data and every kind of line end', () => {
    expect(parse([STREAM]).events).toEqual(EXPECTED);
  });

  it('gives the same events however the bytes are split (every byte boundary, UTF-8 and CRLF included)', () => {
    let runs = 0;
    for (const chunks of splits(STREAM)) {
      expect(parse(chunks).events).toEqual(EXPECTED);
      runs += 1;
    }
    expect(runs).toBe(2 * (STREAM.length + 1));
  });

  it('gives the same events for random chunkings, one byte at a time included', () => {
    const rand = prng(42);
    for (let round = 0; round < 200; round++) {
      const chunks: Buffer[] = [];
      for (let i = 0; i < STREAM.length; ) {
        const n = 1 + Math.floor(rand() * 12);
        chunks.push(STREAM.subarray(i, i + n));
        i += n;
      }
      expect(parse(chunks).events).toEqual(EXPECTED);
    }
  });

  it('keeps a `\\r` at the end of a chunk and a `\\n` at the start of the next as one line end', () => {
    const { events } = parse(['data: a\r', '\ndata: b\r', '\n\r', '\n']);
    expect(events).toEqual([{ event: '', data: 'a\nb' }]);
  });

  it('drops an event cut before its blank line, and events without data', () => {
    expect(parse(['event: ping\n\n', 'data: whole\n\n', 'data: cut sho']).events).toEqual([
      { event: '', data: 'whole' },
    ]);
    expect(parse(['data: no blank line\n']).events).toEqual([]);
  });

  it('strips a byte order mark at the start only, and one space after the colon', () => {
    const { events } = parse([Buffer.from([0xef, 0xbb]), Buffer.from([0xbf]), 'data:  two spaces\n\n']);
    expect(events).toEqual([{ event: '', data: ' two spaces' }]);
  });

  it('skips a line or an event over the limit, says so once, and goes on with the next event', () => {
    const long = 'x'.repeat(100);
    const { events, oversized } = parse(
      [`data: ${long.slice(0, 40)}`, `${long.slice(40)}\nevent: still-skipped\n\n`, 'data: next\n\n'],
      64,
    );
    expect(events).toEqual([{ event: '', data: 'next' }]);
    expect(oversized).toHaveLength(1);
    // Many short data lines adding up past the limit.
    const many = parse([`${'data: 0123456789\n'.repeat(10)}\ndata: after\n\n`], 64);
    expect(many.events).toEqual([{ event: '', data: 'after' }]);
    expect(many.oversized).toHaveLength(1);
  });

  it('skips the events whose name `accept` refuses, wherever their data lines are', () => {
    const accept = (name: string) => name !== 'delta';
    const stream =
      'event: delta\ndata: skipped\n\ndata: before the name\nevent: delta\n\nevent: start\ndata: kept\n\n';
    for (const chunks of splits(Buffer.from(stream))) {
      expect(parse(chunks, undefined, accept).events).toEqual([{ event: 'start', data: 'kept' }]);
    }
  });

  it('keeps going through garbage: binary noise, lone colons, unknown fields', () => {
    const noise = Buffer.from([0xff, 0xfe, 0x00, 0x80, 0x0a, 0x3a, 0x0a, 0x0a]);
    const { events } = parse([noise, 'foo: bar\n', ':\n', 'data: ok\n\n']);
    expect(events).toEqual([{ event: '', data: 'ok' }]);
  });
});
