/**
 * A failed `git config --global` (killed, timed out, EAGAIN, another exit) is no identity for this
 * turn, never kept — not for the process, not in the cache across processes; a clean exit 0 or
 * exit 1 (nothing set) is kept. (A file of its own: the answer is kept once per process.)
 */
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { identityKey, readIdentity } from '../../src/gateway/identity-cache.js';
import {
  identityAnswer,
  operatorGitIdentity,
  operatorGitIdentityAsync,
} from '../../src/gateway/session-files.js';

const root = mkdtempSync(join(tmpdir(), 'the-loop-identity-failure-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** A stand-in `git` (test code): a fixed script, alone on PATH. */
function fakeGit(name: string, script: string) {
  const bin = join(root, name, 'bin');
  const home = join(root, name, 'home');
  mkdirSync(bin, { recursive: true });
  mkdirSync(home, { recursive: true });
  writeFileSync(join(bin, 'git'), `#!/bin/sh\n${script}\n`);
  chmodSync(join(bin, 'git'), 0o755);
  const env = { PATH: `${bin}:/usr/bin:/bin`, HOME: home };
  return { env, cache: join(root, name, 'cache'), key: identityKey(env) as string };
}

describe('identityAnswer (pure)', () => {
  const out = 'user.name\nAda\0';
  it('is clean for exit 0 (an identity) and exit 1 (none set)', () => {
    expect(identityAnswer({ status: 0, signal: null, failed: false }, out)).toEqual({
      identity: { name: 'Ada', email: undefined },
      clean: true,
    });
    expect(identityAnswer({ status: 1, signal: null, failed: false }, '')).toEqual({
      identity: {},
      clean: true,
    });
  });
  it('is not clean for a signal, a spawn failure, another exit', () => {
    expect(identityAnswer({ status: null, signal: 'SIGTERM', failed: false }, out).clean).toBe(false);
    expect(identityAnswer({ status: 0, signal: null, failed: true }, out).clean).toBe(false);
    expect(identityAnswer({ status: null, signal: null, failed: true }, '').clean).toBe(false);
    expect(identityAnswer({ status: 128, signal: null, failed: false }, '').clean).toBe(false);
    expect(identityAnswer({ status: 2, signal: null, failed: false }, out).identity).toEqual({});
  });
});

describe('operatorGitIdentity with a git that fails', () => {
  it('keeps nothing when git is killed or exits otherwise, sync or not; keeps a clean answer', async () => {
    const killed = fakeGit('killed', 'kill -KILL $$');
    expect(operatorGitIdentity(killed.env, killed.cache)).toEqual({});
    expect(readIdentity(killed.cache, killed.key)).toBeUndefined();
    expect(await operatorGitIdentityAsync(killed.env, killed.cache)).toEqual({});
    expect(readIdentity(killed.cache, killed.key)).toBeUndefined();
    const broken = fakeGit('broken', 'exit 128');
    expect(await operatorGitIdentityAsync(broken.env, broken.cache)).toEqual({});
    expect(operatorGitIdentity(broken.env, broken.cache)).toEqual({});
    expect(readIdentity(broken.cache, broken.key)).toBeUndefined();
    // Not kept for the process either: a git that answers is asked next.
    const good = fakeGit('good', "printf 'user.name\\nAda\\0'");
    expect(await operatorGitIdentityAsync(good.env, good.cache)).toEqual({ name: 'Ada', email: undefined });
    expect(readIdentity(good.cache, good.key)).toEqual({ name: 'Ada' });
  });
});
