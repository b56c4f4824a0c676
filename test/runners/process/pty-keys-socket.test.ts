/**
 * Keys into a PTY turn of the process runner, through its keys socket: real processes on real PTYs
 * (node-pty), a real Unix socket in the data dir's runtime directory, no mocks.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LoopError } from '../../../src/core/errors.js';
import type { TurnEvent } from '../../../src/core/events.js';
import { type EnginePreset, presetSchema } from '../../../src/engines/preset.js';
import { ensureRuntimeDir, runtimeDirOf } from '../../../src/os/runtime-dir.js';
import { exchangeKeysLine, keysSocketPath } from '../../../src/runners/process/keys-socket.js';
import { ProcessRunner } from '../../../src/runners/process/process-runner.js';
import { FAKE_ENGINE } from '../../helpers/cli.js';

const state = mkdtempSync(join(tmpdir(), 'tl-keys-'));
// The data dir is `state`; its runtime directory (keys sockets) is made in `state` too (TMPDIR).
const keysEnv = { TMPDIR: state };
const socketOf = (slug: string) => keysSocketPath(runtimeDirOf(keysEnv, state), slug);
const engineState = join(state, 'engine');
mkdirSync(engineState);
afterAll(() => rmSync(state, { recursive: true, force: true }));

const base = {
  binary: FAKE_ENGINE,
  protocol: 'claude-stream-json',
  sessionId: 'assign',
  headless: {
    args: ['-p'],
    start: ['--session-id', '{sessionId}'],
    resume: ['--resume', '{sessionId}'],
    promptPrefix: ['--'],
  },
} as const;
const onPty: EnginePreset = presetSchema.parse({ ...base, pty: true });
const onPipes: EnginePreset = presetSchema.parse(base);

const runner = new ProcessRunner({ dataDir: state, env: keysEnv });
const texts = (events: TurnEvent[]) => events.flatMap((e) => (e.type === 'text' ? [e.text] : []));

describe('keys into a PTY turn', () => {
  const session = (slug: string) => ({ workItem: `github:o/r#${slug}`, slug });
  // What the CLI does: another runner (another process, in real life) with the same data dir.
  const client = new ProcessRunner({ dataDir: state, env: keysEnv });

  /** Start a wait-keys turn; resolves `ready` once the engine's terminal is in raw mode. */
  function waitKeysTurn(slug: string) {
    const events: TurnEvent[] = [];
    let markReady: () => void = () => {};
    const ready = new Promise<void>((resolve) => {
      markReady = resolve;
    });
    const turn = runner.runTurn({
      preset: onPty,
      session: { id: 's', slug, tmuxTarget: null },
      engineSessionId: `k-${slug}`,
      first: true,
      prompt: 'mode:wait-keys',
      cwd: state,
      env: { PATH: process.env.PATH ?? '', FAKE_ENGINE_STATE: engineState },
      backstopMs: 30_000,
      killGraceMs: 300,
      maxLineBytes: 1024 * 1024,
      onEvent: (e) => {
        events.push(e);
        if (e.type === 'text' && e.text === 'ready') markReady();
      },
    });
    return { turn, ready, events };
  }

  it('presses named keys and types text: the engine receives the exact bytes', async () => {
    const slug = 'github-o-r-keys';
    const path = socketOf(slug);
    const { turn, ready, events } = waitKeysTurn(slug);
    await ready;
    // A private directory and socket while the turn runs.
    expect(lstatSync(dirname(path)).mode & 0o777).toBe(0o700);
    expect(lstatSync(dirname(dirname(path))).mode & 0o777).toBe(0o700);
    expect(lstatSync(path).mode & 0o777).toBe(0o600);

    const first = await client.sendKeys(session(slug), onPty, ['Up', 'Enter', 'C-a', 'M-x', 'F5', 'Tab']);
    expect(first).toEqual({
      target: `${slug} (pty)`,
      sent: ['Up', 'Enter', 'C-a', 'M-x', 'F5', 'Tab'].map((key) => ({ key, literal: false })),
    });
    // Control characters are stripped from literal text by the client, as for tmux; words in a row
    // are one text, with the spaces between them.
    const second = await client.sendKeys(session(slug), onPty, ['héllo wörld', 'b\x07ye', 'Escape']);
    expect(second.sent).toEqual([
      { key: 'héllo wörld bye', literal: true },
      { key: 'Escape', literal: false },
    ]);
    const outcome = await turn;
    expect(outcome).toMatchObject({ ok: true, endReason: 'result' });
    const all = texts(events).find((t) => t.startsWith('all:'));
    expect(Buffer.from(all?.slice(4) ?? '', 'hex').toString('utf8')).toBe(
      '\x1b[A\r\x01\x1bx\x1b[15~\théllo wörld bye\x1b',
    );
    expect(texts(events)).toContain('escape');
    // The turn is over: the socket is gone, and keys say so.
    expect(existsSync(path)).toBe(false);
    const late = await client.sendKeys(session(slug), onPty, ['Escape']).catch((e: unknown) => e);
    expect(late).toBeInstanceOf(LoopError);
    expect((late as LoopError).message).toBe(
      `no turn of github:o/r#${slug} is running: keys reach a pty engine only while its turn runs`,
    );
  });

  it('answers hostile requests with clear errors and the turn goes on', async () => {
    const slug = 'github-o-r-hostile';
    const path = socketOf(slug);
    const { turn, ready, events } = waitKeysTurn(slug);
    await ready;
    const ask = async (line: string) =>
      JSON.parse(await exchangeKeysLine(path, line)) as Record<string, unknown>;
    expect(await ask('not json')).toEqual({
      ok: false,
      error: expect.stringMatching(/not JSON/),
    });
    expect(await ask('{"keys":"Escape"}')).toEqual({
      ok: false,
      error: '"keys" must be an array of strings',
    });
    expect(await ask('{"keys":["a",1]}')).toEqual({ ok: false, error: 'key 2 is not a string' });
    expect(await ask('{"keys":[{"toString":"x"}]}')).toMatchObject({ ok: false });
    expect(await ask('[]')).toMatchObject({ ok: false, error: expect.stringMatching(/JSON object/) });
    expect(await ask(JSON.stringify({ keys: ['a\x1b[2Jb'] }))).toEqual({
      ok: false,
      error: expect.stringMatching(/control characters/),
    });
    expect(await ask(JSON.stringify({ keys: ['x', 'C-5'] }))).toEqual({
      ok: false,
      error: expect.stringMatching(/C-5 has no control character/),
    });
    expect(await ask(JSON.stringify({ keys: ['x'], shell: 'rm -rf /' }))).toMatchObject({ ok: false });
    expect(await ask(JSON.stringify({ keys: Array.from({ length: 300 }, () => 'a') }))).toMatchObject({
      ok: false,
      error: expect.stringMatching(/limit is 256/),
    });
    expect(await ask(`{"keys":["${'a'.repeat(70 * 1024)}"]}`)).toEqual({
      ok: false,
      error: 'request larger than 65536 bytes',
    });
    // A request with no newline at all, past the limit.
    expect(JSON.parse(await exchangeKeysLine(path, 'x'.repeat(100 * 1024)))).toMatchObject({ ok: false });

    // A flood on one connection is answered up to a limit, then cut off.
    const replies = await new Promise<string[]>((resolve, reject) => {
      const socket = createConnection({ path });
      let text = '';
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => {
        text += chunk;
      });
      socket.on('error', reject);
      socket.on('close', () => resolve(text.trim().split('\n')));
      socket.end('{"keys":[]}\n'.repeat(40));
    });
    expect(replies).toHaveLength(33);
    expect(replies.slice(0, 32).every((r) => r === '{"ok":true,"sent":[]}')).toBe(true);
    expect(JSON.parse(replies[32] ?? '')).toEqual({
      ok: false,
      error: 'more than 32 requests on one connection',
    });

    // None of those pressed anything; the turn still takes keys.
    expect(texts(events).filter((t) => t.startsWith('got:'))).toEqual([]);
    const sent = await client.sendKeys(session(slug), onPty, ['ok', 'Escape']);
    expect(sent.sent).toHaveLength(2);
    const outcome = await turn;
    expect(outcome).toMatchObject({ ok: true, endReason: 'result' });
    const all = texts(events).find((t) => t.startsWith('all:'));
    expect(all).toBe(`all:${Buffer.from('ok\x1b').toString('hex')}`);
    expect(existsSync(path)).toBe(false);
  });

  it('replaces a socket file left by a dead process, and never takes over a live one', async () => {
    const slug = 'github-o-r-stale';
    const path = socketOf(slug);
    ensureRuntimeDir(keysEnv, state);
    // A process that listens on the path and dies without cleaning up.
    spawnSync(process.execPath, [
      '-e',
      `require('node:net').createServer().listen(${JSON.stringify(path)}, () => process.kill(process.pid, 'SIGKILL'))`,
    ]);
    expect(lstatSync(path).isSocket()).toBe(true);
    // Nobody listens on it (ECONNREFUSED): no turn is running, and keys say so.
    const refused = await client.sendKeys(session(slug), onPty, ['Escape']).catch((e: unknown) => e);
    expect((refused as LoopError).message).toMatch(/^no turn of github:o\/r#github-o-r-stale is running/);
    const { turn, ready } = waitKeysTurn(slug);
    await ready;
    await client.sendKeys(session(slug), onPty, ['Escape']);
    expect((await turn).ok).toBe(true);
    expect(existsSync(path)).toBe(false);
    // The runtime directory went with its last socket.
    expect(existsSync(dirname(path))).toBe(false);

    // A live listener (another process serving this session) is left alone; the turn runs without keys.
    ensureRuntimeDir(keysEnv, state);
    const other = createServer();
    await new Promise<void>((resolve) => other.listen(path, resolve));
    try {
      const events: TurnEvent[] = [];
      const outcome = await runner.runTurn({
        preset: onPty,
        session: { id: 's', slug, tmuxTarget: null },
        engineSessionId: 'k-live',
        first: true,
        prompt: 'hello',
        cwd: state,
        env: { PATH: process.env.PATH ?? '', FAKE_ENGINE_STATE: engineState },
        backstopMs: 30_000,
        killGraceMs: 300,
        maxLineBytes: 1024 * 1024,
        onEvent: (e) => events.push(e),
      });
      expect(outcome.ok).toBe(true);
      expect(events).toContainEqual({
        type: 'diagnostic',
        message: `keys cannot be pressed during this turn: another process is serving keys on ${path}`,
      });
      expect(lstatSync(path).isSocket()).toBe(true);
    } finally {
      await new Promise<void>((resolve) => other.close(() => resolve()));
    }
  });

  it('refuses keys for an engine that is not on a PTY, saying how to get one', async () => {
    const error = await client
      .sendKeys(session('github-o-r-9'), onPipes, ['Escape'])
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LoopError);
    expect((error as LoopError).message).toMatch(/runs on the process runner: its engine has no terminal/);
    expect((error as LoopError).hint).toMatch(/pty: true/);
  });
});
