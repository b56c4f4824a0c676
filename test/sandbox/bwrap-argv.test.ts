import { describe, expect, it } from 'vitest';
import { bwrapArgv, planMounts, type SandboxSpec } from '../../src/sandbox/bwrap.js';
import { prng, thrown } from '../helpers/check.js';

// Pure: the argv bwrap gets, from plain data. The real bwrap runs in bwrap-run.test.ts.
const none: SandboxSpec = {
  writable: [],
  readOnly: [],
  writableFiles: [],
  sockets: [],
  hiddenDirs: [],
  hiddenFiles: [],
  newSession: false,
};
const spec = (over: Partial<SandboxSpec>): SandboxSpec => ({ ...none, ...over });
/** The mount steps as `op path` strings. */
const steps = (s: SandboxSpec) => planMounts(s).map((m) => `${m.args[0]} ${m.path}`);

describe('bwrapArgv: the frame', () => {
  it('binds / read-only, mounts a fresh /dev and /proc, drops capabilities and ends with --', () => {
    const argv = bwrapArgv(none);
    expect(argv.slice(0, 7)).toEqual(['--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc']);
    expect(argv.at(-1)).toBe('--');
    expect(argv.indexOf('--')).toBe(argv.length - 1);
    for (const flag of [
      '--unshare-pid',
      '--unshare-ipc',
      '--unshare-uts',
      '--unshare-cgroup-try',
      '--die-with-parent',
    ]) {
      expect(argv).toContain(flag);
    }
    expect(argv.join(' ')).toContain('--cap-drop ALL');
    // The network stays shared; no terminal session is split off unless asked.
    expect(argv.filter((a) => a.startsWith('--unshare-net') || a === '--unshare-all')).toEqual([]);
    expect(argv).not.toContain('--new-session');
    // A private /tmp by default.
    expect(argv.join(' ')).toContain('--tmpfs /tmp');
  });

  it('adds --new-session, --chdir, and leaves the PID namespace or /tmp shared only when told', () => {
    const argv = bwrapArgv(
      spec({ newSession: true, chdir: '/work/ws', unsharePid: false, privateTmp: false }),
    );
    expect(argv).toContain('--new-session');
    expect(argv.join(' ')).toContain('--chdir /work/ws');
    expect(argv).not.toContain('--unshare-pid');
    expect(argv).not.toContain('/tmp');
  });

  it('insists that the caller decides newSession', () => {
    const error = thrown(() => bwrapArgv({ ...none, newSession: undefined as unknown as boolean }));
    expect(error.code).toBe('internal');
  });
});

