import { signalSandboxed } from '../../sandbox/signal.js';

/**
 * Wait for `promise` or `ms`, whichever comes first, and clear the timer either way. The timer is
 * ref'd on purpose: someone awaits this wait, and an unref'd timer would let a CLI process exit in
 * the middle of it (with exit code 0 and an unfinished turn) once the child's handles are gone.
 * Clearing it keeps it from holding the daemon open afterwards.
 */
export async function raceTimeout<T>(promise: Promise<T>, ms: number): Promise<T | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

// A plain timer (ref'd: it is awaited). Racing a shared never-settling promise would leak a
// reaction on it per call in a long-lived daemon.
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** True while any process of the group led by `pgid` exists. */
export function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists but is not ours to signal; still alive.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // Already gone.
  }
}

/** What the stop sequence needs of a process we started: however it was started (pipes or a PTY). */
export interface StoppableProcess {
  readonly pid: number | undefined;
  /** The leader has exited (and was reaped). */
  hasExited(): boolean;
  /** The first, gentlest step: close the engine's input. False when it has no input left to close. */
  closeInput(): boolean;
}

/**
 * Stop a process we started (as the leader of its own process group — spawned detached, or on a PTY
 * as a session leader — so everything it started can be reached by signalling `-pid`). Steps: close
 * stdin, wait; SIGTERM the group, wait; SIGKILL the group. Resolves with the step that ended it once
 * the leader has exited and no process of the group remains (or, after SIGKILL, once a bounded wait
 * for the kernel has passed).
 */
export async function terminateProcessGroup(
  child: StoppableProcess,
  exited: Promise<unknown>,
  graceMs: number,
  options: { sandboxed?: boolean } = {},
): Promise<'exit' | 'SIGTERM' | 'SIGKILL'> {
  const pid = child.pid;
  if (pid === undefined) return 'exit';
  const allGone = () => child.hasExited() && !groupAlive(pid);
  const waitFor = async (ms: number) => {
    const deadline = Date.now() + ms;
    await raceTimeout(exited, ms);
    // The leader may be gone while group members linger: poll them until the deadline.
    while (!allGone() && Date.now() < deadline) await sleep(Math.min(50, Math.max(1, deadline - Date.now())));
    return allGone();
  };
  if (allGone()) return 'exit';
  if (child.closeInput()) {
    if (await waitFor(Math.min(graceMs, 1000))) return 'exit';
  }
  // bwrap forwards no signal and SIGKILLs its sandbox when it dies: the engine inside gets SIGTERM
  // itself, so it can stop cleanly (bwrap then exits with it).
  if (options.sandboxed) signalSandboxed(pid, 'SIGTERM');
  else signalGroup(pid, 'SIGTERM');
  if (await waitFor(graceMs)) return 'SIGTERM';
  signalGroup(pid, 'SIGKILL');
  await waitFor(5000);
  return 'SIGKILL';
}
