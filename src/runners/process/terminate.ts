import type { ChildProcess } from 'node:child_process';

const sleep = (ms: number) =>
  new Promise<void>((resolve) => {
    // unref: a pending grace timer must never keep the daemon alive on its own.
    setTimeout(resolve, ms).unref();
  });

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

/**
 * Stop a child we started (spawned detached, so it leads its own process group and everything it
 * started can be reached by signalling `-pid`). Steps: close stdin, wait; SIGTERM the group, wait;
 * SIGKILL the group. Resolves with the step that ended it once the leader has exited and no process
 * of the group remains.
 */
export async function terminateProcessGroup(
  child: ChildProcess,
  exited: Promise<unknown>,
  graceMs: number,
): Promise<'exit' | 'SIGTERM' | 'SIGKILL'> {
  const pid = child.pid;
  if (pid === undefined) return 'exit';
  const leaderGone = () => child.exitCode !== null || child.signalCode !== null;
  const allGone = () => leaderGone() && !groupAlive(pid);
  const waitFor = async (ms: number) => {
    const deadline = Date.now() + ms;
    await Promise.race([exited, sleep(ms)]);
    // The leader may be gone while group members linger: poll them until the deadline.
    while (!allGone() && Date.now() < deadline) await sleep(Math.min(50, Math.max(1, deadline - Date.now())));
    return allGone();
  };
  if (child.stdin && !child.stdin.destroyed) {
    child.stdin.end();
    if (await waitFor(Math.min(graceMs, 1000))) return 'exit';
  }
  if (allGone()) return 'exit';
  signalGroup(pid, 'SIGTERM');
  if (await waitFor(graceMs)) return 'SIGTERM';
  signalGroup(pid, 'SIGKILL');
  // SIGKILL cannot be ignored; wait for the kernel to reap the group.
  await waitFor(5000);
  return 'SIGKILL';
}
