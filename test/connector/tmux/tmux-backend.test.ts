import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunRequest, Terminal } from '../../../src/connector/backend.js';
import { parseKeys } from '../../../src/connector/keys.js';
import { ConnectorError } from '../../../src/connector/names.js';
import { TmuxBackend } from '../../../src/connector/tmux/tmux-backend.js';
import { BASH, type Fixture, fixture, until } from './fixture.js';

/** The tmux backend on its own, against a private tmux server (`tmux -L <unique>`). */

const run = (command: string, more: Partial<RunRequest> = {}): RunRequest => ({
  command,
  where: 'new-pane',
  timeoutMs: 20_000,
  maxLines: 100,
  keep: false,
  ...more,
});

async function code(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
    return 'none';
  } catch (error) {
    if (error instanceof ConnectorError) return error.code;
    throw error;
  }
}

let f: Fixture;

beforeAll(async () => {
  f = fixture();
  await f.session('loop-a');
});

afterAll(async () => {
  await f?.stop();
});

describe('listing', () => {
  it('lists panes with canonical ids and session identities, never an environment', async () => {
    const [t] = (await f.backend.list()).filter((x) => x.name === 'loop-a');
    expect(t?.id).toMatch(/^%\d+$/);
    expect(t?.identity).toMatch(/^\$\d+@\d+$/);
    expect(t).toMatchObject({ backend: 'tmux', cols: 80, rows: 20, dead: false, inMode: false });
    expect(Object.keys(t ?? {})).not.toContain('env');
  });

  it('keeps the fields in place whatever a session name or a pane title holds', async () => {
    const hostile = 'x\tR\nF<the-loop-00>E#{pane_id}';
    await f.session('loop-hostile');
    const id = (
      await f.tmux.must(['display-message', '-p', '-t', '=loop-hostile:', '#{session_id}'], 'id')
    ).trim();
    await f.tmux.must(['rename-session', '-t', id, hostile], 'rename');
    await f.tmux.must(['select-pane', '-t', `${id}:`, '-T', '\tF\nE<the-loop-x>R'], 'title');
    const listed = await f.backend.list();
    const t = listed.find((x) => x.name.startsWith('x'));
    expect(t?.id).toMatch(/^%\d+$/);
    expect(t?.identity).toMatch(/^\$\d+@\d+$/);
    expect(t?.cols).toBe(80);
    expect(listed.find((x) => x.name === 'loop-a')).toBeDefined();
    await f.tmux.run(['kill-session', '-t', id]);
  });

  it('spells out invisible characters of a name: no look-alike of a granted name', async () => {
    await f.session('\u2066loop-zz');
    await f.session('loop-b\u202e');
    const names = (await f.backend.list()).map((t) => t.name);
    expect(names).toContain('\\u{2066}loop-zz');
    expect(names).toContain('loop-b\\u{202e}');
    expect(names.filter((n) => n.startsWith('loop-zz') || n === 'loop-b')).toEqual([]);
    await f.tmux.run(['kill-session', '-t', '=\u2066loop-zz']);
    await f.tmux.run(['kill-session', '-t', '=loop-b\u202e']);
  });

  it('says why it cannot be used when no server runs on its socket', async () => {
    const none = new TmuxBackend({ socket: `tl-none-${process.pid}` });
    const available = await none.available();
    expect(available.ok).toBe(false);
    expect(available.ok ? '' : available.reason).toMatch(/no tmux server is running on socket tl-none-/);
    expect(await none.list()).toEqual([]);
    await none.dispose();
  });

  it('refuses a socket name that is not a plain word', () => {
    expect(() => new TmuxBackend({ socket: 'a b;kill-server' })).toThrow(/unsafe tmux socket name/);
  });
});

