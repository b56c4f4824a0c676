import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { Tmux } from '../../../src/runners/tmux/tmux.js';
import { stopTmuxServer } from '../../helpers/tmux.js';

// A private server per test file (`tmux -L <unique>`); killed at the end, never the default one.
const socket = `the-loop-test-${randomUUID().slice(0, 8)}`;
const tmux = new Tmux({ socket });
afterAll(async () => {
  await stopTmuxServer(tmux);
});

describe('tmux client (real tmux, private socket)', () => {
  it('reports its version', async () => {
    const v = await tmux.version();
    expect(v?.major).toBeGreaterThanOrEqual(3);
  });

  it('creates, finds, captures and kills a session by exact name', async () => {
    const target = 'loop-github-acme-widgets-15';
    const created = await tmux.run([
      'new-session',
      '-d',
      '-s',
      target,
      '-x',
      '80',
      '-y',
      '20',
      '--',
      'sh',
      '-c',
      'echo ready; sleep 30',
    ]);
    expect(created.ok).toBe(true);
    expect(await tmux.hasSession(target)).toBe(true);
    // Exact match: a prefix of the name is not the session.
    expect(await tmux.hasSession('loop-github-acme-widgets-1')).toBe(false);
    expect(await tmux.listSessions()).toContain(target);
    let screen = '';
    for (let i = 0; i < 50 && !screen.includes('ready'); i++) {
      screen = await tmux.capturePane(target);
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(screen).toContain('ready');
    expect(await tmux.paneInMode(target)).toBe(false);
    await tmux.run(['copy-mode', '-t', `=${target}:`]);
    expect(await tmux.paneInMode(target)).toBe(true);
    expect(await tmux.killSession(target)).toBe(true);
    expect(await tmux.hasSession(target)).toBe(false);
    // Already gone: reported, not thrown.
    expect(await tmux.killSession(target)).toBe(false);
  });

  it('tells a pane that is alive, dead (remain-on-exit), gone, or unknown (tmux failing) apart', async () => {
    const target = 'loop-pane-state-1';
    await tmux.must(
      [
        'new-session',
        '-d',
        '-s',
        target,
        '--',
        'sh',
        '-c',
        'sleep 0.3; exit 7',
        ';',
        'set-option',
        '-w',
        '-t',
        `=${target}:`,
        'remain-on-exit',
        'on',
      ],
      'new-session',
    );
    expect(await tmux.paneState(target)).toEqual({ state: 'alive' });
    let state = await tmux.paneState(target);
    for (let i = 0; i < 100 && state.state === 'alive'; i++) {
      await new Promise((r) => setTimeout(r, 20));
      state = await tmux.paneState(target);
    }
    expect(state.state).toBe('dead');
    // tmux does not always know the exit status of a dead pane (seen: unknown when its server had
    // reaped other panes before); when it does, it is the program's.
    if (state.state === 'dead' && state.status !== null) expect(state.status).toBe(7);
    expect(await tmux.killSession(target)).toBe(true);
    expect(await tmux.paneState(target)).toEqual({ state: 'gone' });
    // No server at all on a socket nobody uses: gone, too.
    expect(await new Tmux({ socket: `the-loop-none-${randomUUID().slice(0, 8)}` }).paneState(target)).toEqual(
      {
        state: 'gone',
      },
    );
    // tmux failing for another reason (here: not even there) is not a verdict about the session.
    const broken = await new Tmux({ socket, binary: '/nonexistent/tmux' }).paneState(target);
    expect(broken.state).toBe('unknown');
  });

  it('refuses targets that are not ours or could be parsed as tmux syntax', async () => {
    for (const bad of ['loop-x:1', 'loop-x.0', 'other', 'loop-$(id)', 'loop-', '=loop-x']) {
      await expect(tmux.hasSession(bad)).rejects.toThrow(/unsafe tmux target/);
    }
    expect(() => new Tmux({ socket: 'a b' })).toThrow(/tmux.socket/);
  });
});
