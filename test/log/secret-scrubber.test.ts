import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { TOKEN_PATTERN } from '../../src/core/capability-token.js';
import { base64Inner, looksLikeKey, RUN, reversed, secretForms } from '../../src/log/secret-forms.js';
import { mergeRanges, type Range, SecretIndex } from '../../src/log/secret-index.js';
import { SecretScrubber } from '../../src/log/secret-scrubber.js';

const KEY = 'sk-ant-api03-Zq8xK2mN7vB4cL9wR1tY6uP0'; // 38 characters
const scrubberOf = (...keys: string[]) => {
  const s = new SecretScrubber();
  for (const k of keys) s.add(k);
  return s;
};
/** Every run of RUN characters of `form` that is still in `text`. */
const leftRuns = (text: string, form: string): string[] => {
  const out: string[] = [];
  for (let i = 0; i + RUN <= form.length; i++) {
    const run = form.slice(i, i + RUN);
    if (text.includes(run)) out.push(run);
  }
  return out;
};

describe('SecretScrubber: whole and partial', () => {
  const s = scrubberOf(KEY);

  it('masks the whole key, and leaves text without it as it was', () => {
    expect(s.scrub(`key=${KEY}.`)).toBe('key=[secret].');
    const plain = 'nothing secret here, just some words and 0123456789';
    expect(s.scrub(plain)).toBe(plain);
  });

  it('masks any run of 12 or more of its characters: a truncated key, a middle slice, its tail', () => {
    // The issue's case: a truncated tool result quoted by the model (17 of the key's characters).
    expect(s.scrub(`result: ${KEY.slice(0, 17)}…`)).toBe('result: [secret]…');
    expect(s.scrub(`[${KEY.slice(9, 21)}]`)).toBe('[[secret]]');
    expect(s.scrub(`tail ${KEY.slice(-12)}`)).toBe('tail [secret]');
    // At the very start and the very end of the text (the rolling window's edges).
    expect(s.scrub(KEY.slice(3, 15))).toBe('[secret]');
    expect(s.scrub(`x${KEY.slice(20)}`)).toBe('x[secret]');
  });

  it('leaves runs shorter than 12 (ordinary text shares short runs with any key)', () => {
    const eleven = KEY.slice(5, 16);
    expect(s.scrub(`a ${eleven} b`)).toBe(`a ${eleven} b`);
  });

  it('masks the key reversed, whole or in part', () => {
    const rev = reversed(KEY);
    expect(s.scrub(`rev: ${rev}`)).toBe('rev: [secret]');
    expect(s.scrub(`rev: ${rev.slice(4, 18)}`)).toBe('rev: [secret]');
  });

  it('masks keys shorter than 12 whole (and reversed), never in part; ignores values under 8', () => {
    const short = scrubberOf('Pw9-abcde', 'tiny7');
    expect(short.scrub('a Pw9-abcde b edcba-9wP c')).toBe('a [secret] b [secret] c');
    expect(short.scrub('Pw9-abcd')).toBe('Pw9-abcd');
    expect(short.scrub('tiny7')).toBe('tiny7');
  });

  it('masks a key with a quote or backslash inside JSON too', () => {
    const odd = 'ab"cd\\ef-0123456789xyz';
    const json = JSON.stringify({ said: `key ${odd}` });
    const out = scrubberOf(odd).scrub(json);
    expect(out).not.toContain('0123456789xyz');
    expect(JSON.parse(out)).toEqual({ said: 'key [secret]' });
  });

  it('joins overlapping and touching matches of several keys into one mark', () => {
    const a = 'AAAA1111bbbbCCCC2222';
    const b = 'CCCC2222dddd3333EEEE';
    const both = scrubberOf(a, b);
    // a's tail is b's head: the two overlap in the text.
    expect(both.scrub(`<${a}dddd3333EEEE>`)).toBe('<[secret]>');
    expect(both.scrub(`${a}${a}${b}`)).toBe('[secret]');
  });

  it('masks the whole of a run of one repeated character when the key is made of it', () => {
    const s2 = scrubberOf('a'.repeat(20));
    expect(s2.scrub(`x${'a'.repeat(5000)}y`)).toBe('x[secret]y');
    expect(s2.scrub(`x${'a'.repeat(11)}y`)).toBe(`x${'a'.repeat(11)}y`);
  });

  it('keeps an exact value exact: a URL or path read through env: is masked whole only', () => {
    const s2 = new SecretScrubber();
    s2.add('http://127.0.0.1:43123/base', 'exact');
    expect(s2.scrub('to http://127.0.0.1:43123/base now')).toBe('to [secret] now');
    expect(s2.scrub('gateway http://127.0.0.1:7701/m')).toBe('gateway http://127.0.0.1:7701/m');
    // Registered again as a key, it is a key.
    s2.add('http://127.0.0.1:43123/base', 'key');
    expect(s2.scrub('http://127.0.0.1:43')).toBe('[secret]');
  });

  it('still masks token patterns with their own mark', () => {
    const s2 = scrubberOf(KEY);
    s2.addPattern(TOKEN_PATTERN);
    const token = `tlg1_${'A'.repeat(43)}`;
    expect(s2.scrub(`${token} and ${KEY}`)).toBe('[token] and [secret]');
    expect(() => s2.addPattern(/x/)).toThrow(/global/);
  });

  it('learns keys added after it was first used', () => {
    const s2 = scrubberOf(KEY);
    expect(s2.scrub('other-key-0123456789abcdef')).toBe('other-key-0123456789abcdef');
    const before = s2.generation;
    s2.add('other-key-0123456789abcdef');
    expect(s2.generation).toBeGreaterThan(before);
    expect(s2.scrub('other-key-0123456789abcdef')).toBe('[secret]');
    s2.add('other-key-0123456789abcdef');
    expect(s2.generation).toBe(before + 1);
  });
});

