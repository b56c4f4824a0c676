import { describe, expect, it } from 'vitest';
import { authorText, mentions, mentionsIn } from '../../src/github/mention.js';

/**
 * `mentions` skips reading a comment that cannot hold the mention. The skip must never change an
 * answer: each case, and many generated ones, are checked against the full reading.
 */
const full = (markdown: string, mention: string) => mentionsIn(authorText(markdown), mention);

/** A small deterministic generator (xorshift), so that a failure is the same on every run. */
function generator(seed: number) {
  let x = seed;
  return (n: number) => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) % n;
  };
}

describe('mentions: a comment that cannot hold the mention is not read, with the same answer', () => {
  it.each([
    ['@the-loop fix it', '@the-loop', 'as written'],
    ['@THE-LOOP fix it', '@the-loop', 'in capitals'],
    ['@the\\-loop fix it', '@the-loop', 'an escaped - is shown as -'],
    ['\\@the-loop fix it', '@the-loop', 'an escaped @'],
    ['@t\\h\\e\\-\\l\\o\\o\\p', '@the-loop', 'a backslash before a letter is shown'],
    ['@the\\\\-loop', '@the-loop', 'an escaped backslash is shown'],
    ['@the-loop\r\nfix', '@the-loop', 'CRLF after it'],
    ['@the\r-loop', '@the-loop', 'a lone CR inside it'],
    ['&#64;the-loop', '@the-loop', 'a character reference stays as written'],
    ['@the`-`loop', '@the-loop', 'a code span inside it'],
    ['@the<!-- -->-loop', '@the-loop', 'a comment inside it'],
    ['@robot\\[bot\\] please', '@robot[bot]', 'escaped brackets'],
    ['@robot[bot] please', '@robot[bot]', 'brackets'],
    ['@ro\\bot[bot]', '@robot[bot]', 'a shown backslash'],
    ['@the-\u212Aoop', '@the-koop', 'a Kelvin sign is not a k'],
    ['nothing here', '@the-loop', 'no mention'],
    ['', '@the-loop', 'empty'],
  ])('%j for %s (%s)', (markdown, mention) => {
    expect(mentions(markdown, mention)).toBe(markdown !== '' && full(markdown, mention));
  });

  it('5,000 generated comments of mention pieces, escapes and markup: the same answers', () => {
    const next = generator(0x5eed);
    const pieces = [
      '@',
      'the',
      '-',
      'loop',
      'THE',
      'LOOP',
      '\\',
      '\\\\',
      '`',
      '*',
      '_',
      '>',
      '<',
      '!--',
      '-->',
    ];
    const more = [' ', '\n', '\r\n', '[', ']', '(', ')', 'x', '.', '&#64;', '<b>', '</b>', '    ', '```'];
    const alphabet = [...pieces, ...more, '@the-loop', '@the\\-loop'];
    let both = 0;
    for (let k = 0; k < 5000; k++) {
      const parts: string[] = [];
      const n = 1 + next(24);
      for (let i = 0; i < n; i++) parts.push(alphabet[next(alphabet.length)] as string);
      const markdown = parts.join('');
      const expected = full(markdown, '@the-loop');
      if (expected) both++;
      expect(mentions(markdown, '@the-loop'), JSON.stringify(markdown)).toBe(expected);
    }
    // The generator must reach both answers, or it tests nothing.
    expect(both).toBeGreaterThan(100);
  });
});
