import { describe, expect, it } from 'vitest';
import {
  batchesOf,
  checkFile,
  entersDir,
  holdsTranscripts,
  isTranscriptName,
  retryDelayMs,
  segmentsBelow,
  type WatchRoot,
  watchRoots,
} from '../../src/ledger/watch-plan.js';

const base = {
  watch: [] as string[],
  configDir: '/etc/loop',
  home: '/home/me',
  watchClaude: true,
  claudeDirs: ['/home/me/.claude/projects'],
  dataDir: '/var/loop',
  homeEngines: ['claude'],
};

describe('watchRoots', () => {
  it("usage.watch (absolute, ~/…, relative to the config file), Claude Code's folder, the sessions' homes", () => {
    const { roots, errors } = watchRoots({ ...base, watch: ['/srv/t', '~/more', 'rel/dir', '~'] });
    expect(errors).toEqual([]);
    expect(watchRoots({ ...base, watch: ['~/more'] }).roots[0]).toEqual({
      dir: '/home/me/more',
      origin: 'config',
    });
    expect(roots).toEqual([
      { dir: '/srv/t', origin: 'config' },
      { dir: '/etc/loop/rel/dir', origin: 'config' },
      // ~ holds ~/more and ~/.claude/projects: they are not watched twice.
      { dir: '/home/me', origin: 'config' },
      { dir: '/var/loop/homes', origin: 'sessions', only: [['*', 'claude', 'projects']] },
    ]);
  });

  it('watchClaude: false leaves out Claude Code and the homes; the same dir once', () => {
    const { roots } = watchRoots({ ...base, watch: ['/a', '/a/', '/b'], watchClaude: false });
    expect(roots.map((r) => r.dir)).toEqual(['/a', '/b']);
  });

  it('a ~ path without HOME, or ~user, is an error naming the entry; the others are watched', () => {
    const { roots, errors } = watchRoots({ ...base, home: undefined, watch: ['~/x', '~bob/x', '/ok'] });
    expect(errors).toEqual([
      'usage.watch "~/x": ~ needs HOME (an absolute path), which is not set',
      'usage.watch "~bob/x": ~user is not supported',
    ]);
    expect(roots.map((r) => r.dir)).toContain('/ok');
  });

  it('no engine with Claude Code transcripts in a home of its own: no homes root', () => {
    const { roots } = watchRoots({ ...base, homeEngines: [] });
    expect(roots).toEqual([{ dir: '/home/me/.claude/projects', origin: 'claude' }]);
  });
});

describe('which directories are entered, which files are transcripts', () => {
  const homes: WatchRoot = { dir: '/d/homes', origin: 'sessions', only: [['*', 'claude', 'projects']] };
  const plain: WatchRoot = { dir: '/p', origin: 'config' };

  it('a plain root: everything below it', () => {
    expect(segmentsBelow(plain, '/p')).toEqual([]);
    expect(segmentsBelow(plain, '/p/a/b')).toEqual(['a', 'b']);
    expect(segmentsBelow(plain, '/other')).toBeUndefined();
    expect(segmentsBelow(plain, '/p2')).toBeUndefined();
    expect(entersDir(plain, ['a', 'b', 'c'])).toBe(true);
    expect(holdsTranscripts(plain, [])).toBe(true);
  });

  it('the homes: only <slug>/claude/projects and below, and transcripts only there', () => {
    expect(entersDir(homes, [])).toBe(true);
    expect(entersDir(homes, ['github-o-r-1'])).toBe(true);
    expect(entersDir(homes, ['github-o-r-1', 'claude'])).toBe(true);
    expect(entersDir(homes, ['github-o-r-1', 'codex'])).toBe(false);
    expect(entersDir(homes, ['github-o-r-1', 'claude', 'todos'])).toBe(false);
    expect(entersDir(homes, ['github-o-r-1', 'claude', 'projects', '-work', 'sub'])).toBe(true);
    expect(holdsTranscripts(homes, ['github-o-r-1', 'claude'])).toBe(false);
    expect(holdsTranscripts(homes, ['github-o-r-1', 'claude', 'projects', '-work'])).toBe(true);
  });

  it('transcript names', () => {
    expect(isTranscriptName('0d9c.jsonl')).toBe(true);
    expect(isTranscriptName('notes.txt')).toBe(false);
    expect(isTranscriptName('.x.jsonl')).toBe(false);
    expect(isTranscriptName('x.jsonl.tmp')).toBe(false);
  });
});

describe('checkFile', () => {
  const cursor = { inode: 7, size: 1000, offset: 1000 };

  it('new, replaced, truncated: import; the same size: nothing', () => {
    expect(checkFile(undefined, { ino: 7, size: 10 }, undefined)).toEqual({ kind: 'import' });
    expect(checkFile(cursor, { ino: 8, size: 2000 }, undefined)).toEqual({ kind: 'import' });
    expect(checkFile(cursor, { ino: 7, size: 10 }, undefined)).toEqual({ kind: 'import' });
    expect(checkFile(cursor, { ino: 7, size: 1000 }, undefined)).toEqual({ kind: 'unchanged' });
  });

  it('grown: look for a line end in what was added, past what was looked through already', () => {
    expect(checkFile(cursor, { ino: 7, size: 1500 }, undefined)).toEqual({
      kind: 'look',
      from: 1000,
      to: 1500,
    });
    const half = { inode: 7, size: 1200, offset: 900 };
    expect(checkFile(half, { ino: 7, size: 1500 }, undefined)).toEqual({
      kind: 'look',
      from: 1200,
      to: 1500,
    });
    expect(checkFile(half, { ino: 7, size: 1500 }, { inode: 7, offset: 900, to: 1400 })).toEqual({
      kind: 'look',
      from: 1400,
      to: 1500,
    });
    expect(checkFile(half, { ino: 7, size: 1400 }, { inode: 7, offset: 900, to: 1400 })).toEqual({
      kind: 'unchanged',
    });
    // What was looked at belongs to another cursor (the file was read since): from the cursor's size.
    expect(checkFile(half, { ino: 7, size: 1500 }, { inode: 7, offset: 800, to: 1400 })).toEqual({
      kind: 'look',
      from: 1200,
      to: 1500,
    });
  });
});

describe('batches and retries', () => {
  it('batches of about maxBytes, a file never split, order kept', () => {
    const jobs = [5, 5, 20, 1, 1, 1].map((bytes, i) => ({ path: `f${i}`, bytes }));
    expect(batchesOf(jobs, 10).map((b) => b.map((j) => j.path))).toEqual([
      ['f0', 'f1'],
      ['f2'],
      ['f3', 'f4', 'f5'],
    ]);
    expect(batchesOf([], 10)).toEqual([]);
  });

  it('a failed import is retried after 1 s, 2 s, 4 s… at most the recheck interval', () => {
    expect(retryDelayMs(0, 100, 30_000)).toBe(100);
    expect(retryDelayMs(1, 100, 30_000)).toBe(1000);
    expect(retryDelayMs(3, 100, 30_000)).toBe(4000);
    expect(retryDelayMs(50, 100, 30_000)).toBe(30_000);
  });
});
