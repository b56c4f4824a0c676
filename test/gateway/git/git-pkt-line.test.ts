/**
 * The pkt-line codec and the incremental reader of a receive-pack request's head: framing, strict
 * validation (lengths, oids, ref names, capabilities), bounds, and refusals that say why.
 */
import { describe, expect, it } from 'vitest';
import {
  encodePkt,
  encodeSideband,
  FLUSH_PKT,
  type HeadStep,
  PKT_MAX,
  parseCommand,
  ReceivePackHeadReader,
  readPkt,
  refNameProblem,
} from '../../../src/gateway/git/pkt-line.js';

const Z = '0'.repeat(40);
const A = 'a'.repeat(40);
const B = 'b'.repeat(40);
const CAPS = 'report-status side-band-64k quiet object-format=sha1 agent=git/2.39.5';
const pkt = (s: string | Buffer) => encodePkt(s);
const head = (...lines: (string | Buffer)[]) => Buffer.concat([...lines.map(pkt), FLUSH_PKT]);
const PACK = Buffer.from('PACK\0\0\0\x02\0\0\0\0', 'latin1');

/** Feed `body` in pieces of `size` bytes; the first step that is not "more" (or the end's). */
function feed(body: Buffer, size: number, reader = new ReceivePackHeadReader()): HeadStep {
  for (let at = 0; at < body.length; at += size) {
    const step = reader.push(body.subarray(at, at + size));
    if (step.state !== 'more') return step;
  }
  return reader.end();
}

const refusal = (step: HeadStep) => (step.state === 'refused' ? `${step.why}: ${step.message}` : step.state);

describe('pkt-line framing', () => {
  it('reads data, flush, delim and response-end packets, and asks for more when a packet is partial', () => {
    const buf = Buffer.concat([pkt('hello\n'), Buffer.from('000000010002', 'latin1')]);
    expect(readPkt(buf, 0)).toEqual({ pkt: { kind: 'data', payload: Buffer.from('hello\n') }, next: 10 });
    expect(readPkt(buf, 10)).toEqual({ pkt: { kind: 'flush' }, next: 14 });
    expect(readPkt(buf, 14)).toEqual({ pkt: { kind: 'delim' }, next: 18 });
    expect(readPkt(buf, 18)).toEqual({ pkt: { kind: 'end' }, next: 22 });
    expect(readPkt(buf, 22)).toEqual({ need: true });
    expect(readPkt(buf.subarray(0, 7), 0)).toEqual({ need: true });
    expect(readPkt(Buffer.from('00'), 0)).toEqual({ need: true });
  });

  it('refuses lengths that are not hex, below 4 or over 65520', () => {
    for (const bad of ['zzzz', '00-1', '0003', `${(PKT_MAX + 1).toString(16)}`, 'ffff']) {
      const read = readPkt(Buffer.from(`${bad}${'x'.repeat(8)}`, 'latin1'), 0);
      expect(read, bad).toHaveProperty('error');
    }
    expect(readPkt(Buffer.from('000Axxxxxx'), 0)).toHaveProperty('pkt'); // upper-case hex is valid
  });

  it('encodes payloads with their 4-byte length, and refuses one too long for a packet', () => {
    expect(pkt('unpack ok\n').toString()).toBe('000eunpack ok\n');
    expect(pkt('').toString()).toBe('0004');
    expect(() => pkt(Buffer.alloc(PKT_MAX - 3))).toThrow(RangeError);
    expect(pkt(Buffer.alloc(PKT_MAX - 4)).length).toBe(PKT_MAX);
  });

  it('frames side-band data in packets no larger than the flavour allows', () => {
    const data = Buffer.alloc(2500, 'x');
    const framed = encodeSideband(1, data, 1000);
    const payloads: Buffer[] = [];
    for (let at = 0; at < framed.length; ) {
      const read = readPkt(framed, at);
      if (!('pkt' in read) || read.pkt.kind !== 'data') throw new Error('bad framing');
      expect(read.next - at).toBeLessThanOrEqual(1000);
      expect(read.pkt.payload[0]).toBe(1);
      payloads.push(read.pkt.payload.subarray(1));
      at = read.next;
    }
    expect(payloads).toHaveLength(3);
    expect(Buffer.concat(payloads).equals(data)).toBe(true);
    expect(encodeSideband(2, Buffer.from('progress')).toString('latin1')).toBe('000d\x02progress');
  });
});

