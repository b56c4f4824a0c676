/**
 * `github:` in the config: defaults, the App or a token (not both), a private key that does not
 * parse refused at load without quoting it, and the key and token masked everywhere.
 */
import { generateKeyPairSync } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { LoopError } from '../../src/core/errors.js';
import { scrubberFor } from '../../src/guard/scrubber.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'the-loop-github-config-'));
  mkdirSync(join(dir, '.the-loop'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const load = (yaml: string, env: Record<string, string> = {}) => {
  writeFileSync(join(dir, '.the-loop', 'config.yaml'), yaml);
  return loadConfig({ cwd: dir, env });
};

const failure = (fn: () => unknown): LoopError => {
  try {
    fn();
  } catch (error) {
    if (error instanceof LoopError) return error;
    throw error;
  }
  throw new Error('expected a LoopError');
};

const PEM = generateKeyPairSync('rsa', {
  modulusLength: 2048,
  privateKeyEncoding: { type: 'pkcs1', format: 'pem' },
  publicKeyEncoding: { type: 'spki', format: 'pem' },
}).privateKey;

describe('github config', () => {
  it('has defaults: no App, no token, every status on, paced', () => {
    expect(load('{}').config.github).toEqual({
      status: {
        reactions: true,
        comments: true,
        checks: true,
        replyToRejections: true,
        editIntervalSeconds: 10,
        checkName: 'the-loop',
      },
      pacing: { writeGapMs: 1000, commentGapMs: 3000, writesPerHour: 450 },
    });
  });

  it('reads the App key through env:, a secret masked whole and in pieces', () => {
    const loaded = load('github: { app: { id: 12, privateKey: env:APP_KEY, installationId: 3 } }\n', {
      APP_KEY: PEM,
    });
    expect(loaded.config.github.app).toEqual({ id: 12, privateKey: PEM, installationId: 3 });
    expect(loaded.secretValues).toContain(PEM);
    expect(loaded.literalSecrets).toEqual([]);
    const scrub = scrubberFor(loaded, {}).scrub;
    const line = PEM.split('\n')[5] ?? '';
    expect(line.length).toBeGreaterThan(40);
    expect(scrub(`key: ${PEM}`)).not.toContain(line);
    expect(scrub(`a line of it: ${line}`)).not.toContain(line);
  });

  it('masks github.token, and says when it is written in the file', () => {
    const loaded = load('github: { token: ghp_writtenInTheFile0123456789 }\n');
    expect(loaded.literalSecrets).toEqual(['github.token']);
    expect(scrubberFor(loaded, {}).scrub('tok ghp_writtenInTheFile0123456789')).not.toContain(
      'ghp_writtenInTheFile0123456789',
    );
  });

  it('refuses the App and a token together', () => {
    const error = failure(() =>
      load('github: { app: { id: 1, privateKey: env:K }, token: env:T }\n', {
        K: PEM,
        T: 'ghp_0123456789abc',
      }),
    );
    expect(error.code).toBe('config-invalid');
    expect(error.message).toMatch(/github.app and github.token are exclusive/);
  });

  it('refuses a private key that does not parse, naming the key path and never the key', () => {
    const bogus =
      '-----BEGIN RSA PRIVATE KEY-----\nbm90LWEta2V5LXNlY3JldC1tYXRlcmlhbA==\n-----END RSA PRIVATE KEY-----';
    const error = failure(() => load('github: { app: { id: 1, privateKey: env:K } }\n', { K: bogus }));
    expect(error.message).toMatch(/github\.app\.privateKey: not a PEM RSA private key/);
    expect(error.message).not.toContain('bm90LWEta2V5');
  });

  it('checks the pacing and status bounds', () => {
    expect(failure(() => load('github: { pacing: { writeGapMs: 5 } }\n')).message).toMatch(
      /github\.pacing\.writeGapMs/,
    );
    expect(failure(() => load('github: { status: { editIntervalSeconds: 0.01 } }\n')).message).toMatch(
      /github\.status\.editIntervalSeconds/,
    );
    expect(failure(() => load('github: { baseUrl: "ftp://x" }\n')).message).toMatch(/github\.baseUrl/);
  });
});