describe('SecretScrubber: base64', () => {
  const s = scrubberOf(KEY);
  const inners = [0, 1, 2].map((o) => base64Inner(Buffer.from(KEY), o as 0 | 1 | 2));

  it('finds the key at each of the three alignments of a base64 stream, standard and url-safe', () => {
    for (let pad = 0; pad < 6; pad++) {
      const env = `${'X'.repeat(pad)}PATH=/usr/bin\nANTHROPIC_API_KEY=${KEY}\nHOME=/root\n`;
      for (const encoded of [Buffer.from(env).toString('base64'), Buffer.from(env).toString('base64url')]) {
        const out = s.scrub(`$ env | base64\n${encoded}\n`);
        expect(out, `pad ${pad}`).toContain('[secret]');
        for (const inner of inners) {
          expect(leftRuns(out, inner)).toEqual([]);
          expect(leftRuns(out, inner.replaceAll('+', '-').replaceAll('/', '_'))).toEqual([]);
        }
      }
    }
  });

  it('masks the base64 of the key alone, padding and all but its edge characters', () => {
    const encoded = Buffer.from(KEY).toString('base64');
    const out = s.scrub(encoded);
    expect(out.length).toBeLessThan(12);
    expect(out).toContain('[secret]');
  });

  it('masks each 12+ piece of a key whose base64 is wrapped at 76 columns', () => {
    const env = `${'A=b\n'.repeat(14)}K=${KEY}${KEY}\n`;
    const wrapped = (
      Buffer.from(env)
        .toString('base64')
        .match(/.{1,76}/g) ?? []
    ).join('\n');
    const out = s.scrub(wrapped);
    for (const inner of inners) expect(leftRuns(out, inner)).toEqual([]);
  });

  it('computes the stable inner part: no character that mixes in a neighbour', () => {
    const bytes = Buffer.from('0123456789');
    for (const offset of [0, 1, 2] as const) {
      const inner = base64Inner(bytes, offset);
      for (const before of ['', 'a', 'bb', 'ccc']) {
        if (before.length % 3 !== offset) continue;
        for (const after of ['', 'x', 'yy', 'zzz']) {
          expect(Buffer.from(`${before}0123456789${after}`).toString('base64')).toContain(inner);
        }
      }
    }
    expect(base64Inner(bytes, 0)).toBe('MDEyMzQ1Njc4O');
  });
});

