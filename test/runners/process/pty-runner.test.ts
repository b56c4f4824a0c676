import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { TurnEvent } from '../../../src/core/events.js';
import { type EnginePreset, presetSchema } from '../../../src/engines/preset.js';
import { ProcessRunner } from '../../../src/runners/process/process-runner.js';
import type { RunTurnInput } from '../../../src/runners/runner.js';
import { FAKE_ENGINE, pidAlive } from '../../helpers/cli.js';

// Real processes on real PTYs (node-pty), no mocks. Keys into them: process/pty-keys-socket.test.ts.
const state = mkdtempSync(join(tmpdir(), 'tl-pty-'));
// The data dir is `state`; its runtime directory (keys sockets) is made in `state` too (TMPDIR).
const keysEnv = { TMPDIR: state };
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
let slugs = 0;

async function run(prompt: string, overrides: Partial<RunTurnInput> = {}) {
  const events: TurnEvent[] = [];
  let pid: number | undefined;
  const outcome = await runner.runTurn({
    preset: onPty,
    session: { id: 's', slug: `github-o-r-${++slugs}`, tmuxTarget: null },
    engineSessionId: `s-${Math.random().toString(36).slice(2)}`,
    first: true,
    prompt,
    cwd: state,
    env: {
      PATH: process.env.PATH ?? '',
      FAKE_ENGINE_STATE: engineState,
      FAKE_ENGINE_CHILD_PID_FILE: join(state, 'child.pid'),
    },
    backstopMs: 30_000,
    killGraceMs: 300,
    maxLineBytes: 1024 * 1024,
    onEvent: (e) => events.push(e),
    onSpawn: (p) => {
      pid = p;
    },
    ...overrides,
  });
  return { outcome, events, pid };
}

const texts = (events: TurnEvent[]) => events.flatMap((e) => (e.type === 'text' ? [e.text] : []));

