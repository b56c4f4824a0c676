import { describe, expect, it } from 'vitest';
import { LineReader } from '../../../src/engines/protocols/line-reader.js';

interface Recorded {
  lines: string[];
  oversized: number[];
  /** Everything in arrival order, to check interleaving of lines and oversize reports. */
  log: string[];
}

function reader(maxLineBytes = 1024 * 1024): { r: LineReader; out: Recorded } {
  const out: Recorded = { lines: [], oversized: [], log: [] };
  const r = new LineReader({
    maxLineBytes,
    onLine: (line) => {
      out.lines.push(line);
      out.log.push(`line:${line}`);
    },
    onOversized: (bytes) => {
      out.oversized.push(bytes);
      out.log.push(`oversized:${bytes}`);
    },
  });
  return { r, out };
}

// Multi-byte characters of 2, 3 and 4 bytes, a CRLF line, an empty line, and a last line with no \n.
const TEXT = '{"a":"é"}\r\n€ uro\n\n😀 ok\r\nplain\nno newline at end';
const BUFFER = Buffer.from(TEXT, 'utf8');
const EXPECTED = ['{"a":"é"}', '€ uro', '', '😀 ok', 'plain', 'no newline at end'];

function feed(chunks: Buffer[], maxLineBytes?: number): Recorded {
  const { r, out } = reader(maxLineBytes);
  for (const chunk of chunks) r.push(chunk);
  r.end();
  return out;
}

describe('LineReader', () => {
  it('delivers the expected lines when the buffer arrives whole', () => {
    expect(feed([BUFFER]).lines).toEqual(EXPECTED);
  });

  it('gives the same lines for a split at every byte position (including inside multi-byte characters)', () => {
    for (let i = 0; i <= BUFFER.length; i++) {
      const out = feed([BUFFER.subarray(0, i), BUFFER.subarray(i)]);
      expect(out.lines, `split at ${i}`).toEqual(EXPECTED);
      expect(out.oversized).toEqual([]);
    }
  });

  it('gives the same lines for every pair of split positions', () => {
    for (let i = 0; i <= BUFFER.length; i++) {
      for (let j = i; j <= BUFFER.length; j++) {
        const out = feed([BUFFER.subarray(0, i), BUFFER.subarray(i, j), BUFFER.subarray(j)]);
        expect(out.lines, `split at ${i},${j}`).toEqual(EXPECTED);
      }
    }
  });

  it('gives the same lines one byte at a time', () => {
    const chunks = [...BUFFER].map((byte) => Buffer.from([byte]));
    expect(feed(chunks).lines).toEqual(EXPECTED);
  });

  it('a chunk boundary is never a line boundary: nothing is delivered before the \\n arrives', () => {
    const { r, out } = reader();
    r.push(Buffer.from('{"type":"res'));
    r.push(Buffer.from('ult"}'));
    expect(out.lines).toEqual([]);
    r.push(Buffer.from('\n'));
    expect(out.lines).toEqual(['{"type":"result"}']);
  });

  it('a 4-byte character split across chunks is decoded whole, never as replacement characters', () => {
    const emoji = Buffer.from('😀', 'utf8');
    expect(emoji).toHaveLength(4);
    const { r, out } = reader();
    r.push(emoji.subarray(0, 1));
    r.push(emoji.subarray(1, 3));
    r.push(Buffer.concat([emoji.subarray(3), Buffer.from('\n')]));
    expect(out.lines).toEqual(['😀']);
    expect(out.lines[0]).not.toContain('\ufffd');
  });

  it('strips exactly one trailing \\r; a \\r elsewhere is data', () => {
    expect(feed([Buffer.from('a\r\r\nb\rc\r\n\r\n')]).lines).toEqual(['a\r', 'b\rc', '']);
  });

  it('a \\r\\n split between chunks is still stripped', () => {
    expect(feed([Buffer.from('x\r'), Buffer.from('\ny')]).lines).toEqual(['x', 'y']);
  });

  it('flushes the last line without \\n on end(), and only then', () => {
    const { r, out } = reader();
    r.push(Buffer.from('first\nlast'));
    expect(out.lines).toEqual(['first']);
    r.end();
    expect(out.lines).toEqual(['first', 'last']);
  });

  it('end() after a final \\n adds no empty line; end() on an empty stream delivers nothing', () => {
    expect(feed([Buffer.from('a\n')]).lines).toEqual(['a']);
    expect(feed([]).lines).toEqual([]);
    expect(feed([Buffer.alloc(0)]).lines).toEqual([]);
  });

  it('empty lines in the middle are delivered as empty strings (the parser ignores them)', () => {
    expect(feed([Buffer.from('\n\na\n')]).lines).toEqual(['', '', 'a']);
  });

  it('copies what it keeps: a caller reusing its chunk buffer does not corrupt a pending line', () => {
    const { r, out } = reader();
    const chunk = Buffer.from('hello');
    r.push(chunk);
    chunk.fill('X'.charCodeAt(0));
    r.push(Buffer.from(' world\n'));
    expect(out.lines).toEqual(['hello world']);
  });
});