describe('SecretScrubber: hostile input', () => {
  it('matches a naive search exactly, on random text over a small alphabet (hash collisions included)', () => {
    const alphabet = 'ab';
    const pick = (n: number) =>
      Array.from(randomBytes(n), (b) => alphabet[b % alphabet.length] as string).join('');
    for (let round = 0; round < 30; round++) {
      const keys = Array.from({ length: 3 }, () => pick(14 + (round % 10)));
      const text = pick(3000);
      const index = new SecretIndex();
      for (const k of keys) index.addForm(k, true);
      const naive: Range[] = [];
      for (let i = 0; i + RUN <= text.length; i++) {
        const run = text.slice(i, i + RUN);
        if (keys.some((k) => k.includes(run))) naive.push([i, i + RUN]);
      }
      expect(index.ranges(text)).toEqual(mergeRanges(naive));
    }
  });

  it('matches a naive search exactly on base64-like text with pieces of the keys planted at every offset', () => {
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
    const pick = (n: number) =>
      Array.from(randomBytes(n), (b) => alphabet[b % alphabet.length] as string).join('');
    const keys = Array.from({ length: 4 }, () => pick(40));
    const index = new SecretIndex();
    for (const k of keys) index.addForm(k, true);
    for (let round = 0; round < 200; round++) {
      const key = keys[round % 4] as string;
      const from = round % 25;
      const piece = key.slice(from, from + 11 + (round % 6));
      const text = `${pick(round % 40)}${piece}${pick(7)}${piece.slice(1)}${pick(round % 13)}`;
      const naive: Range[] = [];
      for (let i = 0; i + RUN <= text.length; i++) {
        const run = text.slice(i, i + RUN);
        if (keys.some((k) => k.includes(run))) naive.push([i, i + RUN]);
      }
      expect(index.ranges(text), text).toEqual(mergeRanges(naive));
    }
  });

  it('finds planted pieces in 20 MB of random text, at the start, the middle and the end', () => {
    const keys = Array.from({ length: 50 }, () => `k-${randomBytes(24).toString('base64url')}`);
    const s = scrubberOf(...keys);
    const filler = randomBytes(10 * 1024 * 1024).toString('hex'); // 20 MB, no key-like runs
    const k = keys[17] as string;
    // Spaces around each piece: a filler character that happens to continue the key (a hex digit is
    // a base64url one too) would rightly widen the mask by a character and make the length vary.
    const text = `${k.slice(2, 20)} ${filler.slice(0, 1e7)} ${reversed(k)} ${filler.slice(1e7)} ${k.slice(-13)}`;
    const out = s.scrub(text);
    expect(out.startsWith('[secret] ')).toBe(true);
    expect(out.endsWith(' [secret]')).toBe(true);
    expect(out.length).toBe(text.length - 18 - k.length - 13 + 3 * '[secret]'.length);
    expect(leftRuns(out, k)).toEqual([]);
  });

  it('copes with a text that is one long match', () => {
    const key = 'abcdefghijklmnop';
    const s = scrubberOf(key);
    expect(s.scrub(key.repeat(100_000))).toBe('[secret]');
  });

  it('gives ranges in bytes for a non-ASCII key read as latin1', () => {
    const key = 'pässwörd-0123456789-ünïcode';
    const s = scrubberOf(key);
    const bytes = Buffer.from(`before ${key.slice(1, 15)} after`, 'utf8');
    const ranges = s.byteRanges(bytes.toString('latin1'));
    expect(ranges).toHaveLength(1);
    const [start, end] = ranges[0] as Range;
    expect(bytes.subarray(start, end).toString('utf8')).toBe(key.slice(1, 15));
  });
});

