import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  CREDENTIAL_PATHS,
  credentialPaths,
  expandPath,
  normalizePath,
  runtimeHiddenPaths,
} from '../../src/sandbox/paths.js';
import { ensureEmptyFile, resolverConfigDir, resolveSandboxSpec } from '../../src/sandbox/resolve.js';
import { thrown } from '../helpers/check.js';

describe('expandPath', () => {
  const env = { HOME: '/home/op', CODEX_HOME: '/srv/codex/', EMPTY: '', REL: 'rel', DOTS: '/a/../b' };

  it('expands ~, $VAR and braced variables, and normalises the result', () => {
    expect(expandPath('~', env)).toBe('/home/op');
    expect(expandPath('~/.claude', env)).toBe('/home/op/.claude');
    expect(expandPath('$CODEX_HOME', env)).toBe('/srv/codex');
    expect(expandPath(`\${CODEX_HOME}/sessions//x/`, env)).toBe('/srv/codex/sessions/x');
    expect(expandPath('$HOME/a/./b', env)).toBe('/home/op/a/b');
    expect(expandPath('/plain/path', env)).toBe('/plain/path');
    // Only a leading ~ is special.
    expect(expandPath('/a/~/b', env)).toBe('/a/~/b');
  });

  it('says which variable is unset, or skips the entry when asked', () => {
    const error = thrown(() => expandPath('$NOPE/x', env));
    expect(error.code).toBe('config-invalid');
    expect(error.message).toContain('NOPE is not set');
    expect(thrown(() => expandPath(`\${EMPTY}/x`, env)).message).toContain('EMPTY is not set');
    expect(thrown(() => expandPath('~/x', {})).message).toContain('HOME');
    expect(expandPath('$NOPE/x', env, { unset: 'skip' })).toBeNull();
    expect(expandPath('~/x', {}, { unset: 'skip' })).toBeNull();
  });

  it('refuses what is not a plain path', () => {
    for (const bad of [
      '~op/x',
      '$',
      '/a/$',
      `/a/\${HOME`,
      `\${}`,
      '$1',
      'rel/x',
      '$REL/x',
      '$DOTS',
      '/a/../b',
      '',
      '/a\nb',
    ]) {
      expect(thrown(() => expandPath(bad, env)).code, bad).toBe('config-invalid');
    }
  });
});

describe('normalizePath and the default lists', () => {
  it('normalises slashes and dots, refuses .. and control characters', () => {
    expect(normalizePath('//a//b/./c/')).toBe('/a/b/c');
    expect(normalizePath('/')).toBe('/');
    for (const bad of ['a', '/a/../b', '/a\0', '/a\n']) {
      expect(thrown(() => normalizePath(bad)).code).toBe('config-invalid');
    }
  });

  it("lists the operator's credential paths under a home", () => {
    const paths = credentialPaths('/home/op/');
    expect(paths).toHaveLength(CREDENTIAL_PATHS.length);
    for (const p of [
      '.ssh',
      '.config/gh',
      '.aws',
      '.config/gcloud',
      '.netrc',
      '.docker',
      '.npmrc',
      '.git-credentials',
      '.config/git/credentials',
    ]) {
      expect(paths).toContain(`/home/op/${p}`);
    }
  });

  it('finds agent sockets and runtime dirs in an environment', () => {
    const found = runtimeHiddenPaths(
      {
        SSH_AUTH_SOCK: '/tmp/ssh-x/agent.1',
        XDG_RUNTIME_DIR: '/run/user/1000',
        DBUS_SESSION_BUS_ADDRESS: 'unix:path=/run/user/1000/bus,guid=1',
        DOCKER_HOST: 'unix:///home/op/docker.sock',
        TMUX_TMPDIR: '/var/tmux',
      },
      1000,
    );
    expect(found).toEqual([
      '/tmp/ssh-x/agent.1',
      '/run/user/1000',
      '/run/user/1000/bus',
      '/home/op/docker.sock',
      '/var/tmux/tmux-1000',
    ]);
    expect(runtimeHiddenPaths({ SSH_AUTH_SOCK: 'relative', DOCKER_HOST: 'tcp://x:1' }, 0)).toEqual([
      '/tmp/tmux-0',
    ]);
  });
});

