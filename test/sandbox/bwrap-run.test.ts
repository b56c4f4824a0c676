import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { homedir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bwrapArgv } from '../../src/sandbox/bwrap.js';
import { detectBwrap, detectBwrapAsync } from '../../src/sandbox/detect.js';
import { credentialPaths, SYSTEM_HIDDEN_PATHS } from '../../src/sandbox/paths.js';
import { resolveSandboxSpec } from '../../src/sandbox/resolve.js';
import { BWRAP, bwrap, type ProbeResult, probe, REPO_READ_ONLY, SUITE, tempRoot } from './helpers.js';

// The real bubblewrap, real files, a real Unix socket and TCP server outside, node and git inside.
// Layout (all under one temp dir in /tmp, which the sandbox's private /tmp hides unless re-exposed):
//   home/         the operator's home, re-exposed read-only; its credential files hidden
//   data/         the-loop's data dir, hidden; inside it the session's state (read-only, with a
//                 writable hook file), the gateway's socket, and the session's worktree (writable)
const root = tempRoot('tl-sbx-run-');
const home = join(root, 'home');
const data = join(root, 'data');
const state = join(data, 'sessions', 's1');
const policy = join(state, 'policy.json');
const hooks = join(state, 'hooks.jsonl');
const ws = join(data, 'worktrees', 's1');
const sock = join(data, 'gw', 'gateway.sock');
const servers: Server[] = [];
let argv: string[] = [];
let tcpPort = 0;
const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, LANG: 'C', TL_CAPABILITY: 'cap-1234' };

const hello = (server: Server) => {
  server.on('connection', (c) => c.end('hello from outside\n'));
  servers.push(server);
  return server;
};

beforeAll(async () => {
  for (const dir of [
    join(home, '.ssh'),
    join(home, '.config/gh'),
    state,
    ws,
    join(data, 'gw'),
    join(data, 'worktrees/s2'),
  ]) {
    mkdirSync(dir, { recursive: true });
  }
  writeFileSync(join(home, '.ssh/id_ed25519'), '-----BEGIN OPENSSH PRIVATE KEY-----\n');
  writeFileSync(join(home, '.config/gh/hosts.yml'), 'oauth_token: gho_x\n');
  writeFileSync(join(home, '.netrc'), 'machine github.com password ghp_x\n');
  writeFileSync(join(home, '.bashrc'), 'visible\n');
  writeFileSync(join(data, 'secret.txt'), 'the ledger\n');
  writeFileSync(join(data, 'worktrees/s2/other.txt'), 'another session\n');
  writeFileSync(join(root, 'outside.txt'), 'not for the sandbox\n');
  writeFileSync(policy, '{"merge":"deny"}');
  writeFileSync(hooks, '');
  await new Promise<void>((r) => hello(createServer()).listen(sock, r));
  const tcp = hello(createServer());
  await new Promise<void>((r) => tcp.listen(0, '127.0.0.1', r));
  tcpPort = (tcp.address() as { port: number }).port;
  const { spec } = resolveSandboxSpec({
    hidden: [data, ...credentialPaths(home)],
    readOnly: [home, state, ...REPO_READ_ONLY],
    writable: [ws],
    writableFiles: [hooks],
    sockets: [sock],
    emptyFile: join(root, 'empty'),
    chdir: ws,
    newSession: true,
  });
  argv = bwrapArgv(spec);
});

afterAll(async () => {
  await Promise.all(servers.map((s) => new Promise<void>((r) => s.close(() => r()))));
  rmSync(root, { recursive: true, force: true });
});

const failed = (r: ProbeResult | undefined) => (r && !r.ok ? r.code : 'succeeded');
const value = (r: ProbeResult | undefined) => (r?.ok ? r.value : `failed: ${r?.code}`);