describe('planMounts: the deepest path wins', () => {
  it('puts the private /tmp before what is bound under it', () => {
    expect(steps(spec({ writable: ['/tmp/tl-1/ws'], readOnly: ['/tmp/tl-1/state'] }))).toEqual([
      '--tmpfs /tmp',
      '--ro-bind /tmp/tl-1/state',
      '--bind /tmp/tl-1/ws',
    ]);
  });

  it('re-exposes the workspace and the state dir under the hidden data dir, and a writable file inside the state dir', () => {
    const s = spec({
      hiddenDirs: ['/var/lib/loop'],
      writable: ['/var/lib/loop/worktrees/a'],
      readOnly: ['/var/lib/loop/sessions/a'],
      writableFiles: ['/var/lib/loop/sessions/a/hooks.jsonl'],
      sockets: ['/var/lib/loop/gateway.sock'],
      privateTmp: false,
    });
    expect(steps(s)).toEqual([
      '--tmpfs /var/lib/loop',
      '--ro-bind /var/lib/loop/gateway.sock',
      '--ro-bind /var/lib/loop/sessions/a',
      '--bind /var/lib/loop/worktrees/a',
      '--bind /var/lib/loop/sessions/a/hooks.jsonl',
    ]);
    const argv = bwrapArgv(s);
    expect(argv.indexOf('/var/lib/loop')).toBeLessThan(argv.indexOf('/var/lib/loop/worktrees/a'));
    // Each bind names its path as source and destination.
    const at = argv.indexOf('/var/lib/loop/sessions/a/hooks.jsonl');
    expect(argv.slice(at - 1, at + 2)).toEqual([
      '--bind',
      '/var/lib/loop/sessions/a/hooks.jsonl',
      '/var/lib/loop/sessions/a/hooks.jsonl',
    ]);
  });

  it('hides a directory inside a writable one, and re-exposes a writable one inside a hidden one', () => {
    expect(
      steps(
        spec({ writable: ['/h/ws', '/h/.claude'], hiddenDirs: ['/h/ws/.secrets', '/h'], privateTmp: false }),
      ),
    ).toEqual(['--tmpfs /h', '--bind /h/.claude', '--bind /h/ws', '--tmpfs /h/ws/.secrets']);
  });

  it('shows hidden files as the empty file, read-only', () => {
    const s = spec({ hiddenFiles: ['/root/.netrc'], emptyFile: '/var/lib/loop/empty', privateTmp: false });
    const argv = bwrapArgv(s);
    const at = argv.indexOf('/root/.netrc');
    expect(argv.slice(at - 2, at + 1)).toEqual(['--ro-bind', '/var/lib/loop/empty', '/root/.netrc']);
    expect(thrown(() => bwrapArgv({ ...s, emptyFile: undefined })).code).toBe('internal');
  });

  it('drops steps that change nothing: hidden under hidden, read-only under read-only or /, writable under writable', () => {
    const s = spec({
      hiddenDirs: ['/d', '/d/other-worktree', '/tmp/x'],
      hiddenFiles: ['/d/creds'],
      emptyFile: '/e',
      readOnly: ['/usr/lib/node_modules', '/d/s', '/d/s/inner'],
      writable: ['/w', '/w/sub'],
      writableFiles: ['/w/sub/f'],
      sockets: ['/run-ish/sock'],
    });
    expect(steps(s)).toEqual(['--tmpfs /d', '--tmpfs /tmp', '--bind /w', '--ro-bind /d/s']);
  });

  it('keeps a hidden path under a hidden one when an exposure lies between them', () => {
    expect(steps(spec({ hiddenDirs: ['/d', '/d/s/keys'], readOnly: ['/d/s'], privateTmp: false }))).toEqual([
      '--tmpfs /d',
      '--ro-bind /d/s',
      '--tmpfs /d/s/keys',
    ]);
  });

  it('gives the same argv whatever the order of the lists', () => {
    const paths = ['/a', '/a/b', '/a/b/c', '/a/b/c/d', '/a/x', '/a/x/y', '/b', '/b/c', '/tmp/t', '/tmp/t/u'];
    const random = prng(7);
    // A fixed kind per path (by depth), the paths in the given order.
    const assign = (order: string[]): SandboxSpec => {
      const lists = { hiddenDirs: [] as string[], writable: [] as string[], readOnly: [] as string[] };
      for (const p of order) {
        const depth = p.split('/').length;
        (depth % 3 === 0 ? lists.hiddenDirs : depth % 3 === 1 ? lists.writable : lists.readOnly).push(p);
      }
      return spec(lists);
    };
    const first = bwrapArgv(assign(paths));
    for (let i = 0; i < 20; i++) {
      const shuffled = [...paths].sort(() => random() - 0.5);
      expect(bwrapArgv(assign(shuffled))).toEqual(first);
    }
    // Every step comes after every step on an ancestor of its path.
    const order = planMounts(assign(paths)).map((m) => m.path);
    expect(order.length).toBeGreaterThan(5);
    for (const [i, p] of order.entries()) {
      for (const q of order.slice(i + 1)) expect(p.startsWith(`${q}/`)).toBe(false);
    }
  });

  it('merges duplicates with the same access, and refuses a path with two', () => {
    expect(steps(spec({ writable: ['/w', '/w'], writableFiles: [], privateTmp: false }))).toEqual([
      '--bind /w',
    ]);
    expect(steps(spec({ hiddenDirs: ['/tmp'] }))).toEqual(['--tmpfs /tmp']);
    for (const s of [
      spec({ hiddenDirs: ['/x'], writable: ['/x'] }),
      spec({ readOnly: ['/x'], writable: ['/x'] }),
      spec({ hiddenDirs: ['/x'], hiddenFiles: ['/x'], emptyFile: '/e' }),
      spec({ writable: ['/tmp'] }),
    ]) {
      const error = thrown(() => bwrapArgv(s));
      expect(error.code).toBe('config-invalid');
      expect(error.message).toMatch(/is both in \w+ and in \w+/);
    }
    // Without a private /tmp, the real one may be writable.
    expect(steps(spec({ writable: ['/tmp'], privateTmp: false }))).toEqual(['--bind /tmp']);
  });

  it('refuses a path inside a file', () => {
    const error = thrown(() =>
      bwrapArgv(spec({ writableFiles: ['/s/f'], writable: ['/s/f/x'], readOnly: ['/s'] })),
    );
    expect(error.message).toContain('/s/f/x is inside /s/f, a file');
  });
});

describe('bwrapArgv: hostile paths', () => {
  const hostile = [
    '',
    'relative/path',
    './ws',
    '-rf',
    '--bind',
    '/a/../etc',
    '/a/..',
    '/a/./b',
    '/a//b',
    '/a/',
    '/a\0b',
    '/a\nb',
    '/a\rb',
    '/a\tb',
    '/a\u001b[2Jb',
    '/a\u007fb',
    '/',
    '/proc',
    '/proc/1/root',
    '/dev',
    '/dev/sda',
    `/${'x'.repeat(5000)}`,
  ];
  for (const list of [
    'writable',
    'readOnly',
    'writableFiles',
    'sockets',
    'hiddenDirs',
    'hiddenFiles',
  ] as const) {
    it(`rejects each hostile path in ${list} with config-invalid`, () => {
      for (const bad of hostile) {
        const error = thrown(() => bwrapArgv(spec({ [list]: [bad], emptyFile: '/e' })));
        expect(error.code, JSON.stringify(bad)).toBe('config-invalid');
      }
    });
  }

  it('rejects a hostile chdir or emptyFile, and a list that is not a list', () => {
    for (const bad of ['ws', '/a/../b', '/a\nb']) {
      expect(thrown(() => bwrapArgv(spec({ chdir: bad }))).code).toBe('config-invalid');
      expect(thrown(() => bwrapArgv(spec({ hiddenFiles: ['/f'], emptyFile: bad }))).code).toBe(
        'config-invalid',
      );
    }
    expect(thrown(() => bwrapArgv(spec({ writable: '/w' as unknown as string[] }))).code).toBe('internal');
  });

  it('keeps odd but plain paths as single arguments', () => {
    const odd = ['/w/with space', '/w/-dash', '/w/ünï', '/w/$HOME', '/w/a;b', "/w/'q'"];
    const argv = bwrapArgv(spec({ writable: odd, privateTmp: false }));
    for (const p of odd) expect(argv.filter((a) => a === p)).toHaveLength(2);
  });
});