describe('resolveSandboxSpec (real files)', () => {
  const root = mkdtempSync(join(tmpdir(), 'tl-sbx-res-'));
  let server: Server | undefined;
  afterAll(async () => {
    await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
    rmSync(root, { recursive: true, force: true });
  });

  it('resolves symlinks, classifies hidden paths, skips what is missing and reports it', async () => {
    mkdirSync(join(root, 'real-ws'));
    symlinkSync(join(root, 'real-ws'), join(root, 'ws'));
    mkdirSync(join(root, 'home/.ssh'), { recursive: true });
    writeFileSync(join(root, 'home/.netrc'), 'machine x password y');
    writeFileSync(join(root, 'hooks.jsonl'), '');
    const sock = join(root, 'g.sock');
    server = createServer();
    await new Promise<void>((r) => server?.listen(sock, r));
    const { spec, skipped } = resolveSandboxSpec({
      writable: [join(root, 'ws'), join(root, 'missing')],
      readOnly: [`${root}/`],
      writableFiles: [join(root, 'hooks.jsonl')],
      sockets: [sock],
      hidden: [join(root, 'home/.ssh'), join(root, 'home/.netrc'), join(root, 'home/.aws')],
      emptyFile: join(root, 'empty'),
      chdir: join(root, 'ws'),
      newSession: false,
    });
    expect(spec).toMatchObject({
      writable: [join(root, 'real-ws')],
      readOnly: [root],
      hiddenDirs: [join(root, 'home/.ssh')],
      hiddenFiles: [join(root, 'home/.netrc')],
      emptyFile: join(root, 'empty'),
      chdir: join(root, 'real-ws'),
    });
    expect(skipped).toEqual([
      { path: join(root, 'home/.aws'), list: 'hidden' },
      { path: join(root, 'missing'), list: 'writable' },
    ]);
    expect(statSync(join(root, 'empty')).size).toBe(0);
  });

  it('fails clearly on a missing writable file, socket or working directory', () => {
    const base = { newSession: true } as const;
    expect(
      thrown(() => resolveSandboxSpec({ ...base, writableFiles: [join(root, 'nope')] })).message,
    ).toContain('does not exist');
    expect(
      thrown(() => resolveSandboxSpec({ ...base, sockets: [join(root, 'hooks.jsonl')] })).message,
    ).toContain('wrong type');
    expect(thrown(() => resolveSandboxSpec({ ...base, chdir: join(root, 'nope') })).code).toBe('cwd-missing');
    expect(
      thrown(() => resolveSandboxSpec({ ...base, hidden: [join(root, 'home/.netrc')] })).message,
    ).toContain('emptyFile');
  });

  it('keeps the empty file empty and refuses a symlink in its place', () => {
    const empty = join(root, 'empty2');
    writeFileSync(empty, 'leaked');
    expect(ensureEmptyFile(empty)).toBe(empty);
    expect(readFileSync(empty, 'utf8')).toBe('');
    symlinkSync(join(root, 'home/.netrc'), join(root, 'empty3'));
    expect(thrown(() => ensureEmptyFile(join(root, 'empty3'))).code).toBe('internal');
    expect(readFileSync(join(root, 'home/.netrc'), 'utf8')).toBe('machine x password y');
  });

  it('finds the directory the resolver configuration really lives in', () => {
    mkdirSync(join(root, 'run/resolve'), { recursive: true });
    writeFileSync(join(root, 'run/resolve/stub-resolv.conf'), 'nameserver 127.0.0.53\n');
    symlinkSync(join(root, 'run/resolve/stub-resolv.conf'), join(root, 'resolv.conf'));
    expect(resolverConfigDir(join(root, 'resolv.conf'))).toBe(join(root, 'run/resolve'));
    expect(resolverConfigDir(join(root, 'no-resolv.conf'))).toBeNull();
  });
});