describe('SecretScrubber.mayHold: the check of a body before it is scrubbed', () => {
  /** mayHold answers false only for bytes whose text the scrub leaves as it was. */
  const agrees = (s: SecretScrubber, bytes: Buffer) => {
    const text = bytes.toString('utf8');
    const holds = s.scrub(text) !== text;
    expect(s.mayHold(bytes, text), JSON.stringify(text.slice(0, 80))).toBe(holds);
  };

  it('agrees with the scrub on random text over a small alphabet (hash collisions included)', () => {
    const alphabet = 'ab';
    const pick = (n: number) =>
      Array.from(randomBytes(n), (b) => alphabet[b % alphabet.length] as string).join('');
    let held = 0;
    for (let round = 0; round < 60; round++) {
      const s = scrubberOf(...Array.from({ length: 2 }, () => pick(14 + (round % 12))));
      const bytes = Buffer.from(pick(round < 30 ? 40 : 400));
      agrees(s, bytes);
      if (s.mayHold(bytes, bytes.toString())) held++;
    }
    expect(held).toBeGreaterThan(0);
  });

  it('finds every form of a key planted at every offset, whole or as a run of 12, in a JSON body', () => {
    const key = `k-${randomBytes(24).toString('base64url')}`;
    const s = scrubberOf(key);
    s.addPattern(TOKEN_PATTERN);
    const forms = secretForms(key, 'key');
    const clean = JSON.stringify({
      action: 'opened',
      issue: { body: 'x'.repeat(40), url: 'https://example.com' },
    });
    agrees(s, Buffer.from(clean));
    expect(s.mayHold(Buffer.from(clean), clean)).toBe(false);
    for (const [n, form] of forms.entries()) {
      for (let at = 0; at < 20; at++) {
        const piece = form.slice(n % 3, (n % 3) + RUN + (at % 3));
        const text = `${clean.slice(0, 20 + at)}${piece}${clean.slice(20 + at)}`;
        // At each alignment of a buffer's memory, as a body read from a socket may be.
        const shift = at % 4;
        const backing = Buffer.alloc(text.length + shift);
        backing.write(text, shift);
        const bytes = backing.subarray(shift);
        expect(s.mayHold(bytes, text), `${form} at ${at}`).toBe(true);
        agrees(s, bytes);
      }
    }
    // A run of 11 is ordinary text.
    const short = `${clean}${key.slice(3, 14)}`;
    expect(s.mayHold(Buffer.from(short), short)).toBe(false);
  });

  it('finds exact values, short keys, token patterns and keys learnt after the first check', () => {
    const s = scrubberOf('shortkey9');
    s.add('https://hooks.example.com/x?y=1', 'exact');
    s.addPattern(TOKEN_PATTERN);
    const check = (text: string) => s.mayHold(Buffer.from(text), text);
    expect(check('{"a":"nothing here at all, not even a shortkey"}')).toBe(false);
    expect(check('{"a":"shortkey9"}')).toBe(true);
    expect(check('{"a":"see https://hooks.example.com/x?y=1 now"}')).toBe(true);
    expect(check('{"a":"see https://hooks.example.com/x?y=2 now"}')).toBe(false);
    expect(check(`{"t":"tlg1_${'A'.repeat(43)}"}`)).toBe(true);
    expect(check(`{"t":"tlg1_${'A'.repeat(42)}"}`)).toBe(false);
    const later = `later-${randomBytes(16).toString('hex')}`;
    expect(check(`{"a":"${later}"}`)).toBe(false);
    s.add(later);
    expect(check(`{"a":"${later}"}`)).toBe(true);
    expect(check(`{"a":"${reversed(later).slice(2, 15)}"}`)).toBe(true);
  });

  it('finds an ASCII key between bytes that are not UTF-8, and always scrubs for a non-ASCII key', () => {
    const key = 'Zq8xK2mN7vB4cL9wR1tY6uP0';
    const s = scrubberOf(key);
    const bytes = Buffer.concat([
      Buffer.from([0xff, 0xc3]),
      Buffer.from(key.slice(4, 17)),
      Buffer.from([0xe2, 0x82]),
    ]);
    expect(s.mayHold(bytes, bytes.toString('utf8'))).toBe(true);
    agrees(s, bytes);
    const wide = scrubberOf('pässwörd-0123456789-ünïcode');
    expect(wide.mayHold(Buffer.from('{"a":"plain"}'), '{"a":"plain"}')).toBe(true);
    expect(new SecretScrubber().mayHold(Buffer.from('{"a":"plain"}'), '{"a":"plain"}')).toBe(false);
  });
});

describe('secret forms', () => {
  it('a key: itself, reversed, JSON-escaped and six base64 forms; an exact value: itself', () => {
    expect(secretForms(KEY, 'key')).toEqual(
      expect.arrayContaining([KEY, reversed(KEY), base64Inner(Buffer.from(KEY), 1)]),
    );
    expect(secretForms(KEY, 'key').length).toBeGreaterThanOrEqual(5);
    expect(secretForms('/home/me/.config', 'exact')).toEqual(['/home/me/.config']);
  });

  it('tells a key from a URL, a path or a word', () => {
    expect(looksLikeKey(KEY)).toBe(true);
    expect(looksLikeKey('ghp_0123456789abcdefABCDEF0123456789abcd')).toBe(true);
    expect(looksLikeKey('http://127.0.0.1:8080/v1')).toBe(false);
    expect(looksLikeKey('/home/someone/.claude-config')).toBe(false);
    expect(looksLikeKey('claude sonnet 4 5')).toBe(false);
    expect(looksLikeKey('onlylettersnodigits')).toBe(false);
  });
});
