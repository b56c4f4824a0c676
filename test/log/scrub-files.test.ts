import { execFileSync } from 'node:child_process';
import {
  appendFileSync,
  chmodSync,
  closeSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createSessionScrub } from '../../src/guard/session-scrub.js';
import { createLogger, memorySink } from '../../src/log/logger.js';
import { scrubFilesInPlace } from '../../src/log/scrub-files.js';
import { reversed } from '../../src/log/secret-forms.js';
import { SecretScrubber } from '../../src/log/secret-scrubber.js';

const KEY = 'sk-ant-api03-canary-Qw3rTy8uIo2pAs5dFg';
const roots: string[] = [];
const scratch = () => {
  const root = mkdtempSync(join(tmpdir(), 'the-loop-scrub-files-'));
  roots.push(root);
  return root;
};
afterAll(() => {
  for (const root of roots) rmSync(root, { recursive: true, force: true });
});
const scrubber = () => {
  const s = new SecretScrubber();
  s.add(KEY);
  return s;
};
const record = (text: string) =>
  `${JSON.stringify({ type: 'assistant', message: { content: [{ type: 'text', text }] } })}\n`;

describe('scrubFilesInPlace', () => {
  it('masks every form in place: same size, same offsets, every line still JSON', () => {
    const root = scratch();
    const dir = join(root, 'projects', '-work');
    mkdirSync(dir, { recursive: true });
    const file = join(dir, 'session.jsonl');
    const lines = [
      record('hello'),
      record(`the key is ${KEY}`),
      record(`truncated: ${KEY.slice(0, 17)}…`),
      record(`reversed: ${reversed(KEY)}`),
      record(`base64: ${Buffer.from(`K=${KEY}\n`).toString('base64')}`),
      record('bye'),
    ];
    writeFileSync(file, lines.join(''));
    const before = statSync(file).size;
    const report = scrubFilesInPlace([root], scrubber());
    expect(report).toMatchObject({ scanned: 1, masked: [{ path: file, ranges: 4 }], skipped: [] });
    const after = readFileSync(file, 'utf8');
    expect(statSync(file).size).toBe(before);
    expect(after).not.toContain(KEY.slice(0, 12));
    expect(after).not.toContain(reversed(KEY).slice(0, 12));
    const parsed = after
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l));
    expect(parsed).toHaveLength(6);
    // Lines without a secret are byte for byte what they were, where they were.
    expect(after.startsWith(lines[0] as string)).toBe(true);
    expect(after.endsWith(lines[5] as string)).toBe(true);
    expect(parsed[1].message.content[0].text).toMatch(/^the key is \*{38}$/);
  });

  it('keeps JSON valid around a key with a quote and a backslash in it', () => {
    const odd = 'odd"key\\with-0123456789-escapes';
    const s = new SecretScrubber();
    s.add(odd);
    const root = scratch();
    const file = join(root, 'events.jsonl');
    const lines = [
      record(`full ${odd}`),
      record(`part ${odd.slice(2, 20)}`),
      record(`tail ${odd.slice(-14)}`),
    ];
    writeFileSync(file, lines.join(''));
    scrubFilesInPlace([root], s);
    const after = readFileSync(file, 'utf8');
    const texts = after
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l).message.content[0].text as string);
    expect(texts.map((t) => t.split(' ')[0])).toEqual(['full', 'part', 'tail']);
    for (const t of texts) expect(t).not.toMatch(/0123456789/);
  });

  it('does not disturb a writer appending to the file', () => {
    const root = scratch();
    const file = join(root, 'transcript.jsonl');
    const fd = openSync(file, 'a');
    try {
      writeSync(fd, record(`key ${KEY}`));
      scrubFilesInPlace([root], scrubber());
      writeSync(fd, record('after the scrub'));
    } finally {
      closeSync(fd);
    }
    const lines = readFileSync(file, 'utf8').split('\n').filter(Boolean);
    expect(lines.map((l) => JSON.parse(l).message.content[0].text)).toEqual([
      `key ${'*'.repeat(KEY.length)}`,
      'after the scrub',
    ]);
  });

  it('follows no symlink, touches no FIFO, leaves skipped names alone and reports large files', () => {
    const root = scratch();
    const outside = join(scratch(), 'outside.txt');
    writeFileSync(outside, KEY);
    const dir = join(root, 'home');
    mkdirSync(dir);
    symlinkSync(outside, join(dir, 'link.txt'));
    symlinkSync(root, join(dir, 'loop'));
    execFileSync('mkfifo', [join(dir, 'fifo')]);
    writeFileSync(join(dir, 'env-launch.json'), KEY);
    writeFileSync(join(dir, 'big.log'), `${'x'.repeat(2000)}${KEY}`);
    const report = scrubFilesInPlace([root, join(root, 'missing')], scrubber(), {
      skip: (name) => name.startsWith('env-'),
      maxFileBytes: 1000,
    });
    expect(readFileSync(outside, 'utf8')).toBe(KEY);
    expect(readFileSync(join(dir, 'env-launch.json'), 'utf8')).toBe(KEY);
    expect(report.masked).toEqual([]);
    expect(report.skipped).toEqual([
      { path: join(dir, 'big.log'), reason: expect.stringMatching(/over the limit/) },
    ]);
  });

  it('writes nothing outside its root when a directory on the path is swapped for a symlink mid-walk', () => {
    const root = scratch();
    const outside = scratch();
    const secretFile = join(outside, 'f.jsonl');
    writeFileSync(secretFile, record(`the operator's ${KEY}`));
    const dir = join(root, 'b');
    mkdirSync(dir);
    writeFileSync(join(dir, 'f.jsonl'), record('harmless'));
    // The engine's move, timed between the listing of b and the open of b/f.jsonl.
    const report = scrubFilesInPlace([root], scrubber(), {
      skip: (name) => {
        if (name === 'f.jsonl') {
          rmSync(dir, { recursive: true });
          symlinkSync(outside, dir);
        }
        return false;
      },
    });
    expect(readFileSync(secretFile, 'utf8')).toContain(KEY);
    expect(report.masked).toEqual([]);
    expect(report.skipped).toEqual([
      { path: join(dir, 'f.jsonl'), reason: 'resolves outside the directory scrubbed' },
    ]);
  });

  it('leaves hard links, sparse files and files past the byte budget alone, and says so', () => {
    const root = scratch();
    const outside = scratch();
    const elsewhere = join(outside, 'config.yaml');
    writeFileSync(elsewhere, `webhookSecret: ${KEY}\n`);
    linkSync(elsewhere, join(root, 'linked'));
    const sparse = join(root, 'sparse');
    closeSync(openSync(sparse, 'w'));
    truncateSync(sparse, 64 * 1024 * 1024);
    writeFileSync(join(root, 'big.jsonl'), record(`${KEY} ${'x'.repeat(4096)}`));
    const report = scrubFilesInPlace([root], scrubber(), { maxScanBytes: 1024 });
    expect(readFileSync(elsewhere, 'utf8')).toContain(KEY);
    expect(Object.fromEntries(report.skipped.map((s) => [s.path, s.reason]))).toEqual({
      [join(root, 'linked')]: 'has other names (a hard link)',
      [sparse]: 'sparse',
      [join(root, 'big.jsonl')]: 'byte budget of one scan reached (left for the next)',
    });
  });

  it('says when a directory cannot be listed instead of passing over it in silence', () => {
    const root = scratch();
    const locked = join(root, 'locked');
    mkdirSync(locked);
    writeFileSync(join(locked, 'f.jsonl'), record(KEY));
    chmodSync(locked, 0o000);
    try {
      const report = scrubFilesInPlace([root], scrubber());
      // root can list anything: then the file was read and masked; anyone else is told why not.
      if (process.getuid?.() === 0) expect(report.masked).toHaveLength(1);
      else expect(report.skipped).toEqual([{ path: locked, reason: 'cannot list (EACCES)' }]);
    } finally {
      chmodSync(locked, 0o700);
    }
  });

  it('reads an unchanged clean file once, and again when it changes or a secret is added', () => {
    const root = scratch();
    const file = join(root, 'notes.txt');
    writeFileSync(file, 'nothing yet; later: other-secret-0123456789abc\n');
    const s = scrubber();
    const clean = new Map<string, string>();
    expect(scrubFilesInPlace([root], s, { clean }).masked).toEqual([]);
    expect(clean.has(file)).toBe(true);
    appendFileSync(file, `now ${KEY}\n`);
    expect(scrubFilesInPlace([root], s, { clean }).masked).toEqual([{ path: file, ranges: 1 }]);
    s.add('other-secret-0123456789abc');
    expect(scrubFilesInPlace([root], s, { clean }).masked).toEqual([{ path: file, ranges: 1 }]);
    expect(readFileSync(file, 'utf8')).not.toMatch(/0123456789abc|api03/);
  });
});