describe('ref names and commands', () => {
  it("refuses what git's check-ref-format refuses, and names that are not under refs/", () => {
    const bad = [
      'HEAD',
      'main',
      'refs/heads',
      'refs/heads/',
      'refs/heads//a',
      'refs/heads/a..b',
      'refs/heads/a b',
      'refs/heads/a\tb',
      'refs/heads/a\x7fb',
      'refs/heads/.hidden',
      'refs/heads/a/.b',
      'refs/heads/x.lock',
      'refs/heads/a.',
      'refs/heads/a@{1}',
      'refs/heads/a^',
      'refs/heads/a~1',
      'refs/heads/a:b',
      'refs/heads/a?',
      'refs/heads/a*',
      'refs/heads/a[',
      'refs/heads/a\\b',
      `refs/heads/${'x'.repeat(1100)}`,
    ];
    for (const ref of bad) expect(refNameProblem(ref), ref).toBeDefined();
    for (const ref of [
      'refs/heads/main',
      'refs/heads/feat/x-1.2',
      'refs/tags/v1.0',
      'refs/notes/commits',
      'refs/heads/fé',
    ]) {
      expect(refNameProblem(ref), ref).toBeUndefined();
    }
  });

  it('parses sha1 and sha256 commands, tolerating the trailing LF receive-pack chomps', () => {
    expect(parseCommand(`${Z} ${A} refs/heads/x\n`)).toEqual({ oldOid: Z, newOid: A, ref: 'refs/heads/x' });
    const s256 = 'c'.repeat(64);
    expect(parseCommand(`${s256} ${'0'.repeat(64)} refs/tags/v1`)).toEqual({
      oldOid: s256,
      newOid: '0'.repeat(64),
      ref: 'refs/tags/v1',
    });
    for (const bad of [
      `${A} ${B}`,
      `${A.toUpperCase()} ${B} refs/heads/x`,
      `${A.slice(1)} ${B} refs/heads/x`,
      `${A} ${'c'.repeat(64)} refs/heads/x`,
      `${A}  ${B} refs/heads/x`,
      `${A} ${B} refs/heads/x y`,
      `${A} ${B} refs/heads/x\n\n`,
    ]) {
      expect(typeof parseCommand(bad), JSON.stringify(bad)).toBe('string');
    }
  });
});

