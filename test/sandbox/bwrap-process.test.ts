import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { Tmux } from '../../src/runners/tmux/tmux.js';
import { bwrapArgv } from '../../src/sandbox/bwrap.js';
import { sandboxProcesses, signalSandboxed } from '../../src/sandbox/signal.js';
import { pidAlive } from '../helpers/cli.js';
import { stopTmuxServer, waitGone } from '../helpers/tmux.js';
import { BWRAP, bwrap, FIXTURES, REPO_READ_ONLY, SUITE, tempRoot, until } from './helpers.js';

// The sandbox's process tree: it dies with its parent, with bwrap, and with a process-group kill; a
// graceful stop reaches the engine; a terminal stays the engine's unless --new-session.
const root = tempRoot('tl-sbx-proc-');
const HOLD = join(FIXTURES, 'hold.mjs');
const PARENT = join(FIXTURES, 'parent.mjs');
const TTY = join(FIXTURES, 'tty.mjs');
const started: number[] = [];
const tmux = new Tmux({ socket: `tl-sbx-${randomUUID().slice(0, 8)}` });

afterEach(() => {
  // Whatever a failed test left: only the processes this file started, by pid.
  for (const pid of started.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Gone.
    }
  }
});
afterAll(async () => {
  await stopTmuxServer(tmux);
  rmSync(root, { recursive: true, force: true });
});

let runs = 0;
/** A fresh writable out dir and the bwrap argv that binds it (and works in it). */
function sandbox(newSession: boolean) {
  const out = join(root, `run-${++runs}`);
  mkdirSync(out);
  const empty = { readOnly: REPO_READ_ONLY, writableFiles: [], sockets: [], hiddenDirs: [], hiddenFiles: [] };
  return { out, argv: bwrapArgv({ ...empty, writable: [out], chdir: out, newSession }) };
}

/** bwrap running hold.mjs, detached (the leader of its own process group) like the process runner. */
async function holdDetached(newSession: boolean, mode: 'graceful' | 'plain') {
  const { out, argv } = sandbox(newSession);
  const child = spawn(BWRAP, [...argv, process.execPath, HOLD, out, mode], {
    detached: true,
    stdio: 'ignore',
  });
  const exit = new Promise<{ code: number | null; signal: string | null }>((r) =>
    child.once('exit', (code, signal) => r({ code, signal })),
  );
  const pid = child.pid as number;
  started.push(pid);
  expect(await until(() => existsSync(join(out, 'ready')))).toBe(true);
  const inside = sandboxProcesses(pid);
  started.push(...inside);
  return { out, pid, inside, exit, child };
}

const alive = (pids: number[]) => pids.filter(pidAlive);

describe.skipIf(!bwrap.available)(SUITE, () => {
  it('lists the processes inside: the pid-1 reaper, the engine and its child', async () => {
    const { pid, inside } = await holdDetached(false, 'plain');
    // bwrap's reaper (pid 1 inside), hold.mjs, and the child hold.mjs started.
    expect(inside).toHaveLength(3);
    process.kill(pid, 'SIGKILL');
    expect(await waitGone([pid, ...inside])).toBe(true);
  });

  it("dies with its parent: killing bwrap's parent leaves no process of the sandbox", async () => {
    const { out, argv } = sandbox(false);
    const parent: ChildProcess = spawn(
      process.execPath,
      [PARENT, BWRAP, ...argv, process.execPath, HOLD, out, 'plain'],
      {
        stdio: ['ignore', 'pipe', 'ignore'],
      },
    );
    started.push(parent.pid as number);
    const bwrapPid = Number(
      await new Promise<string>((r) =>
        parent.stdout?.setEncoding('utf8').once('data', (d: string) => r(d.trim())),
      ),
    );
    started.push(bwrapPid);
    expect(await until(() => existsSync(join(out, 'ready')))).toBe(true);
    const inside = sandboxProcesses(bwrapPid);
    started.push(...inside);
    expect(inside.length).toBeGreaterThanOrEqual(3);
    parent.kill('SIGKILL');
    expect(await waitGone([bwrapPid, ...inside])).toBe(true);
  });

  it('dies with bwrap: SIGKILL to bwrap alone takes the whole tree', async () => {
    const { pid, inside, exit } = await holdDetached(false, 'plain');
    process.kill(pid, 'SIGKILL');
    expect(await exit).toEqual({ code: null, signal: 'SIGKILL' });
    expect(await waitGone(inside)).toBe(true);
  });

  for (const newSession of [false, true]) {
    it(`stops everything on a process-group kill of a detached bwrap (newSession: ${newSession})`, async () => {
      const { pid, inside, exit } = await holdDetached(newSession, 'plain');
      process.kill(-pid, 'SIGTERM');
      expect((await exit).signal).toBe('SIGTERM');
      expect(await waitGone([pid, ...inside])).toBe(true);
      expect(alive(inside)).toEqual([]);
    });
  }

  it('lets the engine stop gracefully when the signal goes inside (signalSandboxed), not to bwrap', async () => {
    const { out, pid, inside, exit } = await holdDetached(true, 'graceful');
    // Not the reaper (it ignores signals it has no handler for): the engine and its child.
    expect(signalSandboxed(pid, 'SIGTERM')).toBe(3);
    // bwrap stays, and exits with the engine's own status once it is done.
    expect(await exit).toEqual({ code: 0, signal: null });
    expect(readFileSync(join(out, 'termed'), 'utf8')).toBe('saved');
    expect(await waitGone(inside)).toBe(true);
  });

  it('reports an engine killed by a signal as exit 128 + n', async () => {
    const { pid, inside, exit } = await holdDetached(false, 'plain');
    signalSandboxed(pid, 'SIGTERM');
    expect(await exit).toEqual({ code: 143, signal: null });
    expect(await waitGone(inside)).toBe(true);
    expect(signalSandboxed(pid, 'SIGTERM')).toBe(0);
  });

  it('keeps the controlling terminal in a tmux pane unless newSession', async () => {
    const seen: Record<string, unknown> = {};
    for (const newSession of [false, true]) {
      const { out, argv } = sandbox(newSession);
      const report = join(out, 'tty.json');
      const name = `sbx-tty-${newSession ? 'new' : 'kept'}`;
      await tmux.must(
        [
          'new-session',
          '-d',
          '-s',
          name,
          '-x',
          '80',
          '-y',
          '20',
          '--',
          BWRAP,
          ...argv,
          process.execPath,
          TTY,
          report,
        ],
        'new-session',
      );
      expect(await until(() => existsSync(report) && readFileSync(report, 'utf8').length > 0)).toBe(true);
      seen[String(newSession)] = JSON.parse(readFileSync(report, 'utf8'));
    }
    expect(seen).toEqual({
      false: { stdin: true, stdout: true, controlling: 'ok' },
      // Its stdio is still the pane's terminal, but no longer its controlling terminal.
      true: { stdin: true, stdout: true, controlling: 'ENXIO' },
    });
  });
});
