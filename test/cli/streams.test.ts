import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type Io, processIo, scrubbingIo, showingIo, writeAll } from '../../src/cli/io.js';
import { answersAtOnce } from '../../src/cli/main.js';
import { openDb } from '../../src/store/db.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sessions.js';
import { BIN, makeProject } from '../helpers/cli.js';

/**
 * The launcher makes stdout and stderr on first use (bin/the-loop.js): a command that writes nothing
 * to stderr never makes it (making a pipe's stream loads `net`), a reader that closes the pipe early
 * still ends the command quietly, and errors still reach stderr.
 */

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
  /** What the child had loaded at exit, reported on fd 3. */
  loaded: string[];
}

let project: ReturnType<typeof makeProject>;
let preload: string;

beforeAll(async () => {
  project = makeProject({ dataDir: 'data' });
  // Enough sessions that `sessions list --json` (~0.8 MB) is more than a pipe or a socket pair holds.
  const db = openDb(join(project.dir, '.the-loop/data/the-loop.db'));
  db.pragma('synchronous = OFF');
  const store = new SqliteSessionStore(db, { scrub: (t) => t });
  for (let i = 0; i < 1000; i++)
    await store.create({
      workItem: `github:octo/streams#${i + 1}`,
      slug: `github-octo-streams-${i + 1}`,
      engine: 'claude',
      runner: 'process',
      engineSessionId: null,
      cwd: project.dir,
      credentialKind: null,
      credentialEnv: null,
    });
  db.close();
  preload = join(project.dir, 'report-loaded.cjs');
  writeFileSync(
    preload,
    "process.on('exit', () => require('node:fs').writeSync(3, JSON.stringify(process.moduleLoadList)));\n",
  );
  return () => project.cleanup();
});