describe('the head of a receive-pack request', () => {
  const body = Buffer.concat([
    head(
      `shallow ${B}`,
      `${Z} ${A} refs/heads/feature\0${CAPS}\n`,
      `${A} ${Z} refs/heads/old\n`,
      `${B} ${A} refs/tags/v1`,
    ),
    PACK,
  ]);

  it('reads shallow lines, commands and capabilities, and where the pack begins, whatever the chunking', () => {
    const whole = feed(body, body.length);
    expect(whole.state).toBe('done');
    if (whole.state !== 'done') return;
    expect(whole.head.shallow).toEqual([B]);
    expect(whole.head.capabilities).toEqual(CAPS.split(' '));
    expect(whole.head.commands).toEqual([
      { oldOid: Z, newOid: A, ref: 'refs/heads/feature' },
      { oldOid: A, newOid: Z, ref: 'refs/heads/old' },
      { oldOid: B, newOid: A, ref: 'refs/tags/v1' },
    ]);
    expect(body.subarray(whole.head.length).equals(PACK)).toBe(true);
    for (const size of [1, 3, 7, 64]) expect(feed(body, size)).toEqual(whole);
  });

  it('accepts an empty command list (the flush-only probe git sends before a large push)', () => {
    const step = feed(FLUSH_PKT, 4);
    expect(step).toEqual({ state: 'done', head: { commands: [], capabilities: [], shallow: [], length: 4 } });
  });

  it('stays done once done, and refused once refused', () => {
    const reader = new ReceivePackHeadReader();
    const done = reader.push(body);
    expect(reader.push(Buffer.from('zzzz'))).toBe(done);
    expect(reader.end()).toBe(done);
    const bad = new ReceivePackHeadReader();
    const refused = bad.push(Buffer.from('zzzz'));
    expect(bad.push(body)).toBe(refused);
  });

  it('refuses malformed heads with a message that says what is wrong', () => {
    const cases: [string, Buffer][] = [
      ['bad pkt-line length', Buffer.from('zzzz')],
      ['below the 4-byte minimum', Buffer.from('0003')],
      ['empty pkt-line', Buffer.concat([Buffer.from('0004'), FLUSH_PKT])],
      ['unexpected delim', Buffer.from('0001')],
      ['no capability list', head(`${Z} ${A} refs/heads/x`)],
      [
        'capabilities after the first command',
        head(`${Z} ${A} refs/heads/x\0${CAPS}`, `${Z} ${A} refs/heads/y\0${CAPS}`),
      ],
      ['bad ref name', head(`${Z} ${A} refs/heads/a..b\0${CAPS}`)],
      ['lower-case hex', head(`${Z} ${A.toUpperCase()} refs/heads/x\0${CAPS}`)],
      [
        'two lengths',
        head(`${Z} ${A} refs/heads/x\0${CAPS}`, `${'0'.repeat(64)} ${'c'.repeat(64)} refs/heads/y`),
      ],
      ['updated twice', head(`${Z} ${A} refs/heads/x\0${CAPS}`, `${Z} ${B} refs/heads/x`)],
      ['bad object id on a shallow line', head('shallow xyz', `${Z} ${A} refs/heads/x\0${CAPS}`)],
      ['not valid UTF-8', head(Buffer.from([0x30, 0xff, 0xfe]))],
      ['control character in the capability list', head(`${Z} ${A} refs/heads/x\0report-status\x01`)],
      ['truncated request', pkt(`${Z} ${A} refs/heads/x\0${CAPS}`)],
      ['truncated request', pkt(`${Z} ${A} refs/heads/x\0${CAPS}`).subarray(0, 30)],
    ];
    for (const [needle, bytes] of cases) {
      const step = feed(bytes, 5);
      expect(step.state, needle).toBe('refused');
      if (step.state === 'refused') {
        expect(step.why, needle).toBe('malformed');
        expect(step.message, needle).toContain(needle);
      }
    }
  });

  it('refuses a signed push (push-cert) as unsupported, with the capabilities it asked for', () => {
    const cert = head(`push-cert\0${CAPS}\n`, 'certificate version 0.1\n', 'push-cert-end\n');
    const step = feed(cert, 16);
    expect(refusal(step)).toMatch(/^unsupported: signed pushes \(push-cert\) are not supported/);
    if (step.state === 'refused') expect(step.capabilities).toContain('side-band-64k');
  });

  it('refuses past its bounds on commands and on bytes, keeping little in memory', () => {
    const many = head(
      `${Z} ${A} refs/heads/b0\0${CAPS}`,
      ...Array.from({ length: 5 }, (_, i) => `${Z} ${A} refs/heads/b${i + 1}`),
    );
    expect(refusal(feed(many, 50, new ReceivePackHeadReader({ commands: 5, bytes: 1 << 20 })))).toMatch(
      /^limit: more than 5 ref updates in one push/,
    );
    expect(feed(many, 50, new ReceivePackHeadReader({ commands: 6, bytes: 1 << 20 })).state).toBe('done');
    expect(refusal(feed(many, 50, new ReceivePackHeadReader({ commands: 100, bytes: 300 })))).toMatch(
      /^limit: the command list of this push is over 300 bytes/,
    );
    // A huge first packet is refused as soon as its length says so, before its bytes arrive.
    const reader = new ReceivePackHeadReader({ commands: 100, bytes: 1000 });
    expect(reader.push(Buffer.from('fff0')).state).toBe('more');
    expect(refusal(reader.push(Buffer.alloc(1000, 'a')))).toMatch(/^limit:/);
  });

  it('reads 10,000 commands with the default bounds, and refuses the 10,001st', () => {
    const lines = (n: number) => [
      `${Z} ${A} refs/heads/branch-0\0${CAPS}`,
      ...Array.from({ length: n - 1 }, (_, i) => `${Z} ${A} refs/heads/branch-${i + 1}`),
    ];
    const ok = feed(head(...lines(10_000)), 65536);
    expect(ok.state === 'done' && ok.head.commands.length).toBe(10_000);
    expect(refusal(feed(head(...lines(10_001)), 65536))).toMatch(/^limit: more than 10000 ref updates/);
  });
});