describe('acting on a pane', () => {
  it('pastes text inert and presses keys by name', async () => {
    const t = await f.terminal('loop-a');
    const canary = join(f.dir, 'pasted');
    await f.backend.sendText(t, `echo $(touch ${canary}) #{pane_id}`);
    await until(async () => (await f.screen(t.id)).includes('#{pane_id}'));
    expect(existsSync(canary)).toBe(false);
    await f.backend.sendKeys(t, parseKeys(['C-c']));
    await f.backend.sendText(t, 'sleep 30');
    await f.backend.sendKeys(t, parseKeys(['Enter']));
    await until(async () => (await f.backend.list()).find((x) => x.id === t.id)?.command === 'sleep');
    await f.backend.sendKeys(t, parseKeys(['C-c']));
    await until(async () => (await f.backend.list()).find((x) => x.id === t.id)?.command === 'bash');
  });

  it('reads the last lines, and says when more were there', async () => {
    const t = await f.terminal('loop-a');
    // bash takes a bracketed paste as text to edit: Enter runs it.
    await f.backend.sendText(t, 'for i in $(seq 1 40); do echo line-$i; done');
    await f.backend.sendKeys(t, parseKeys(['Enter']));
    await until(async () => (await f.screen(t.id)).includes('line-40'));
    const read = await f.backend.read(t, { lines: 5, history: true });
    expect(read.lines).toHaveLength(5);
    expect(read.truncated).toBe(true);
    expect(read.lines.join('\n')).toContain('line-40');
    expect(read.cursor).not.toBeNull();
  });

  it('refuses a pane in copy mode (nothing typed) and reads it still', async () => {
    await f.session('loop-mode');
    const t = await f.terminal('loop-mode');
    await f.tmux.must(['copy-mode', '-t', t.id], 'copy-mode');
    expect(await code(f.backend.sendText(t, 'typed-in-mode'))).toBe('E_PANE_BUSY');
    expect(await code(f.backend.sendKeys(t, parseKeys(['q'])))).toBe('E_PANE_BUSY');
    expect((await f.backend.read(t, { lines: 5, history: false })).lines.join('')).not.toContain(
      'typed-in-mode',
    );
    expect(await code(f.backend.run(t, run('true', { where: 'pane' })))).toBe('E_PANE_BUSY');
    const buffers = await f.tmux.run(['list-buffers', '-F', '#{buffer_name}']);
    expect(buffers.stdout).not.toMatch(/the-loop-/);
  });

  it('refuses a pane whose id now belongs to another session, after a server restart', async () => {
    const other = fixture();
    try {
      await other.session('first', BASH);
      const old = await other.terminal('first');
      await other.tmux.run(['kill-server']);
      // session_created has a resolution of one second: the new session must be created after it.
      await new Promise((r) => setTimeout(r, 1100));
      await other.session('second', BASH);
      const now = await other.terminal('second');
      expect(now.id).toBe(old.id);
      expect(await code(other.backend.sendText(old, 'should-not-arrive'))).toBe('E_TARGET_GONE');
      expect(await code(other.backend.close(old))).toBe('E_TARGET_GONE');
      expect(await other.screen(now.id)).not.toContain('should-not-arrive');
      expect((await other.backend.list()).some((x) => x.id === now.id)).toBe(true);
    } finally {
      await other.stop();
    }
  });

  it('closes a pane, and then says it is gone', async () => {
    await f.session('loop-close');
    const t = await f.terminal('loop-close');
    await f.backend.close(t);
    expect((await f.backend.list()).some((x) => x.id === t.id)).toBe(false);
    expect(await code(f.backend.sendKeys(t, parseKeys(['Enter'])))).toBe('E_TARGET_GONE');
  });
});