/** The CLI with stdout and stderr pipes; with `closeStdout`, stdout's reader is gone before it writes. */
function run(
  args: string[],
  options: { closeStdout?: boolean; closeStderr?: boolean; cwd?: string } = {},
): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-r', preload, BIN, ...args], {
      cwd: options.cwd ?? project.dir,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, XDG_STATE_HOME: process.env.XDG_STATE_HOME },
      stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
    });
    const text = { stdout: '', stderr: '', loaded: '' };
    if (options.closeStdout) child.stdout?.destroy();
    else child.stdout?.setEncoding('utf8').on('data', (c: string) => (text.stdout += c));
    if (options.closeStderr) child.stderr?.destroy();
    else child.stderr?.setEncoding('utf8').on('data', (c: string) => (text.stderr += c));
    (child.stdio[3] as NodeJS.ReadableStream).setEncoding('utf8');
    (child.stdio[3] as NodeJS.ReadableStream).on('data', (c: string) => (text.loaded += c));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the-loop ${args.join(' ')} timed out: ${text.stderr}`));
    }, 60_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, ...text, loaded: text.loaded ? (JSON.parse(text.loaded) as string[]) : [] });
    });
  });
}

/** Whether the child made a stream for stdout or stderr (a pipe's loads `net`, a file's `stream`). */
const madeAStream = (r: Ran) =>
  ['NativeModule net', 'NativeModule tty', 'NativeModule internal/fs/sync_write_stream'].some((m) =>
    r.loaded.includes(m),
  );

describe('the CLI writes stdout and stderr without making their streams', () => {
  it('a command prints its output and makes no stream (pipes here)', async () => {
    for (const args of [['acts'], ['sessions', 'list'], ['usage'], ['config', 'check']]) {
      const r = await run(args);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(0);
      expect(r.stderr).toBe('');
      expect(r.stdout.length).toBeGreaterThan(0);
      expect(r.loaded.length, 'the preload reported what was loaded').toBeGreaterThan(0);
      expect(madeAStream(r), args.join(' ')).toBe(false);
    }
  });

  it('an error is written to stderr, with its exit code', async () => {
    const r = await run(['acts', '--no-such-option']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("unknown option '--no-such-option'");
    expect(madeAStream(r)).toBe(false);
    const bad = await run(['sessions', 'show', 'no-such-session']);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/^the-loop: /);
  });

  it('a reader that closes stdout first ends the command quietly (EPIPE), exit 0', async () => {
    const r = await run(['config', 'schema'], { closeStdout: true });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
  });

  it('a failing command keeps its exit code when its readers are gone (`… 2>&1 | head -1`)', async () => {
    const bad = makeProject({ defaults: { engine: 42 } });
    try {
      const seen = await run(['config', 'check'], { cwd: bad.dir });
      expect(seen.code).toBe(2);
      expect(seen.stderr).toMatch(/^the-loop: /);
      for (let i = 0; i < 3; i++) {
        const r = await run(['config', 'check'], { cwd: bad.dir, closeStdout: true, closeStderr: true });
        expect(r.code).toBe(2);
      }
      const shown = await run(['sessions', 'show', 'no-such-session']);
      expect(shown.code).not.toBe(0);
      const missing = await run(['sessions', 'show', 'no-such-session'], { closeStderr: true });
      expect(missing.code).toBe(shown.code);
    } finally {
      bad.cleanup();
    }
  });

  it('output larger than a pipe holds reaches a slow reader whole, in order', async () => {
    const whole = await run(['sessions', 'list', '--json']);
    expect(whole.code).toBe(0);
    expect(JSON.parse(whole.stdout)).toHaveLength(1000);
    const child = spawn(process.execPath, [BIN, 'sessions', 'list', '--json'], {
      cwd: project.dir,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, XDG_STATE_HOME: process.env.XDG_STATE_HOME },
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    const chunks: Buffer[] = [];
    let reading = false;
    const drain = () => {
      if (!reading) return;
      for (let c = child.stdout.read(); c !== null; c = child.stdout.read()) chunks.push(c);
    };
    // Nothing is read for a while (what Node buffers stays there): the writer fills the pipe and
    // has to wait; then everything is read.
    child.stdout.on('readable', drain);
    const closed = new Promise((r) => child.on('close', r));
    await new Promise((r) => setTimeout(r, 500));
    expect(child.exitCode, 'the writer waits for the reader').toBeNull();
    reading = true;
    drain();
    expect(await closed).toBe(0);
    expect(Buffer.concat(chunks).toString('utf8')).toBe(whole.stdout);
  });
});

describe('io wrappers keep the status line lazy', () => {
  let reads = 0;
  const base = (): Io => {
    const io: Io = { out: () => {}, err: () => {}, cwd: '/', env: {} };
    return Object.defineProperty(io, 'status', {
      enumerable: true,
      get: () => {
        reads++;
        return (_line: string | null) => {};
      },
    });
  };
  afterEach(() => {
    reads = 0;
  });

  it('wrapping does not ask for the status line; using it asks the process io', () => {
    const io = showingIo(scrubbingIo(base()));
    expect(reads).toBe(0);
    expect(typeof io.status).toBe('function');
    expect(reads).toBe(1);
  });

  it('the wrappers still scrub and strip what they write, and keep useScrubber', () => {
    const written: string[] = [];
    const inner = base();
    inner.out = (t) => written.push(t);
    const io = showingIo(scrubbingIo(inner));
    io.useScrubber?.((t) => t.replaceAll('hunter2-secret', '[secret]'));
    io.out('key hunter2-secret \u001b[31mred\u001b[0m\n');
    expect(written).toEqual(['key [secret] red\n']);
    expect(reads).toBe(0);
  });

  it("the process's io reads stderr's terminal state only when status is asked for", () => {
    const io = processIo();
    const descriptor = Object.getOwnPropertyDescriptor(io, 'status');
    expect(typeof descriptor?.get).toBe('function');
    expect(io.status === undefined || typeof io.status === 'function').toBe(true);
    expect(Boolean(io.status)).toBe(Boolean(process.stderr.isTTY));
  });
});

describe('writeAll', () => {
  const errno = (code: string) => Object.assign(new Error(code), { code });

  it('waits out EAGAIN (a non-blocking descriptor) and continues short writes, in order', () => {
    const got: number[] = [];
    let calls = 0;
    const write = (_fd: number, bytes: Uint8Array, offset: number) => {
      calls++;
      if (calls % 3 === 1) throw errno('EAGAIN');
      const n = Math.min(5, bytes.length - offset);
      got.push(...bytes.subarray(offset, offset + n));
      return n;
    };
    const text = 'héllo, wörld — ✓ '.repeat(7);
    expect(writeAll(1, text, write)).toBe(true);
    expect(Buffer.from(got).toString('utf8')).toBe(text);
    expect(calls).toBeGreaterThan(Math.ceil(Buffer.byteLength(text) / 5));
  });

  it('says the reader is gone (EPIPE) instead of ending the process; any other error is thrown', () => {
    expect(
      writeAll(1, 'x', () => {
        throw errno('EPIPE');
      }),
    ).toBe(false);
    expect(() =>
      writeAll(1, 'x', () => {
        throw errno('EIO');
      }),
    ).toThrow('EIO');
  });

  it('writes nothing for empty text', () => {
    let calls = 0;
    expect(writeAll(1, '', () => ++calls)).toBe(true);
    expect(calls).toBe(0);
  });
});

describe('which commands write directly', () => {
  const argv = (...words: string[]) => ['node', 'the-loop', ...words];

  it('the commands that print their answer and end', () => {
    for (const words of [
      ['sessions', 'list'],
      ['sessions', 'show', 'x'],
      ['events', 'list', '--json'],
      ['events', 'show', 'd-1'],
      ['usage'],
      ['usage', '--by', 'model'],
      ['acts', '--breaches'],
      ['config', 'check'],
      ['-c', 'x.yaml', 'sessions', 'list'],
    ])
      expect(answersAtOnce(argv(...words)), words.join(' ')).toBe(true);
  });

  it('not a turn, a follow, a scan, the daemon, the connector, help, or an ambiguous line', () => {
    for (const words of [
      ['run', 'github:o/r#1', 'hi'],
      ['sessions', 'logs', 'x', '--follow'],
      ['sessions', 'attach', 'x'],
      ['usage', 'scan'],
      ['serve'],
      ['mcp'],
      ['doctor'],
      ['--help'],
      [],
      ['-c', 'usage', 'usage', 'scan'],
      ['-c', 'sessions', 'sessions', 'logs'],
    ])
      expect(answersAtOnce(argv(...words)), words.join(' ')).toBe(false);
  });
});
