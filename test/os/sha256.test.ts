import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { sha256Hex } from '../../src/os/sha256.js';

describe('sha256Hex (noble, instead of loading node:crypto on every command)', () => {
  it('gives node:crypto’s SHA-256 of the UTF-8 bytes', () => {
    const lone = String.fromCharCode(0xd800);
    for (const text of ['', 'abc', '/home/ana/é/ü/日本', `a${lone}b`, 'x'.repeat(1_000_003), '\u0000\n\r']) {
      expect(sha256Hex(text)).toBe(createHash('sha256').update(text).digest('hex'));
    }
  });
});
