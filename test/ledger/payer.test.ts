import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ResolvedCredential } from '../../src/engines/env.js';
import { describePayer, loadSalt, payerOf } from '../../src/ledger/payer.js';

const SALT = Buffer.from('00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff', 'hex');
const OTHER_SALT = Buffer.from('ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100', 'hex');
const apiKey: ResolvedCredential = { env: 'ANTHROPIC_API_KEY', kind: 'api-key' };
// A canary with hex runs in it, so a fingerprint that leaked any 6+ characters of it could match.
const CANARY = 'sk-ant-api03-CANARYdeadbeefcafe0123456789abcdefCANARY-xyz';

/** Every substring of `text` of length `n`. */
const substrings = (text: string, n: number): string[] =>
  Array.from({ length: text.length - n + 1 }, (_, i) => text.slice(i, i + n));

describe('payerOf', () => {
  it('an API key is fingerprinted as key:<12 hex>, stable for the same key and salt', () => {
    const env = { ANTHROPIC_API_KEY: CANARY };
    const payer = payerOf(apiKey, env, SALT);
    expect(payer.kind).toBe('api-key');
    expect(payer.id).toMatch(/^key:[0-9a-f]{12}$/);
    expect(payerOf(apiKey, { ...env }, Buffer.from(SALT))).toEqual(payer);
  });

  it('another key or another salt gives another fingerprint', () => {
    const a = payerOf(apiKey, { ANTHROPIC_API_KEY: CANARY }, SALT).id;
    const b = payerOf(apiKey, { ANTHROPIC_API_KEY: `${CANARY}2` }, SALT).id;
    const c = payerOf(apiKey, { ANTHROPIC_API_KEY: CANARY }, OTHER_SALT).id;
    expect(new Set([a, b, c]).size).toBe(3);
  });

  it('the fingerprint reveals no part of the key (no substring of 6+ characters)', () => {
    for (const salt of [SALT, OTHER_SALT]) {
      const payer = payerOf(apiKey, { ANTHROPIC_API_KEY: CANARY }, salt);
      const shown = `${JSON.stringify(payer)} ${describePayer(payer)}`;
      for (const piece of substrings(CANARY, 6)) expect(shown).not.toContain(piece);
      for (const piece of substrings(CANARY.toLowerCase(), 6)) expect(shown).not.toContain(piece);
    }
  });

  it('reads the value from the variable the credential names', () => {
    const credential: ResolvedCredential = { env: 'OPENAI_API_KEY', kind: 'api-key' };
    const viaOpenai = payerOf(credential, { OPENAI_API_KEY: CANARY, ANTHROPIC_API_KEY: 'other' }, SALT);
    expect(viaOpenai).toEqual(payerOf(apiKey, { ANTHROPIC_API_KEY: CANARY }, SALT));
  });

  it('a credential named but its variable empty or absent → api-key with id null', () => {
    expect(payerOf(apiKey, { ANTHROPIC_API_KEY: '' }, SALT)).toEqual({ kind: 'api-key', id: null });
    expect(payerOf(apiKey, {}, SALT)).toEqual({ kind: 'api-key', id: null });
  });

  it('subscription and cloud credentials are shown by kind only', () => {
    const env = { CLAUDE_CODE_OAUTH_TOKEN: CANARY };
    expect(payerOf({ env: 'CLAUDE_CODE_OAUTH_TOKEN', kind: 'subscription' }, env, SALT)).toEqual({
      kind: 'subscription',
      id: null,
    });
    expect(payerOf({ env: 'AWS_BEARER_TOKEN_BEDROCK', kind: 'cloud' }, {}, SALT)).toEqual({
      kind: 'cloud',
      id: null,
    });
  });

  it('cloud-provider switches make the provider the payer, whatever the credential', () => {
    const cases: Array<[Record<string, string>, string]> = [
      [{ CLAUDE_CODE_USE_BEDROCK: '1' }, 'bedrock'],
      [{ CLAUDE_CODE_USE_VERTEX: '1' }, 'vertex'],
      [{ GOOGLE_GENAI_USE_VERTEXAI: 'true' }, 'vertex'],
      [{ GOOGLE_GENAI_USE_VERTEXAI: ' TRUE ' }, 'vertex'],
      [{ CLAUDE_CODE_USE_BEDROCK: 'yes' }, 'bedrock'],
    ];
    for (const [switches, id] of cases) {
      for (const credential of [null, apiKey]) {
        expect(payerOf(credential, { ...switches, ANTHROPIC_API_KEY: CANARY }, SALT)).toEqual({
          kind: 'cloud',
          id,
        });
      }
    }
  });

  it('a switch that is off does not make a cloud payer', () => {
    for (const value of ['0', 'false', '', 'no']) {
      expect(payerOf(null, { CLAUDE_CODE_USE_BEDROCK: value }, SALT)).toEqual({ kind: 'unknown', id: null });
      expect(payerOf(apiKey, { CLAUDE_CODE_USE_VERTEX: value, ANTHROPIC_API_KEY: CANARY }, SALT).kind).toBe(
        'api-key',
      );
    }
  });

  it('no credential → unknown', () => {
    expect(payerOf(null, {}, SALT)).toEqual({ kind: 'unknown', id: null });
    expect(payerOf(null, { ANTHROPIC_API_KEY: CANARY }, SALT)).toEqual({ kind: 'unknown', id: null });
  });
});

