/**
 * Agent windows keep their size (`window-size manual`): a client attaching with another size — a
 * person's terminal, a console viewer — does not resize the TUI's window. Real tmux on a private
 * socket, the real launch path (readyForTurn, the launcher), a real client on a node-pty terminal.
 * A window made without the option is resized by the same client: what the option prevents.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { IPty } from 'node-pty';
import { afterAll, describe, expect, it } from 'vitest';
import type { EnginePreset } from '../../../src/engines/preset.js';
import { nullLogger } from '../../../src/log/logger.js';
import type { RunTurnInput } from '../../../src/runners/runner.js';
import { Tmux } from '../../../src/runners/tmux/tmux.js';
import { readyForTurn } from '../../../src/runners/tmux/tmux-launch.js';
import { openTurn, type TmuxRunnerOptions } from '../../../src/runners/tmux/tmux-session-state.js';
import { stopTmuxServer } from '../../helpers/tmux.js';

const socket = `the-loop-test-${randomUUID().slice(0, 8)}`;
const tmux = new Tmux({ socket });
const dir = mkdtempSync(join(tmpdir(), 'the-loop-window-size-'));
const clients: IPty[] = [];
afterAll(async () => {
  for (const c of clients.splice(0)) c.kill();
  await stopTmuxServer(tmux);
  rmSync(dir, { recursive: true, force: true });
});

const options: TmuxRunnerOptions = {
  tmux,
  stateRoot: join(dir, 'sessions'),
  hookScript: resolve('bin/the-loop-hook.js'),
  launcher: resolve('bin/the-loop-launch.js'),
  width: 100,
  height: 30,
  readyMs: 5000,
  logger: nullLogger,
};

/** A TUI that just waits (no hooks: the runner starts it and does not wait for SessionStart). */
const preset = { binary: 'sleep', interactive: { args: ['300'] } } as unknown as EnginePreset;

function turnInput(slug: string): RunTurnInput {
  return {
    preset,
    session: { id: randomUUID(), slug, tmuxTarget: `loop-${slug}` },
    engineSessionId: randomUUID(),
    first: true,
    prompt: '',
    cwd: dir,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
    backstopMs: 60_000,
    killGraceMs: 500,
    maxLineBytes: 1 << 20,
    onEvent: () => undefined,
  };
}

const windowSize = async (target: string) =>
  (
    await tmux.must(
      ['display-message', '-p', '-t', `=${target}:`, '#{window_width}x#{window_height}'],
      'display',
    )
  ).trim();

/** A tmux client on a terminal of this size, attached to the session (as a person or a viewer would). */
async function attach(target: string, cols: number, rows: number): Promise<void> {
  const mod = await import('node-pty');
  const pty = ((mod as unknown as { default?: typeof mod }).default ?? mod).spawn(
    'tmux',
    [...tmux.baseArgs(), 'attach-session', '-t', `=${target}`],
    {
      cols,
      rows,
      cwd: dir,
      name: 'xterm-256color',
      // Not the test's own environment: no TMUX (a client inside tmux refuses to nest).
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '',
        XDG_STATE_HOME: process.env.XDG_STATE_HOME ?? '',
        TERM: 'xterm-256color',
      },
    },
  );
  clients.push(pty);
  for (let i = 0; i < 100; i++) {
    const listed = await tmux.run(['list-clients', '-t', `=${target}`, '-F', '#{client_width}']);
    if (listed.ok && listed.stdout.trim() === String(cols)) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`no client of width ${cols} attached to ${target}`);
}

/** Give tmux the moment it takes to apply a client's size (it resizes on its next loop). */
const settle = () => new Promise((r) => setTimeout(r, 200));

describe('agent windows keep their size (window-size manual)', () => {
  it('a window made without it is resized by the same client (what the option prevents); it stays on the server for the tests below', async () => {
    const target = 'loop-window-size-control';
    await tmux.must(
      ['new-session', '-d', '-s', target, '-x', '100', '-y', '30', '--', 'sleep', '300'],
      'new',
    );
    await attach(target, 180, 50);
    await settle();
    expect(await windowSize(target)).not.toBe('100x30');
  });

  it('a TUI the runner starts keeps its -x/-y size when a larger client attaches, even with another client on the server', async () => {
    const input = turnInput('window-size-new');
    const ctx = openTurn(options, input, 'last-turn');
    expect(await readyForTurn(options, ctx)).toEqual({ ok: true });
    const target = ctx.target;
    expect(
      (await tmux.must(['show-options', '-w', '-v', '-t', `=${target}:`, 'window-size'], 'show')).trim(),
    ).toBe('manual');
    expect(await windowSize(target)).toBe('100x30');
    await attach(target, 180, 50);
    await settle();
    expect(await windowSize(target)).toBe('100x30');
  });

  it('a TUI an earlier version started gets it at its next turn, and keeps its size from then on', async () => {
    const input = turnInput('window-size-old');
    const target = input.session.tmuxTarget as string;
    // As an earlier version made it: no window-size option.
    await tmux.must(
      ['new-session', '-d', '-s', target, '-x', '100', '-y', '30', '--', 'sleep', '300'],
      'new',
    );
    const ctx = openTurn(options, input, 'last-turn');
    expect(await readyForTurn(options, ctx)).toEqual({ ok: true });
    // Made without the option while another client was on the server, it took that client's size
    // (tmux 3.3a's `latest`); its next turn puts it back to the configured size, and it stays there.
    expect(await windowSize(target)).toBe('100x30');
    await attach(target, 150, 40);
    await settle();
    expect(await windowSize(target)).toBe('100x30');
  });
});
