import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Tmux } from '../../src/runners/tmux/tmux.js';
import { pidAlive } from './cli.js';

/** The pids of these processes and all their descendants (from `ps`). */
function withDescendants(roots: number[]): number[] {
  const children = new Map<number, number[]>();
  for (const line of execFileSync('ps', ['-eo', 'pid=,ppid='], { encoding: 'utf8' }).split('\n')) {
    const [pid, ppid] = line.trim().split(/\s+/).map(Number);
    if (!pid || ppid === undefined) continue;
    children.set(ppid, [...(children.get(ppid) ?? []), pid]);
  }
  const all = new Set<number>();
  const visit = (pid: number) => {
    if (all.has(pid)) return;
    all.add(pid);
    for (const child of children.get(pid) ?? []) visit(child);
  };
  for (const root of roots) visit(root);
  return [...all];
}

/**
 * End a test's private tmux server and wait for every program started in its panes to exit (a TUI
 * keeps writing its config for a moment after SIGHUP, from a child of the pane's process), then
 * remove the socket file tmux leaves behind.
 */
export async function stopTmuxServer(tmux: Tmux): Promise<void> {
  const panes = await tmux.run(['list-panes', '-a', '-F', '#{pane_pid}']);
  const roots = panes.ok
    ? panes.stdout
        .split('\n')
        .map(Number)
        .filter((n) => Number.isInteger(n) && n > 0)
    : [];
  const pids = withDescendants(roots);
  await tmux.run(['kill-server']);
  for (let i = 0; i < 100 && pids.some(pidAlive); i++) await new Promise((r) => setTimeout(r, 100));
  if (tmux.socket)
    rmSync(join(process.env.TMUX_TMPDIR ?? tmpdir(), `tmux-${process.getuid?.() ?? 0}`, tmux.socket), {
      force: true,
    });
}

/** The processes of one tmux session's panes, with their descendants. */
export async function sessionProcesses(tmux: Tmux, target: string): Promise<number[]> {
  const panes = await tmux.run(['list-panes', '-s', '-t', `=${target}`, '-F', '#{pane_pid}']);
  const roots = panes.ok
    ? panes.stdout
        .split('\n')
        .map(Number)
        .filter((n) => Number.isInteger(n) && n > 0)
    : [];
  return withDescendants(roots);
}

export async function waitGone(pids: number[], timeoutMs = 10_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (pids.some(pidAlive) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  return !pids.some(pidAlive);
}

/** A TUI may still write its config for a few seconds after its tmux server is gone: retry the removal. */
export async function removeWhenQuiet(dir: string): Promise<void> {
  for (let i = 0; ; i++) {
    try {
      rmSync(dir, { recursive: true, force: true });
      return;
    } catch (error) {
      if (i >= 50) throw error;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}
