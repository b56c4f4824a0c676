import { readFileSync } from 'node:fs';

/** Whether a process with this pid exists (EPERM: it exists, but is not ours to signal). */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * When a process started, from /proc (Linux): field 22 of /proc/<pid>/stat is its start time in
 * clock ticks after boot, and /proc/stat's btime is the boot time. Null when unknown (not Linux,
 * process gone). Used to tell a process we started from another that reused its pid.
 */
export function processStartTime(pid: number): Date | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) is in parentheses and may contain spaces: split after it.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[19]);
    const btime = Number(/^btime (\d+)$/m.exec(readFileSync('/proc/stat', 'utf8'))?.[1]);
    if (!Number.isFinite(ticks) || !Number.isFinite(btime)) return null;
    // USER_HZ is 100 on every Linux this runs on.
    return new Date((btime + ticks / 100) * 1000);
  } catch {
    return null;
  }
}
