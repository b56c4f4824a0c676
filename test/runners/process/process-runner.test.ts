import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { TurnEvent } from '../../../src/core/events.js';
import { type EnginePreset, presetSchema } from '../../../src/engines/preset.js';
import { ProcessRunner } from '../../../src/runners/process/process-runner.js';
import type { RunTurnInput } from '../../../src/runners/runner.js';
import { FAKE_ENGINE, pidAlive } from '../../helpers/cli.js';

const state = mkdtempSync(join(tmpdir(), 'the-loop-runner-'));
afterAll(() => rmSync(state, { recursive: true, force: true }));

const fake: EnginePreset = presetSchema.parse({
  binary: FAKE_ENGINE,
  protocol: 'claude-stream-json',
  sessionId: 'assign',
  headless: {
    args: ['-p'],
    start: ['--session-id', '{sessionId}'],
    resume: ['--resume', '{sessionId}'],
    promptPrefix: ['--'],
  },
});

const runner = new ProcessRunner();
async function run(prompt: string, overrides: Partial<RunTurnInput> = {}) {
  const events: TurnEvent[] = [];
  let pid: number | undefined;
  const outcome = await runner.runTurn({
    preset: fake,
    session: { id: 's', slug: 'github-o-r-1', tmuxTarget: null },
    engineSessionId: `s-${Math.random().toString(36).slice(2)}`,
    first: true,
    prompt,
    cwd: state,
    env: {
      PATH: process.env.PATH ?? '',
      FAKE_ENGINE_STATE: state,
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

describe('process runner', () => {
  it('ends a turn on the result event and reports its usage', async () => {
    const { outcome, events, pid } = await run('hello');
    expect(outcome).toMatchObject({ ok: true, endReason: 'result', exitCode: 0 });
    expect(events.map((e) => e.type)).toEqual(['session', 'text', 'usage', 'turn-end']);
    expect(pid && pidAlive(pid)).toBe(false);
  });

  it('ends a hanging engine with the backstop and says so', async () => {
    const { outcome, pid } = await run('mode:hang', { backstopMs: 400 });
    expect(outcome.ok).toBe(false);
    expect(outcome.endReason).toBe('backstop');
    expect(outcome.error).toMatch(/backstop/);
    expect(outcome.stoppedBy).toBe('SIGTERM');
    expect(pid && pidAlive(pid)).toBe(false);
  });

  it('follows an ignored SIGTERM with SIGKILL', async () => {
    const { outcome, pid } = await run('mode:ignore-sigterm', { backstopMs: 400, killGraceMs: 300 });
    expect(outcome.endReason).toBe('backstop');
    expect(outcome.stoppedBy).toBe('SIGKILL');
    expect(outcome.exitSignal).toBe('SIGKILL');
    expect(pid && pidAlive(pid)).toBe(false);
  });

  it('records a crash mid-turn as a failed turn with the engine message', async () => {
    const { outcome, events } = await run('mode:crash');
    expect(outcome).toMatchObject({ ok: false, endReason: 'error', exitCode: 3 });
    expect(outcome.error).toMatch(/without a result event.*simulated crash/s);
    expect(events.some((e) => e.type === 'text')).toBe(true);
  });

  it('cancels a running turn through its AbortSignal', async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 300);
    const { outcome, pid } = await run('mode:hang', { signal: controller.signal });
    expect(outcome.endReason).toBe('cancel');
    expect(outcome.ok).toBe(false);
    expect(pid && pidAlive(pid)).toBe(false);
  });

  it('reports garbage lines and keeps going', async () => {
    const { outcome, events } = await run('mode:garbage');
    expect(outcome).toMatchObject({ ok: true, endReason: 'result' });
    const diagnostics = events.filter((e) => e.type === 'diagnostic');
    expect(diagnostics.length).toBeGreaterThanOrEqual(5);
    expect(events).toContainEqual({ type: 'text', text: 'still here' });
  });

  it('skips a 50 MB line without buffering it and finishes the turn', async () => {
    const { outcome, events } = await run('mode:huge-line');
    expect(outcome).toMatchObject({ ok: true, endReason: 'result' });
    expect(events).toContainEqual({
      type: 'diagnostic',
      message: `skipped an output line of ${50 * 1024 * 1024} bytes (limit ${1024 * 1024})`,
    });
    expect(events).toContainEqual({ type: 'text', text: 'after the huge line' });
  });

  it('tolerates unknown event types silently', async () => {
    const { outcome, events } = await run('mode:unknown-types');
    expect(outcome.ok).toBe(true);
    expect(events.filter((e) => e.type === 'diagnostic')).toEqual([]);
  });

  it('reassembles lines split across chunks, with CRLF and multi-byte characters', async () => {
    const { events } = await run('mode:split-chunks');
    expect(events).toContainEqual({ type: 'text', text: 'héllo ✓ wörld' });
  });

  it('stops what the engine left behind (its process group)', async () => {
    const { outcome } = await run('mode:grandchild');
    expect(outcome.ok).toBe(true);
    const child = Number(readFileSync(join(state, 'child.pid'), 'utf8'));
    expect(child).toBeGreaterThan(0);
    expect(pidAlive(child)).toBe(false);
  });

  it('stops an engine that lingers after its result', async () => {
    const { outcome, pid } = await run('mode:linger');
    expect(outcome).toMatchObject({ ok: true, endReason: 'result', stoppedBy: 'SIGTERM' });
    expect(pid && pidAlive(pid)).toBe(false);
  });

  it('fails a structured engine that exits without a result event', async () => {
    const { outcome } = await run('mode:no-result');
    expect(outcome).toMatchObject({ ok: false, endReason: 'error', exitCode: 0 });
    expect(outcome.error).toMatch(/without a result event/);
  });

  it('turns an engine-reported error into a failed turn with its message', async () => {
    const { outcome, events } = await run('mode:error');
    expect(outcome).toMatchObject({ ok: false, endReason: 'result' });
    expect(outcome.error).toBe('API Error: 500 boom');
    expect(events).toContainEqual({ type: 'error', message: 'API Error: 500 boom' });
  });

  it('reports a missing binary as a failed turn, not a crash', async () => {
    const { outcome } = await run('hello', {
      preset: { ...fake, binary: join(state, 'no-such-engine'), install: 'npm i nothing' },
    });
    expect(outcome).toMatchObject({ ok: false, endReason: 'error', stoppedBy: 'never-started' });
    expect(outcome.error).toMatch(/not found.*install: npm i nothing/);
  });

  it('ends a text-protocol engine on exit', async () => {
    const echo = presetSchema.parse({
      binary: 'echo',
      protocol: 'text',
      sessionId: 'none',
      headless: { args: ['said:'] },
    });
    const ok = await run('hi there', { preset: echo });
    expect(ok.outcome).toMatchObject({ ok: true, endReason: 'exit', exitCode: 0 });
    expect(ok.events).toEqual([{ type: 'text', text: 'said: hi there\n' }]);
    const failing = presetSchema.parse({
      binary: 'false',
      protocol: 'text',
      sessionId: 'none',
      headless: { args: [] },
    });
    const bad = await run('x', { preset: failing });
    expect(bad.outcome).toMatchObject({ ok: false, endReason: 'error', exitCode: 1 });
  });

  it('passes the prompt as one argv element, after --, even when it looks like a flag', async () => {
    const log = join(state, 'argv.log');
    await run('--dangerously-do-things; rm -rf /', {
      env: { PATH: process.env.PATH ?? '', FAKE_ENGINE_STATE: state, FAKE_ENGINE_ARGV_LOG: log },
    });
    const argv = JSON.parse(readFileSync(log, 'utf8').trim().split('\n').at(-1) ?? '[]') as string[];
    expect(argv.slice(-2)).toEqual(['--', '--dangerously-do-things; rm -rf /']);
  });
});
