/**
 * `store:` in the config: SQLite by default; PostgreSQL with a URL that is checked, whose password is
 * a secret of its own (masked alone, as written and decoded, also when the file holds the URL
 * as written), and never makes the config uncacheable.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { secretParts } from '../../src/config/secret-parts.js';
import { LoopError } from '../../src/core/errors.js';
import { scrubberFor } from '../../src/guard/scrubber.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'the-loop-store-config-'));
  mkdirSync(join(dir, '.the-loop'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const load = (yaml: string, env: Record<string, string> = {}) => {
  writeFileSync(join(dir, '.the-loop', 'config.yaml'), yaml);
  return loadConfig({ cwd: dir, env });
};

describe('store config', () => {
  it('is SQLite unless told otherwise', () => {
    expect(load('{}').config.store).toEqual({ kind: 'sqlite' });
  });

  it('takes a PostgreSQL URL from env:, its password a secret of its own', () => {
    const url = 'postgres://loop:p%40ss-w0rd-9@db.internal:5432/the_loop';
    const loaded = load('store: { kind: postgres, url: env:DB }\n', { DB: url });
    expect(loaded.config.store).toMatchObject({ kind: 'postgres', url, pool: 10, leaseSeconds: 15 });
    expect(loaded.secretValues).toEqual([url, 'p%40ss-w0rd-9', 'p@ss-w0rd-9']);
    const scrub = scrubberFor(loaded, {}).scrub;
    expect(scrub('auth failed for p@ss-w0rd-9 at db.internal')).not.toContain('p@ss-w0rd-9');
  });

  it('masks the password of a URL written in the file, and says it is written there', () => {
    const loaded = load('store: { kind: postgres, url: "postgres://loop:literal-pw-123@db/x" }\n');
    expect(loaded.literalSecrets).toEqual(['store.url']);
    expect(scrubberFor(loaded, {}).scrub('password literal-pw-123')).not.toContain('literal-pw-123');
    // Without a password the URL holds no secret.
    expect(load('store: { kind: postgres, url: "postgres://loop@db/x" }\n').literalSecrets).toEqual([]);
  });

  it('refuses a URL that is not PostgreSQL, does not parse, or a bad host id', () => {
    for (const [yaml, message] of [
      ['store: { kind: postgres, url: "mysql://db/x" }', /starting postgres:\/\/ or postgresql:\/\//],
      ['store: { kind: postgres, url: "postgres://" }', /a URL that parses, naming a host/],
      ['store: { kind: postgres, url: "postgres://db/x", host: "no spaces" }', /a host id/],
      ['store: { kind: postgres, url: "postgres://db/x", pool: 1 }', /at least 2 connections/],
      [
        'store: { kind: mongo }',
        /\n {2}store\.kind: Invalid discriminator value\. Expected 'sqlite' \| 'postgres'$/,
      ],
    ] as const) {
      const error = (() => {
        try {
          load(`${yaml}\n`);
        } catch (e) {
          return e;
        }
        return undefined;
      })();
      expect(error).toBeInstanceOf(LoopError);
      expect(String((error as Error).message)).toMatch(message);
    }
  });

  it('finds the password in the query form too, and nothing in a plain value', () => {
    expect(secretParts('postgresql://db/x?user=loop&password=query-pw-77')).toEqual([
      'postgresql://db/x?user=loop&password=query-pw-77',
      'query-pw-77',
    ]);
    expect(secretParts('just-a-token-value')).toEqual(['just-a-token-value']);
    // Too short to search for alone: only the whole URL.
    expect(secretParts('postgres://u:short@db/x')).toEqual(['postgres://u:short@db/x']);
  });
});
