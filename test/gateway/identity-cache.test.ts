import { execFileSync, spawnSync } from 'node:child_process';
import {
  appendFileSync,
  chmodSync,
  mkdirSync,
  mkdtempSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  identityKey,
  readConfigFile,
  readIdentity,
  writeIdentity,
} from '../../src/gateway/identity-cache.js';

describe('the operator git identity cache', () => {
  let root: string;
  let home: string;
  let dir: string;
  const env = () => ({ PATH: process.env.PATH, HOME: home });

  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'the-loop-identity-cache-'));
    home = join(root, 'home');
    dir = join(root, 'state', 'probe-cache');
    mkdirSync(home);
    writeFileSync(join(home, '.gitconfig'), '[user]\n\tname = Ada\n\temail = ada@example.com\n');
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('keeps an identity for the same inputs', () => {
    const key = identityKey(env()) as string;
    expect(key).toMatch(/^[0-9a-f]{64}$/);
    writeIdentity(dir, key, { name: 'Ada', email: 'ada@example.com' });
    expect(readIdentity(dir, identityKey(env()) as string)).toEqual({
      name: 'Ada',
      email: 'ada@example.com',
    });
  });

  it('asks git again when a global config file changes or appears', () => {
    const key = identityKey(env()) as string;
    writeIdentity(dir, key, { name: 'Ada' });
    appendFileSync(join(home, '.gitconfig'), '\tname = Grace\n');
    const changed = identityKey(env()) as string;
    expect(changed).not.toBe(key);
    expect(readIdentity(dir, changed)).toBeUndefined();
    mkdirSync(join(home, '.config', 'git'), { recursive: true });
    writeFileSync(join(home, '.config', 'git', 'config'), '[user]\n\temail = g@example.com\n');
    expect(identityKey(env())).not.toBe(changed);
    expect(identityKey({ ...env(), HOME: root })).not.toBe(changed);
  });

  it('reads only a regular file: a FIFO or /dev/zero is not cached (git is asked), and never blocks', () => {
    const gitconfig = join(home, '.gitconfig');
    rmSync(gitconfig);
    execFileSync('mkfifo', [gitconfig]);
    // In a child with a deadline: a read that blocks on the FIFO fails the test instead of hanging it.
    const source = pathToFileURL(join(import.meta.dirname, '../../src/gateway/identity-cache.ts')).href;
    const child = spawnSync(
      process.execPath,
      [
        '--import',
        'tsx',
        '--input-type=module',
        '-e',
        `const { identityKey } = await import(${JSON.stringify(source)}); console.log(JSON.stringify(identityKey(JSON.parse(process.argv[1]))));`,
        JSON.stringify(env()),
      ],
      { encoding: 'utf8', timeout: 15_000 },
    );
    expect(child.signal).toBeNull();
    expect(child.stdout.trim()).toBe('null');
    rmSync(gitconfig);
    symlinkSync('/dev/zero', gitconfig);
    expect(identityKey(env())).toBeNull();
    expect(readConfigFile(gitconfig)).toBeNull();
  });

  it('follows a link to a regular file; refuses one over the size cap; an absent file is empty', () => {
    const gitconfig = join(home, '.gitconfig');
    const real = join(root, 'dotfiles-gitconfig');
    writeFileSync(real, '[user]\n\tname = Ada\n');
    rmSync(gitconfig);
    symlinkSync(real, gitconfig);
    expect(identityKey(env())).toMatch(/^[0-9a-f]{64}$/);
    writeFileSync(real, `[user]\n\tname = Ada\n#${'x'.repeat(1024 * 1024)}\n`);
    expect(identityKey(env())).toBeNull();
    expect(readConfigFile(join(home, 'absent'))).toBe('');
  });

  it('never caches a config that includes other files', () => {
    writeFileSync(join(home, '.gitconfig'), '[includeIf "gitdir:~/work/"]\n\tpath = ~/.gitconfig-work\n');
    expect(identityKey(env())).toBeNull();
    writeFileSync(join(home, '.gitconfig'), '[Include]\n\tpath = other\n');
    expect(identityKey(env())).toBeNull();
  });

  it('does not use an entry someone else could have written, or one that is not an identity', () => {
    const key = identityKey(env()) as string;
    writeIdentity(dir, key, { name: 'Ada' });
    chmodSync(join(dir, 'git-identity.json'), 0o666);
    expect(readIdentity(dir, key)).toBeUndefined();
    chmodSync(join(dir, 'git-identity.json'), 0o600);
    expect(readIdentity(dir, key)).toEqual({ name: 'Ada', email: undefined });
    writeFileSync(
      join(dir, 'git-identity.json'),
      JSON.stringify({ format: 'the-loop-git-identity-1', key, name: 1 }),
      {
        mode: 0o600,
      },
    );
    expect(readIdentity(dir, key)).toBeUndefined();
  });
});