describe('LineReader: oversized lines', () => {
  it('reports an oversized line once, with its byte count, and delivers the next line', () => {
    const big = 'x'.repeat(100);
    const out = feed([Buffer.from(`short\n${big}\nafter\n`)], 10);
    expect(out.log).toEqual(['line:short', 'oversized:100', 'line:after']);
  });

  it('counts bytes, not characters, and across many chunks', () => {
    // 30 × "é" = 60 bytes, fed 7 bytes at a time (splitting characters), limit 16.
    const buffer = Buffer.from(`${'é'.repeat(30)}\nnext\n`, 'utf8');
    const chunks: Buffer[] = [];
    for (let i = 0; i < buffer.length; i += 7) chunks.push(buffer.subarray(i, i + 7));
    const out = feed(chunks, 16);
    expect(out.log).toEqual(['oversized:60', 'line:next']);
  });

  it('the part of the line buffered before the limit was crossed is dropped, not glued to the next line', () => {
    const { r, out } = reader(10);
    r.push(Buffer.from('12345678')); // under the limit: buffered
    r.push(Buffer.from('9abcdef')); // crosses it
    r.push(Buffer.from('ghi\nok\n'));
    expect(out.log).toEqual(['oversized:18', 'line:ok']);
  });

  it('a line of exactly maxLineBytes is delivered; one byte more is reported', () => {
    expect(feed([Buffer.from('abcd\nabcde\nz')], 4).log).toEqual(['line:abcd', 'oversized:5', 'line:z']);
  });

  it('the \\r of an oversized CRLF line is counted (it is part of the line as received)', () => {
    expect(feed([Buffer.from('abcdef\r\n')], 4).log).toEqual(['oversized:7']);
  });

  it('an oversized last line without \\n is reported on end()', () => {
    const { r, out } = reader(4);
    r.push(Buffer.from('ok\n0123456789'));
    expect(out.log).toEqual(['line:ok']);
    r.push(Buffer.from('0123456789'));
    r.end();
    expect(out.log).toEqual(['line:ok', 'oversized:20']);
  });

  it('two oversized lines in a row are two reports; the reader recovers fully after each', () => {
    const out = feed([Buffer.from(`${'a'.repeat(50)}\n${'b'.repeat(70)}\nfine\n${'c'.repeat(9)}\n`)], 8);
    expect(out.log).toEqual(['oversized:50', 'oversized:70', 'line:fine', 'oversized:9']);
  });

  it('a 5 MB line with a small limit: reported once, nothing of it reaches onLine', () => {
    const big = Buffer.alloc(5 * 1024 * 1024, 'q');
    const chunks: Buffer[] = [Buffer.from('a\n')];
    for (let i = 0; i < big.length; i += 64 * 1024) chunks.push(big.subarray(i, i + 64 * 1024));
    chunks.push(Buffer.from('\nb\n'));
    const out = feed(chunks, 1024);
    expect(out.oversized).toEqual([big.length]);
    expect(out.lines).toEqual(['a', 'b']);
  });
});

/**
 * The reader against the simplest possible model of its contract, on seeded random streams: whole
 * buffer split on \n, each line decoded then stripped of one trailing \r, lines over the limit
 * reported by byte count. Streams mix ASCII, multi-byte characters, invalid UTF-8, lone \r and long
 * lines; chunkings mix 1-byte chunks, chunks inside lines and chunks spanning many lines.
 */
describe('LineReader: against a reference model on random streams', () => {
  function model(buffer: Buffer, maxLineBytes: number): string[] {
    const log: string[] = [];
    let start = 0;
    while (start < buffer.length) {
      const nl = buffer.indexOf(0x0a, start);
      const end = nl === -1 ? buffer.length : nl;
      const bytes = end - start;
      if (bytes > maxLineBytes) log.push(`oversized:${bytes}`);
      else {
        let line = buffer.toString('utf8', start, end);
        if (line.endsWith('\r')) line = line.slice(0, -1);
        log.push(`line:${line}`);
      }
      if (nl === -1) break;
      start = nl + 1;
    }
    return log;
  }

  let seed = 0x2545f491;
  const random = (n: number): number => {
    seed ^= seed << 13;
    seed ^= seed >>> 17;
    seed ^= seed << 5;
    return (seed >>> 0) % n;
  };
  const PIECES = ['{"type":"x"}', 'a', '\r', '\n', '\r\n', 'é', '€', '😀', ' ', '"', '\\'].map((s) =>
    Buffer.from(s, 'utf8'),
  );
  // Invalid or cut UTF-8: a lone lead byte, a lone continuation byte, a cut 4-byte sequence.
  const BAD = [Buffer.from([0xe2]), Buffer.from([0x80]), Buffer.from([0xf0, 0x9f, 0x98])];

  function stream(): Buffer {
    const parts: Buffer[] = [];
    const n = random(200);
    for (let i = 0; i < n; i++) {
      const kind = random(20);
      if (kind === 0) parts.push(BAD[random(BAD.length)] as Buffer);
      else if (kind === 1) parts.push(Buffer.alloc(random(300), 'z'));
      else parts.push(PIECES[random(PIECES.length)] as Buffer);
    }
    return Buffer.concat(parts);
  }

  function chunked(buffer: Buffer): Buffer[] {
    const chunks: Buffer[] = [];
    let at = 0;
    while (at < buffer.length) {
      const size = random(4) === 0 ? 1 : 1 + random(random(2) === 0 ? 16 : 400);
      chunks.push(buffer.subarray(at, at + size));
      at += size;
    }
    return chunks;
  }

  it('delivers what the model delivers, for 2,000 streams and limits, in any chunking', () => {
    for (let i = 0; i < 2000; i++) {
      const buffer = stream();
      const max = [0, 1, 8, 64, 1024][random(5)] as number;
      const out = feed(chunked(buffer), max);
      expect(out.log, `stream ${i}: ${buffer.toString('hex')} (limit ${max})`).toEqual(model(buffer, max));
    }
  });

  it('a \\r after invalid UTF-8 is stripped as it would be after decoding', () => {
    const bytes = Buffer.from([0x61, 0xe2, 0x0d, 0x0a, 0xf0, 0x9f, 0x0d, 0x0a]);
    expect(feed([bytes]).lines).toEqual(['a\ufffd', '\ufffd']);
    expect(feed([bytes]).lines).toEqual(model(bytes, 1024).map((l) => l.slice('line:'.length)));
  });
});
