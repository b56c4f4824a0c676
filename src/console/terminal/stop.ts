import { raceTimeout } from '../../runners/process/terminate.js';

/**
 * End a process we started, by its pid, in steps: a first signal (SIGHUP for a tmux client on a pty,
 * as a terminal hang-up; SIGTERM otherwise), a wait, then SIGKILL and a bounded wait. Never by name.
 */
export async function stopPid(
  pid: number | undefined,
  exited: Promise<unknown>,
  first: NodeJS.Signals = 'SIGTERM',
  waitMs = 1000,
): Promise<'exited' | 'killed'> {
  if (pid === undefined) return 'exited';
  const done = exited.then(() => 'exited' as const);
  signal(pid, first);
  if ((await raceTimeout(done, waitMs)) === 'exited') return 'exited';
  signal(pid, 'SIGKILL');
  await raceTimeout(done, waitMs);
  return 'killed';
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // Already gone.
  }
}
