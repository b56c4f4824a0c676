/**
 * Where the data dir's Unix sockets live: short by construction, whatever HOME, the repository's
 * name and the issue number are (a socket address holds 107 bytes on Linux, 103 on macOS); in a
 * directory of ours that is refused when it is anyone else's (/tmp is shared).
 */
import {
  chmodSync,
  chownSync,
  mkdirSync,
  mkdtempSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { stateDirFor, stateHome } from '../../../src/config/data-dir.js';
import { configSchema } from '../../../src/config/schema.js';
import { parseWorkItem, workItemSlug } from '../../../src/core/work-item.js';
import { gatewaySocketPath } from '../../../src/gateway/listen.js';
import {
  currentUid,
  ensurePrivateDirs,
  ensureRuntimeDir,
  privateDirProblem,
  runtimeDirIn,
  runtimeDirOf,
  runtimeRoot,
} from '../../../src/os/runtime-dir.js';
import { keysSocketPath } from '../../../src/runners/process/keys-socket.js';

/** The most a socket path may be on every platform the-loop runs on (macOS: 104 with the NUL). */
const PORTABLE_MAX = 103;

describe('socket paths from the defaults', () => {
  // A default install: the config in a repository's work tree, state under ~/.local/state.
  const HOME = '/home/a-fairly-long-user-name';
  const repoDir = `${HOME}/src/a-very-long-repository-name-for-payments-and-more`;
  const configDir = join(repoDir, '.the-loop');
  const dataDir = stateDirFor(stateHome({ HOME }), configDir, repoDir);
  const slug = workItemSlug(
    parseWorkItem('github:an-organisation-with-a-long-name/a-very-long-repository-name#123456789'),
  );
  // The largest uid there is (2^32 - 2): the longest `the-loop-<uid>`.
  const WIDEST_UID = 4294967294;

  it('keeps the keys and gh sockets well under 104 bytes where the data dir path would not', () => {
    expect(slug).toHaveLength(60);
    const before = join(dataDir, 'sessions', slug, 'keys.sock');
    const beforeGateway = join(dataDir, 'gateway', 'gh.sock');
    const dir = runtimeDirIn(runtimeRoot({ HOME }, WIDEST_UID), dataDir);
    const keys = keysSocketPath(dir, slug);
    const gateway = gatewaySocketPath(configSchema.parse({}), dataDir, { HOME });
    console.log(
      `socket paths, worst case (HOME=${HOME}, 60-character slug): keys ${Buffer.byteLength(before)} → ${Buffer.byteLength(keys)} bytes, gh ${Buffer.byteLength(beforeGateway)} → ${Buffer.byteLength(gateway)} bytes`,
    );
    // What the data dir gave: a keys socket no platform can bind.
    expect(Buffer.byteLength(before)).toBeGreaterThan(107);
    expect(keys).toMatch(/^\/tmp\/the-loop-4294967294\/[0-9a-f]{8}\/[0-9a-f]{10}\.sock$/);
    expect(Buffer.byteLength(keys)).toBeLessThanOrEqual(64);
    expect(gateway).toMatch(new RegExp(`^/tmp/the-loop-${currentUid()}/[0-9a-f]{8}/gateway/gh\\.sock$`));
    expect(Buffer.byteLength(gateway)).toBeLessThanOrEqual(64);
  });

  it('does not grow with HOME, the repository or the slug', () => {
    const root = runtimeRoot({ HOME: `/home/${'x'.repeat(200)}` }, WIDEST_UID);
    const lengths = [dataDir, `${dataDir}-${'y'.repeat(300)}`].flatMap((d) =>
      [slug, 'github-o-r-1-0123456789'].map((s) =>
        Buffer.byteLength(keysSocketPath(runtimeDirIn(root, d), s)),
      ),
    );
    expect(new Set(lengths)).toEqual(
      new Set([Buffer.byteLength(keysSocketPath(runtimeDirIn(root, dataDir), slug))]),
    );
  });

  it("fits macOS's per-user TMPDIR too, and ignores a relative one", () => {
    const mac = '/var/folders/zz/zyxvpxvq6csfxvn_n0000000000000/T/';
    const path = keysSocketPath(runtimeDirIn(runtimeRoot({ TMPDIR: mac }, WIDEST_UID), dataDir), slug);
    expect(path.startsWith('/var/folders/zz/zyxvpxvq6csfxvn_n0000000000000/T/the-loop-4294967294/')).toBe(
      true,
    );
    expect(Buffer.byteLength(path)).toBeLessThanOrEqual(PORTABLE_MAX);
    expect(runtimeRoot({ TMPDIR: 'tmp' }, 501)).toBe('/tmp/the-loop-501');
  });

  it('gives each data dir and each session its own socket, the same for the daemon and the CLI', () => {
    const a = runtimeDirIn('/tmp/the-loop-1', '/srv/a');
    expect(runtimeDirIn('/tmp/the-loop-1', '/srv/a')).toBe(a);
    expect(runtimeDirIn('/tmp/the-loop-1', '/srv/b')).not.toBe(a);
    expect(keysSocketPath(a, 'github-o-r-1-0123456789')).not.toBe(
      keysSocketPath(a, 'github-o-r-2-0123456789'),
    );
    expect(() => keysSocketPath(a, '../escape')).toThrow(/unsafe slug/);
  });
});

describe('the runtime directory in a shared /tmp', () => {
  let root: string;
  beforeEach(() => {
    root = realpathSync(mkdtempSync(join(tmpdir(), 'tl-rt-')));
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('is created 0700 whatever the umask, and found again', () => {
    const env = { TMPDIR: root };
    const old = process.umask(0o077 ^ 0o777);
    let dir: string;
    try {
      dir = ensureRuntimeDir(env, join(root, 'data'));
    } finally {
      process.umask(old);
    }
    expect(dir).toBe(runtimeDirOf(env, join(root, 'data')));
    expect(privateDirProblem(dirname(dir))).toBeNull();
    expect(privateDirProblem(dir)).toBeNull();
    expect(ensureRuntimeDir(env, join(root, 'data'))).toBe(dir);
  });

  it('refuses a symlink, a file, an open mode or someone else’s directory, and never uses it', () => {
    const target = join(root, 'elsewhere');
    mkdirSync(target, { mode: 0o700 });
    const link = join(root, 'link');
    symlinkSync(target, link);
    expect(() => ensurePrivateDirs([link])).toThrow(
      /refusing the runtime directory .*link: .* is a symbolic link/,
    );
    const file = join(root, 'file');
    writeFileSync(file, '');
    expect(() => ensurePrivateDirs([file])).toThrow(/is not a directory/);
    const open = join(root, 'open');
    mkdirSync(open);
    chmodSync(open, 0o755);
    expect(() => ensurePrivateDirs([open])).toThrow(/has mode 755, not 700/);
    expect(privateDirProblem(join(root, 'nothing'))).toBe('missing');
  });

  it.skipIf(currentUid() !== 0)('refuses a directory another user made first (as root: chown)', () => {
    const env = { TMPDIR: root };
    const planted = runtimeRoot(env, currentUid());
    mkdirSync(planted, { mode: 0o700 });
    chownSync(planted, 4242, 4242);
    expect(() => ensureRuntimeDir(env, join(root, 'data'))).toThrow(/belongs to another user \(uid 4242\)/);
  });
});