describe('running a command', () => {
  it('returns the real exit status and output from a new pane, and leaves no pane', async () => {
    const t = await f.terminal('loop-a');
    const before = (await f.backend.list()).length;
    const r = await f.backend.run(t, run(`printf 'out\\n'; echo '#{pane_id}'; exit 7`));
    expect(r).toMatchObject({ exitStatus: 7, signal: null, timedOut: false, kept: false });
    expect(r.output.split('\n')).toEqual(['out', '#{pane_id}']);
    expect((await f.backend.list()).length).toBe(before);
    expect(f.backend.waiting).toBe(0);
  });

  it('passes a command ending in `;` or `\\;` whole (tmux ends a command at such an argument)', async () => {
    const t = await f.terminal('loop-a');
    const r = await f.backend.run(t, run(String.raw`echo two; echo one \;`));
    expect(r).toMatchObject({ exitStatus: 0, output: 'two\none ;' });
  });

  it('takes a long command of many-byte characters whole (it never rides a tmux command line)', async () => {
    const t = await f.terminal('loop-a');
    const r = await f.backend.run(t, run(`printf %s '${'é'.repeat(8000)}' | wc -c`));
    expect(r).toMatchObject({ exitStatus: 0, output: '16000' });
  });

  it("says when the pane's history was full (its first lines are gone)", async () => {
    await f.tmux.must(['set-option', '-g', 'history-limit', '100'], 'history-limit');
    try {
      const t = await f.terminal('loop-a');
      const r = await f.backend.run(t, run('seq 1 500', { maxLines: 10_000 }));
      expect(r.exitStatus).toBe(0);
      expect(r.output.split('\n').at(-1)).toBe('500');
      expect(r.truncated).toBe(true);
    } finally {
      await f.tmux.must(['set-option', '-g', 'history-limit', '2000'], 'history-limit');
    }
  });

  it('reports the signal that ended it', async () => {
    const r = await f.backend.run(await f.terminal('loop-a'), run('kill -TERM $$'));
    expect(r).toMatchObject({ exitStatus: null, signal: 15, timedOut: false });
  });

  it('gets every status when several end at once (tmux can miss one SIGCHLD)', async () => {
    const t = await f.terminal('loop-a');
    const codes = Array.from({ length: 8 }, (_, i) => i + 1);
    const results = await Promise.all(codes.map((n) => f.backend.run(t, run(`exit ${n}`))));
    expect(results.map((r) => r.exitStatus)).toEqual(codes);
    expect(f.backend.waiting).toBe(0);
  });

  it('stops at the timeout, removes the pane and leaves no waiter', async () => {
    const t = await f.terminal('loop-a');
    const r = await f.backend.run(t, run('echo started; sleep 60', { timeoutMs: 500 }));
    expect(r).toMatchObject({ exitStatus: null, timedOut: true, kept: false });
    expect(r.output).toContain('started');
    expect((await f.backend.list()).some((x) => x.id === r.ranIn)).toBe(false);
    expect(f.backend.waiting).toBe(0);
  });

  it('keeps the pane when asked, with the last lines only', async () => {
    const t = await f.terminal('loop-a');
    const r = await f.backend.run(t, run('seq 1 50', { keep: true, maxLines: 3 }));
    expect(r).toMatchObject({ exitStatus: 0, kept: true, truncated: true, output: '48\n49\n50' });
    const kept = (await f.backend.list()).find((x) => x.id === r.ranIn);
    expect(kept?.dead).toBe(true);
    await f.tmux.run(['kill-pane', '-t', r.ranIn]);
  });

  it('stops when aborted', async () => {
    const t = await f.terminal('loop-a');
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 300);
    const r = await f.backend.run(t, run('sleep 60'), controller.signal);
    expect(r.timedOut).toBe(true);
    expect(f.backend.waiting).toBe(0);
  });

  it('runs in the pane itself at a prompt, and refuses a pane that is running something', async () => {
    await f.session('loop-shell');
    const t = await f.terminal('loop-shell');
    await until(async () => (await f.screen(t.id)).includes('$'));
    // Something half-typed at the prompt is cleared, never run with the command.
    const partial = join(f.dir, 'partial');
    await f.backend.sendText(t, `touch ${partial}; `);
    const r = await f.backend.run(t, run('echo in-pane; false', { where: 'pane' }));
    expect(existsSync(partial)).toBe(false);
    expect(r).toMatchObject({ exitStatus: 1, timedOut: false, ranIn: t.id });
    expect(r.output).toContain('in-pane');
    expect(r.output).not.toMatch(/the-loop-run-/);
    await f.backend.sendText(t, 'sleep 30');
    await f.backend.sendKeys(t, parseKeys(['Enter']));
    await until(async () => (await f.backend.list()).find((x) => x.id === t.id)?.command === 'sleep');
    expect(await code(f.backend.run(t, run('echo no', { where: 'pane' })))).toBe('E_PANE_BUSY');
    await f.backend.sendKeys(t, parseKeys(['C-c']));
  });

  it('refuses to run in a session that went away', async () => {
    await f.session('loop-gone');
    const t: Terminal = await f.terminal('loop-gone');
    await f.tmux.run(['kill-session', '-t', '=loop-gone']);
    expect(await code(f.backend.run(t, run('echo never')))).toBe('E_TARGET_GONE');
  });
});