describe('process runner on a PTY', () => {
  it('runs the engine on a terminal and parses its stream like a pipe turn (CRLF stripped)', async () => {
    const { outcome, events, pid } = await run('hello');
    expect(outcome).toMatchObject({ ok: true, endReason: 'result', exitCode: 0 });
    expect(events.map((e) => e.type)).toEqual(['session', 'text', 'usage', 'turn-end']);
    expect(texts(events)).toEqual(['turn 1; I remember: nothing']);
    expect(pid && pidAlive(pid)).toBe(false);

    const tty = await run('mode:tty');
    expect(texts(tty.events)).toEqual([
      'stdin tty: true, stdout tty: true, size: 200x50, TERM: xterm-256color',
    ]);
    // The same engine on pipes sees no terminal.
    const piped = await run('mode:tty', { preset: onPipes });
    expect(texts(piped.events)[0]).toMatch(/^stdin tty: false, stdout tty: false/);
  });

  it('takes stderr merged into the stream without breaking the parse', async () => {
    const { outcome, events } = await run('mode:stderr-chatter');
    expect(outcome).toMatchObject({ ok: true, endReason: 'result' });
    expect(texts(events)).toEqual(['one', 'two']);
    expect(events.at(-1)).toMatchObject({ type: 'turn-end', ok: true });
    // The stderr lines are not events: each is reported as a line that is not one, and skipped.
    expect(events.filter((e) => e.type === 'diagnostic').length).toBeGreaterThanOrEqual(3);
  });

  it('explains a crash with the tail of the merged output', async () => {
    const { outcome } = await run('mode:crash');
    expect(outcome).toMatchObject({ ok: false, endReason: 'error', exitCode: 3 });
    expect(outcome.error).toMatch(/without a result event.*simulated crash/s);
  });

  it('reassembles split lines and multi-byte characters, and skips a 50 MB line', async () => {
    const split = await run('mode:split-chunks');
    expect(texts(split.events)).toEqual(['héllo ✓ wörld']);
    const huge = await run('mode:huge-line');
    expect(huge.outcome).toMatchObject({ ok: true, endReason: 'result' });
    // 50 MB and the \r the terminal put before its \n.
    expect(huge.events).toContainEqual({
      type: 'diagnostic',
      message: `skipped an output line of ${50 * 1024 * 1024 + 1} bytes (limit ${1024 * 1024})`,
    });
    expect(texts(huge.events)).toEqual(['after the huge line']);
  }, 60_000);

  it('loses nothing of an engine that exits with its output still queued in the terminal', async () => {
    // We are busy while the engine writes ~10 KB, its result, and exits: all of it is queued in the
    // kernel when it is gone. node-pty's own terminal delivers the first 4 KB of that and reports the
    // end (hang-up + short read taken as end of file); the result event was in the rest.
    const { outcome, events } = await run('mode:burst-exit', {
      onSpawn: () => {
        const until = Date.now() + 1000;
        while (Date.now() < until) {
          // Busy on purpose: no event-loop turn, so no read, until the engine has exited.
        }
      },
    });
    expect(outcome).toMatchObject({ ok: true, endReason: 'result', exitCode: 0 });
    expect(texts(events)).toHaveLength(60);
    expect(texts(events).at(-1)).toBe(`line 59 ${'z'.repeat(60)}`);
    expect(events.at(-1)).toMatchObject({ type: 'turn-end', ok: true });
  });

  it('stops a hanging engine with the backstop, and an ignored SIGTERM with SIGKILL', async () => {
    const hang = await run('mode:hang', { backstopMs: 400 });
    expect(hang.outcome).toMatchObject({ ok: false, endReason: 'backstop', stoppedBy: 'SIGTERM' });
    expect(hang.pid && pidAlive(hang.pid)).toBe(false);

    const stubborn = await run('mode:ignore-sigterm', { backstopMs: 400, killGraceMs: 300 });
    expect(stubborn.outcome).toMatchObject({
      endReason: 'backstop',
      stoppedBy: 'SIGKILL',
      exitSignal: 'SIGKILL',
    });
    expect(stubborn.pid && pidAlive(stubborn.pid)).toBe(false);
  });

  it('leads its own process group (as a session leader) and takes it down with it', async () => {
    let group: string | undefined;
    let hungPid = 0;
    const controller = new AbortController();
    const hung = run('mode:hang', {
      signal: controller.signal,
      onEvent: (e) => {
        if (e.type !== 'text' || group) return;
        const result = spawnSync('ps', ['-o', 'pid=,pgid=,sid=', '-p', String(hungPid)], {
          encoding: 'utf8',
        });
        group = result.stdout.trim().split(/\s+/).join(' ');
        controller.abort();
      },
      onSpawn: (p) => {
        hungPid = p;
      },
    });
    const { outcome } = await hung;
    expect(outcome.endReason).toBe('cancel');
    expect(group).toBe(`${hungPid} ${hungPid} ${hungPid}`);
    expect(pidAlive(hungPid)).toBe(false);

    const { outcome: left } = await run('mode:grandchild');
    expect(left.ok).toBe(true);
    const child = Number(readFileSync(join(state, 'child.pid'), 'utf8'));
    expect(child).toBeGreaterThan(0);
    expect(pidAlive(child)).toBe(false);
  });

  it('passes a secret only in the environment, never in argv', async () => {
    const canary = `sk-ant-canary-${Math.random().toString(36).slice(2)}`;
    const argvLog = join(state, 'argv.log');
    let cmdline = '';
    let environ = '';
    const controller = new AbortController();
    let pid = 0;
    const { outcome } = await run('mode:hang', {
      signal: controller.signal,
      env: {
        PATH: process.env.PATH ?? '',
        FAKE_ENGINE_STATE: engineState,
        FAKE_ENGINE_ARGV_LOG: argvLog,
        ANTHROPIC_API_KEY: canary,
      },
      onSpawn: (p) => {
        pid = p;
      },
      onEvent: (e) => {
        if (e.type !== 'text' || cmdline) return;
        // The engine is running (it wrote its first text): read what the kernel holds for it.
        cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
        environ = readFileSync(`/proc/${pid}/environ`, 'utf8');
        controller.abort();
      },
    });
    expect(outcome.endReason).toBe('cancel');
    expect(cmdline).toContain('mode:hang');
    expect(cmdline).not.toContain(canary);
    expect(readFileSync(argvLog, 'utf8')).not.toContain(canary);
    expect(environ.split('\0')).toContain(`ANTHROPIC_API_KEY=${canary}`);
  });

  it('scrubs secrets from whole lines of the merged stream before parsing', async () => {
    const canary = `sk-ant-canary-${Math.random().toString(36).slice(2)}`;
    const { outcome, events } = await run('mode:echo-secret', {
      env: { PATH: process.env.PATH ?? '', FAKE_ENGINE_STATE: engineState, ANTHROPIC_API_KEY: canary },
      scrub: (text) => text.split(canary).join('[redacted]'),
    });
    expect(outcome.ok).toBe(true);
    expect(JSON.stringify(events)).not.toContain(canary);
    expect(texts(events)).toEqual(['the key is [redacted]']);
    // Its stderr line came through the same stream, scrubbed too.
    expect(JSON.stringify(events)).toContain('stderr also says [redacted]');
  });

  it('reports a missing binary as a failed turn that never started', async () => {
    const { outcome } = await run('hello', {
      preset: { ...onPty, binary: join(state, 'no-such-engine'), install: 'npm i nothing' },
    });
    expect(outcome).toMatchObject({ ok: false, endReason: 'error', stoppedBy: 'never-started' });
    expect(outcome.error).toMatch(/not found.*install: npm i nothing/);
  });
});