describe('createSessionScrub', () => {
  it("masks one session's state dir and engine home, not another's, not the launcher's env file", () => {
    const dataDir = scratch();
    const slug = 'github-acme-x-1-0123456789';
    const other = 'github-acme-y-2-0123456789';
    const files = {
      hooks: join(dataDir, 'sessions', slug, 'hooks.jsonl'),
      transcript: join(dataDir, 'homes', slug, 'claude', 'projects', '-w', 's.jsonl'),
      env: join(dataDir, 'sessions', slug, 'env-0b7e0d8e-8c3e-4a8e-9d0c-3f7c1b2a4e5f.json'),
      others: join(dataDir, 'homes', other, 'claude', 'projects', '-w', 's.jsonl'),
    };
    for (const file of Object.values(files)) {
      mkdirSync(join(file, '..'), { recursive: true });
      writeFileSync(file, record(`said ${KEY.slice(4)}`));
    }
    const sink = memorySink();
    const scrub = createSessionScrub({
      dataDir,
      scrubber: scrubber(),
      logger: createLogger({ level: 'debug', sinks: [sink] }),
    });
    scrub(slug);
    scrub('../escape');
    expect(readFileSync(files.hooks, 'utf8')).not.toContain(KEY.slice(4));
    expect(readFileSync(files.transcript, 'utf8')).not.toContain(KEY.slice(4));
    expect(readFileSync(files.env, 'utf8')).toContain(KEY.slice(4));
    expect(readFileSync(files.others, 'utf8')).toContain(KEY.slice(4));
    const logged = sink.lines.map((l) => JSON.parse(l) as { msg: string; path: string });
    expect(
      logged
        .filter((l) => l.msg === 'masked secrets an engine left in a file')
        .map((l) => l.path)
        .sort(),
    ).toEqual([files.hooks, files.transcript].sort());
  });
});
