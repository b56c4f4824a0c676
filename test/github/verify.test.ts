import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { signBody, verifySignature } from '../../src/github/verify.js';

const SECRET = 'test-secret-0123456789abcdef';
// GitHub signs the compact bytes it sends; the fixture file is pretty-printed, so compact it first.
const BODY = Buffer.from(
  JSON.stringify(
    JSON.parse(
      readFileSync(new URL('../fixtures/github/issue_comment.created.json', import.meta.url), 'utf8'),
    ),
  ),
);
const hex = (secret: string, body: Buffer | string) =>
  createHmac('sha256', secret).update(body).digest('hex');

describe('signBody', () => {
  it('is sha256= and the hex HMAC-SHA256 of the bytes (as GitHub computes it)', () => {
    expect(signBody(SECRET, BODY)).toBe(`sha256=${hex(SECRET, BODY)}`);
    expect(signBody(SECRET, BODY)).toMatch(/^sha256=[0-9a-f]{64}$/);
  });

  it("matches GitHub's documented example", () => {
    // https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries#testing-the-webhook-payload-validation
    expect(signBody("It's a Secret to Everybody", 'Hello, World!')).toBe(
      'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17',
    );
  });
});

describe('verifySignature', () => {
  const good = signBody(SECRET, BODY);

  it('accepts the correct signature', () => {
    expect(verifySignature(SECRET, BODY, good)).toBe(true);
  });

  it('accepts the signature of a string body as bytes (UTF-8, the non-ASCII dash included)', () => {
    expect(BODY.toString('utf8')).toContain('—');
    expect(verifySignature(SECRET, Buffer.from(BODY.toString('utf8'), 'utf8'), good)).toBe(true);
  });

  it('accepts upper-case hex and surrounding whitespace', () => {
    expect(verifySignature(SECRET, BODY, `sha256=${hex(SECRET, BODY).toUpperCase()}`)).toBe(true);
    expect(verifySignature(SECRET, BODY, ` ${good} `)).toBe(true);
  });

  it('rejects a signature made with another secret', () => {
    expect(verifySignature(SECRET, BODY, signBody(`${SECRET}x`, BODY))).toBe(false);
    expect(verifySignature(`${SECRET}x`, BODY, good)).toBe(false);
  });

  it('rejects a signature of other bytes: one byte changed, re-serialized, or truncated', () => {
    const changed = Buffer.from(BODY);
    changed[10] = (changed[10] ?? 0) ^ 1;
    expect(verifySignature(SECRET, changed, good)).toBe(false);
    const pretty = Buffer.from(JSON.stringify(JSON.parse(BODY.toString('utf8')), null, 2));
    expect(verifySignature(SECRET, pretty, good)).toBe(false);
    expect(verifySignature(SECRET, BODY.subarray(0, BODY.length - 1), good)).toBe(false);
    expect(verifySignature(SECRET, Buffer.concat([BODY, Buffer.from('\n')]), good)).toBe(false);
  });

  it('rejects one flipped hex digit', () => {
    const digits = good.slice('sha256='.length);
    const flipped = `sha256=${digits.slice(0, 63)}${digits[63] === '0' ? '1' : '0'}`;
    expect(verifySignature(SECRET, BODY, flipped)).toBe(false);
  });

  it.each([
    ['missing', undefined],
    ['empty', ''],
    ['no prefix', hex(SECRET, BODY)],
    ['sha1 prefix', `sha1=${hex(SECRET, BODY)}`],
    ['sha1 signature', `sha1=${createHmac('sha1', SECRET).update(BODY).digest('hex')}`],
    ['prefix only', 'sha256='],
    ['prefix with a space', `sha256= ${hex(SECRET, BODY)}`],
    ['63 hex digits', `sha256=${hex(SECRET, BODY).slice(0, 63)}`],
    ['65 hex digits', `sha256=${hex(SECRET, BODY)}0`],
    ['128 hex digits', `sha256=${hex(SECRET, BODY)}${hex(SECRET, BODY)}`],
    ['2 hex digits', 'sha256=ab'],
    ['non-hex', `sha256=${'g'.repeat(64)}`],
    ['non-hex at the end', `sha256=${hex(SECRET, BODY).slice(0, 63)}z`],
    ['base64', `sha256=${createHmac('sha256', SECRET).update(BODY).digest('base64')}`],
    ['two signatures', `${good},${good}`],
    ['embedded NUL', `${good}\u0000`],
  ])('rejects a malformed header (%s) without throwing', (_label, header) => {
    let result: boolean | undefined;
    expect(() => {
      result = verifySignature(SECRET, BODY, header);
    }).not.toThrow();
    expect(result).toBe(false);
  });

  it('never throws on length mismatches (timingSafeEqual would)', () => {
    for (let n = 0; n <= 130; n++) {
      const header = `sha256=${'a'.repeat(n)}`;
      expect(() => verifySignature(SECRET, BODY, header)).not.toThrow();
      expect(verifySignature(SECRET, BODY, header)).toBe(false);
    }
  });

  it('an empty body has a signature like any other', () => {
    const empty = Buffer.alloc(0);
    expect(verifySignature(SECRET, empty, signBody(SECRET, empty))).toBe(true);
    expect(verifySignature(SECRET, empty, good)).toBe(false);
    expect(verifySignature(SECRET, BODY, signBody(SECRET, empty))).toBe(false);
  });

  it('an empty secret and a real one never vouch for each other', () => {
    expect(verifySignature('', BODY, good)).toBe(false);
    expect(verifySignature(SECRET, BODY, signBody('', BODY))).toBe(false);
    // The empty key is still a key: this is why the daemon refuses to start without a secret.
    expect(verifySignature('', BODY, signBody('', BODY))).toBe(true);
  });
});
