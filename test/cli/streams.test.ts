import { spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type Io, processIo, scrubbingIo, showingIo } from '../../src/cli/io.js';
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

beforeAll(() => {
  project = makeProject({});
  preload = join(project.dir, 'report-loaded.cjs');
  writeFileSync(
    preload,
    "process.on('exit', () => require('node:fs').writeSync(3, JSON.stringify(process.moduleLoadList)));\n",
  );
  return () => project.cleanup();
});

/**
 * The CLI with stderr a pipe; stdout a file (whose stream needs no `net`), or with `closeStdout` a
 * pipe whose reader is gone before the command writes.
 */
function run(args: string[], options: { closeStdout?: boolean } = {}): Promise<Ran> {
  const outFile = join(project.dir, 'stdout.txt');
  const out = options.closeStdout ? 'pipe' : openSync(outFile, 'w');
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-r', preload, BIN, ...args], {
      cwd: project.dir,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, XDG_STATE_HOME: process.env.XDG_STATE_HOME },
      stdio: ['ignore', out, 'pipe', 'pipe'],
    });
    if (typeof out === 'number') closeSync(out);
    const text = { stdout: '', stderr: '', loaded: '' };
    if (options.closeStdout) child.stdout?.destroy();
    else child.stdout?.setEncoding('utf8').on('data', (c: string) => (text.stdout += c));
    child.stderr?.setEncoding('utf8').on('data', (c: string) => (text.stderr += c));
    (child.stdio[3] as NodeJS.ReadableStream).setEncoding('utf8');
    (child.stdio[3] as NodeJS.ReadableStream).on('data', (c: string) => (text.loaded += c));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the-loop ${args.join(' ')} timed out: ${text.stderr}`));
    }, 60_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      if (typeof out === 'number') text.stdout = readFileSync(outFile, 'utf8');
      resolve({ code, ...text, loaded: text.loaded ? (JSON.parse(text.loaded) as string[]) : [] });
    });
  });
}

const madeAPipeStream = (r: Ran) => r.loaded.includes('NativeModule net');

describe('the CLI makes stderr only when it writes to it', () => {
  it('a command that prints no warning never makes stderr (a pipe here)', async () => {
    for (const args of [['acts'], ['sessions', 'list'], ['usage'], ['config', 'check']]) {
      const r = await run(args);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(0);
      expect(r.stderr).toBe('');
      expect(r.stdout.length).toBeGreaterThan(0);
      expect(r.loaded.length, 'the preload reported what was loaded').toBeGreaterThan(0);
      expect(madeAPipeStream(r), args.join(' ')).toBe(false);
    }
  });

  it('an error is still written to stderr, with its exit code', async () => {
    const r = await run(['acts', '--no-such-option']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("unknown option '--no-such-option'");
    expect(madeAPipeStream(r)).toBe(true);
    const bad = await run(['sessions', 'show', 'no-such-session']);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/^the-loop: /);
  });

  it('a reader that closes stdout first ends the command quietly (EPIPE), exit 0', async () => {
    const r = await run(['config', 'schema'], { closeStdout: true });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
  });
});

describe('io wrappers keep the status line lazy', () => {
  let reads = 0;
  const base = (): Io => {
    const io: Io = { out: () => {}, err: () => {}, cwd: '/', env: {}, isTty: false };
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