describe.skipIf(!bwrap.available)(SUITE, () => {
  it('is detected, with its version, once per process', () => {
    const found = detectBwrap();
    expect(found).toMatchObject({ available: true, path: BWRAP });
    expect(found.available && found.version).toMatch(/^\d+\.\d+/);
    expect(detectBwrap()).toBe(found);
    const missing = detectBwrap({ path: join(root, 'no-bwrap') });
    expect(missing).toMatchObject({ available: false, reason: expect.stringContaining('not an executable') });
    expect(!missing.available && missing.hint).toContain('apt-get install bubblewrap');
    // An executable that is not bubblewrap.
    expect(detectBwrap({ path: '/bin/false' }).available).toBe(false);
  });

  it('is detected without blocking to the same answers, into the same cache', async () => {
    // Other keys than the synchronous test's (the cache is by binary and PATH): probed afresh.
    const found = await detectBwrapAsync({ path: BWRAP, env: { PATH: '/usr/bin:/bin' } });
    expect(detectBwrap({ path: BWRAP, env: { PATH: '/usr/bin:/bin' } })).toBe(found);
    expect(found).toEqual(detectBwrap({ path: BWRAP, env: { PATH: '/usr/bin:/bin' }, fresh: true }));
    const missing = await detectBwrapAsync({ path: join(root, 'no-bwrap-async') });
    expect(missing).toMatchObject({ available: false, reason: expect.stringContaining('not an executable') });
    // Not bubblewrap: its --version fails (exit 1), whatever the trial says.
    const falsy = await detectBwrapAsync({ path: '/bin/false', env: { PATH: '/bin' } });
    expect(falsy).toEqual(detectBwrap({ path: '/bin/false', env: { PATH: '/bin' }, fresh: true }));
    expect(falsy).toMatchObject({
      available: false,
      reason: expect.stringContaining('--version failed: exit 1'),
    });
  });

  it('hides the data dir, other worktrees and the credential files; the rest of home reads', async () => {
    const r = await probe(
      argv,
      [
        { op: 'read', path: join(data, 'secret.txt') },
        { op: 'list', path: data },
        { op: 'list', path: join(data, 'worktrees') },
        { op: 'read', path: join(data, 'worktrees/s2/other.txt') },
        { op: 'read', path: join(home, '.ssh/id_ed25519') },
        { op: 'list', path: join(home, '.ssh') },
        { op: 'read', path: join(home, '.config/gh/hosts.yml') },
        { op: 'read', path: join(home, '.netrc') },
        { op: 'read', path: join(home, '.bashrc') },
      ],
      env,
    );
    expect(failed(r[0])).toBe('ENOENT');
    // Only the mount points of what is re-exposed: no secret, no empty file, no other session.
    expect(value(r[1])).toEqual(['gw', 'sessions', 'worktrees']);
    expect(value(r[2])).toEqual(['s1']);
    expect(failed(r[3])).toBe('ENOENT');
    expect(failed(r[4])).toBe('ENOENT');
    expect(value(r[5])).toEqual([]);
    expect(failed(r[6])).toBe('ENOENT');
    expect(value(r[7])).toBe('');
    expect(value(r[8])).toBe('visible\n');
  });

  it('re-exposes the policy read-only: it cannot be written, replaced, renamed or removed', async () => {
    const r = await probe(
      argv,
      [
        { op: 'read', path: policy },
        { op: 'write', path: policy, data: '{"merge":"allow"}' },
        { op: 'append', path: policy, data: 'x' },
        { op: 'write', path: join(state, 'policy.new'), data: '{}' },
        // `mv` from the writable workspace: a rename across mounts, then (what mv falls back to) a copy.
        { op: 'write', path: join(ws, 'evil.json'), data: '{"merge":"allow"}' },
        { op: 'rename', from: join(ws, 'evil.json'), to: policy },
        { op: 'rename', from: policy, to: join(state, 'moved.json') },
        { op: 'unlink', path: policy },
      ],
      env,
    );
    expect(value(r[0])).toBe('{"merge":"deny"}');
    expect(r.map((x) => (x.ok ? 'ok' : x.code))).toEqual([
      'ok',
      'EROFS',
      'EROFS',
      'EROFS',
      'ok',
      'EXDEV',
      'EROFS',
      'EROFS',
    ]);
    expect(readFileSync(policy, 'utf8')).toBe('{"merge":"deny"}');
  });

  it('lets the engine write its workspace and the hook file inside the read-only state dir', async () => {
    const r = await probe(
      argv,
      [
        { op: 'cwd' },
        { op: 'write', path: join(ws, 'new.txt'), data: 'made inside' },
        { op: 'mkdir', path: join(ws, 'sub') },
        { op: 'append', path: hooks, data: '{"event":"Stop"}\n' },
      ],
      env,
    );
    expect(r.map((x) => x.ok)).toEqual([true, true, true, true]);
    expect(value(r[0])).toBe(ws);
    expect(readFileSync(join(ws, 'new.txt'), 'utf8')).toBe('made inside');
    expect(existsSync(join(ws, 'sub'))).toBe(true);
    expect(readFileSync(hooks, 'utf8')).toBe('{"event":"Stop"}\n');
  });

  it('keeps the rest of / read-only, including the real home', async () => {
    const name = `tl-sbx-${randomUUID()}`;
    const targets = ['/usr', '/etc', '/var', homedir()].map((d) => join(d, name));
    try {
      const r = await probe(
        argv,
        targets.map((path) => ({ op: 'write', path, data: 'x' })),
        env,
      );
      for (const result of r) expect(failed(result)).toMatch(/^(EROFS|ENOENT)$/);
      expect(failed(r[0])).toBe('EROFS');
    } finally {
      for (const t of targets) rmSync(t, { force: true });
    }
  });

  it('gives the engine a private /tmp: nothing crosses either way except what is bound', async () => {
    const inside = `/tmp/tl-sbx-inside-${randomUUID()}`;
    const planted = `/tmp/tl-sbx-planted-${randomUUID()}`;
    writeFileSync(planted, 'outside');
    try {
      const r = await probe(
        argv,
        [
          { op: 'list', path: '/tmp' },
          { op: 'write', path: inside, data: 'inside' },
          { op: 'read', path: inside },
          { op: 'read', path: planted },
          { op: 'read', path: join(root, 'outside.txt') },
        ],
        env,
      );
      // Only the path down to the binds (and to the repository, when it lives under /tmp).
      const repoTop = REPO_READ_ONLY.map((p) => p.split('/')[2] ?? '');
      expect(value(r[0])).toEqual([basename(root), ...repoTop].sort());
      expect(value(r[2])).toBe('inside');
      expect(failed(r[3])).toBe('ENOENT');
      expect(failed(r[4])).toBe('ENOENT');
      expect(existsSync(inside)).toBe(false);
    } finally {
      rmSync(planted, { force: true });
      rmSync(inside, { force: true });
    }
  });

  it('reaches the gateway socket and loopback TCP outside', async () => {
    const r = await probe(
      argv,
      [
        { op: 'connect', path: sock },
        { op: 'tcp', port: tcpPort },
      ],
      env,
    );
    expect(r.map(value)).toEqual(['hello from outside', 'hello from outside']);
  });

  it('passes the environment through unchanged: bwrap adds only PWD', async () => {
    const r = await probe(argv, [{ op: 'env' }], env);
    // bwrap sets PWD to the directory it changed to (bwrap.c, after --chdir); nothing else.
    expect(value(r[0])).toEqual({ ...env, PWD: ws });
  });

  it('runs without capabilities: the mounts cannot be undone', async () => {
    const r = await probe(
      argv,
      [
        { op: 'status' },
        { op: 'exec', argv: ['umount', '-l', data] },
        { op: 'exec', argv: ['umount', '-l', join(home, '.ssh')] },
        { op: 'read', path: join(data, 'secret.txt') },
        { op: 'read', path: join(home, '.ssh/id_ed25519') },
      ],
      env,
    );
    expect(value(r[0])).toMatchObject({
      CapEff: '0000000000000000',
      CapPrm: '0000000000000000',
      NoNewPrivs: '1',
    });
    expect(value(r[1])).toMatchObject({ status: 32 });
    expect(value(r[2])).toMatchObject({ status: 32 });
    expect(failed(r[3])).toBe('ENOENT');
    expect(failed(r[4])).toBe('ENOENT');
  });

  it('runs node and git inside: a commit in the writable workspace', async () => {
    const gitEnv = {
      ...env,
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_AUTHOR_NAME: 'A',
      GIT_AUTHOR_EMAIL: 'a@example.com',
      GIT_COMMITTER_NAME: 'A',
      GIT_COMMITTER_EMAIL: 'a@example.com',
    };
    const git = (...args: string[]) => ({ op: 'exec', argv: ['git', ...args], cwd: ws });
    const r = await probe(
      argv,
      [
        git('init', '-q', '-b', 'main'),
        { op: 'write', path: join(ws, 'README.md'), data: 'hi\n' },
        git('add', 'README.md'),
        git('commit', '-q', '-m', 'made inside the sandbox'),
        { op: 'exec', argv: [process.execPath, '-e', 'process.stdout.write(String(1 + 1))'] },
      ],
      gitEnv,
    );
    for (const i of [0, 2, 3]) expect(value(r[i])).toMatchObject({ status: 0 });
    expect(value(r[4])).toMatchObject({ status: 0, stdout: '2' });
    const log = execFileSync('git', ['-C', ws, 'log', '--format=%s'], { encoding: 'utf8' });
    expect(log.trim()).toBe('made inside the sandbox');
  });

  it('hides /run (daemon sockets, the system bus) and the files only root may read', async () => {
    const { spec } = resolveSandboxSpec({
      hidden: [...SYSTEM_HIDDEN_PATHS],
      readOnly: REPO_READ_ONLY,
      emptyFile: join(root, 'empty'),
      newSession: true,
    });
    // /var/run is a symlink to /run here: one tmpfs.
    expect(spec.hiddenDirs).toEqual(['/run']);
    const r = await probe(
      bwrapArgv(spec),
      [
        { op: 'list', path: '/run' },
        { op: 'list', path: '/var/run' },
        { op: 'read', path: '/etc/shadow' },
        { op: 'read', path: '/etc/passwd' },
      ],
      env,
    );
    expect(value(r[0])).toEqual([]);
    expect(value(r[1])).toEqual([]);
    expect(value(r[2])).toBe('');
    expect(String(value(r[3]))).toContain('root:');
  });

  it('hides a directory inside the writable workspace, and the workspace stays writable around it', async () => {
    const ws2 = join(root, 'ws2');
    mkdirSync(join(ws2, '.secrets'), { recursive: true });
    writeFileSync(join(ws2, '.secrets', 'key'), 'k');
    const { spec } = resolveSandboxSpec({
      writable: [ws2],
      readOnly: REPO_READ_ONLY,
      hidden: [join(ws2, '.secrets')],
      newSession: true,
    });
    const r = await probe(
      bwrapArgv(spec),
      [
        { op: 'read', path: join(ws2, '.secrets', 'key') },
        { op: 'write', path: join(ws2, 'made.txt'), data: 'x' },
        // The mount point cannot be removed or renamed away from under the hidden content.
        { op: 'rename', from: join(ws2, '.secrets'), to: join(ws2, 'moved') },
      ],
      env,
    );
    expect(failed(r[0])).toBe('ENOENT');
    expect(r[1]?.ok).toBe(true);
    expect(failed(r[2])).toBe('EBUSY');
    expect(readFileSync(join(ws2, '.secrets', 'key'), 'utf8')).toBe('k');
  });
});
