import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  identityFromGitConfig,
  operatorGitIdentity,
  operatorGitIdentityAsync,
} from '../../src/gateway/session-files.js';

// The operator's git identity, asked of the real git with one call for both keys (a file of its own:
// the answer is kept once per process).
const home = mkdtempSync(join(tmpdir(), 'the-loop-identity-'));
afterAll(() => rmSync(home, { recursive: true, force: true }));

describe('operatorGitIdentity', () => {
  it('reads what `git config --global --get` would, in one call, without blocking', async () => {
    writeFileSync(
      join(home, '.gitconfig'),
      '[user]\n\tname = First Name\n\temail = first@example.test\n[user]\n\tname = "  Ada  Lovelace "\n[core]\n\teditor = vi\n',
    );
    const env = { PATH: process.env.PATH, HOME: home };
    const get = (key: string) =>
      execFileSync('git', ['config', '--global', '--get', key], { encoding: 'utf8', env }).trim();
    const found = await operatorGitIdentityAsync(env);
    expect(found).toEqual({ name: get('user.name'), email: get('user.email') });
    expect(found).toEqual({ name: 'Ada  Lovelace', email: 'first@example.test' });
    // The synchronous form reads the same cache.
    expect(operatorGitIdentity(env)).toBe(found);
  });

  it('parses git -z output: last value wins, keys without a value or empty are none, others ignored', () => {
    expect(identityFromGitConfig('')).toEqual({ name: undefined, email: undefined });
    expect(identityFromGitConfig('user.name\nA\0user.name\nB\0user.email\n\0')).toEqual({
      name: 'B',
      email: undefined,
    });
    expect(identityFromGitConfig('user.name\0user.email\nx@y\nz\0user.signingkey\nK\0')).toEqual({
      name: undefined,
      email: 'x@y\nz',
    });
  });
});