describe('describePayer', () => {
  it('kind, and the id when there is one', () => {
    expect(describePayer({ kind: 'api-key', id: 'key:0123456789ab' })).toBe('api-key key:0123456789ab');
    expect(describePayer({ kind: 'cloud', id: 'bedrock' })).toBe('cloud bedrock');
    expect(describePayer({ kind: 'subscription', id: null })).toBe('subscription');
    expect(describePayer({ kind: 'unknown', id: null })).toBe('unknown');
  });
});

describe('loadSalt', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'the-loop-salt-'));
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('creates <dir>/payer-salt, 0600, 32 random bytes in hex, and returns the same salt next time', () => {
    const file = join(dir, 'payer-salt');
    expect(existsSync(file)).toBe(false);
    const salt = loadSalt(dir);
    expect(salt.length).toBe(32);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const text = readFileSync(file, 'utf8');
    expect(text).toMatch(/^[0-9a-f]{64}$/);
    expect(Buffer.from(text, 'hex').equals(salt)).toBe(true);
    expect(loadSalt(dir).equals(salt)).toBe(true);
    expect(readdirSync(dir)).toEqual(['payer-salt']);
  });

  it('two installations get different salts', () => {
    const other = mkdtempSync(join(dir, 'other-'));
    expect(loadSalt(dir).equals(loadSalt(other))).toBe(false);
  });

  it('keeps an existing salt of 16+ bytes, whitespace around it ignored', () => {
    const existing = 'a1'.repeat(16);
    writeFileSync(join(dir, 'payer-salt'), `  ${existing}\n`, { mode: 0o600 });
    expect(loadSalt(dir).toString('hex')).toBe(existing);
  });

  it.each([
    ['short', 'abcd'],
    ['empty', ''],
    ['not hex', 'z'.repeat(64)],
    ['15 bytes', 'ab'.repeat(15)],
  ])('a %s salt file is replaced by a new 32-byte salt, not returned, not thrown on', (_, content) => {
    const file = join(dir, 'payer-salt');
    writeFileSync(file, content, { mode: 0o644 });
    const salt = loadSalt(dir);
    expect(salt.length).toBe(32);
    expect(readFileSync(file, 'utf8')).toBe(salt.toString('hex'));
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(loadSalt(dir).equals(salt)).toBe(true);
    // The fingerprints it gives are stable across loads.
    const env = { ANTHROPIC_API_KEY: CANARY };
    expect(payerOf(apiKey, env, loadSalt(dir))).toEqual(payerOf(apiKey, env, salt));
  });
});
