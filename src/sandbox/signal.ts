import { readdirSync, readFileSync } from 'node:fs';

/**
 * Signals for a sandboxed engine. bwrap does not forward signals to its command, and with
 * `--die-with-parent` its death SIGKILLs everything inside: a SIGTERM sent to bwrap (or to its
 * process group, which bwrap is in) kills bwrap at once, and the engine with SIGKILL before its own
 * SIGTERM handler has run — observed with bwrap 0.8.0: a handler that needed 300 ms never finished.
 * To let the engine stop gracefully, signal the processes inside, not bwrap; bwrap then exits with the
 * engine's status (128 + n for a signal n). SIGKILL to bwrap's group remains the last step.
 *
 * Linux only (reads /proc), like bwrap.
 */

/** Parent pid of `pid` from /proc/<pid>/stat (field 4, after the parenthesised command name). */
function parentOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    return Number.isInteger(ppid) ? ppid : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Every descendant of `bwrapPid` (pids as this process sees them), not bwrap itself: with
 * `--unshare-pid`, bwrap's own pid-1 reaper first, then the engine and its children.
 */
export function sandboxProcesses(bwrapPid: number): number[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || pid <= 0) continue;
    const ppid = parentOf(pid);
    if (ppid !== undefined) children.set(ppid, [...(children.get(ppid) ?? []), pid]);
  }
  const found: number[] = [];
  const queue = [...(children.get(bwrapPid) ?? [])];
  while (queue.length > 0) {
    const pid = queue.shift() as number;
    if (found.includes(pid)) continue;
    found.push(pid);
    queue.push(...(children.get(pid) ?? []));
  }
  return found;
}

/**
 * Send `signal` to every process inside the sandbox started as `bwrapPid`, and not to bwrap. The
 * pid-1 reaper of a PID namespace receives from outside only signals it handles (pid_namespaces(7)),
 * so it ignores this and goes on reaping; the engine gets it. Returns how many were signalled (0: the
 * sandbox is empty or gone). For SIGKILL, signal bwrap's group instead.
 */
export function signalSandboxed(bwrapPid: number, signal: NodeJS.Signals): number {
  let sent = 0;
  for (const pid of sandboxProcesses(bwrapPid)) {
    try {
      process.kill(pid, signal);
      sent += 1;
    } catch {
      // Gone meanwhile.
    }
  }
  return sent;
}
