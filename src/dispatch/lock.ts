import { closeSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
};

/**
 * One dispatcher per data directory: the daemon holds `<dataDir>/dispatch.lock` (its pid) for its
 * lifetime; `the-loop run` takes it only when no daemon is running. A lock whose pid is dead is stale
 * and taken over.
 */
export function acquireLock(path: string): { release: () => void } | { heldBy: number } {
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fd = openSync(path, 'wx', 0o600);
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return {
        release: () => {
          try {
            if (readFileSync(path, 'utf8').trim() === String(process.pid)) unlinkSync(path);
          } catch {
            // Already gone.
          }
        },
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const holder = Number(readFileSync(path, 'utf8').trim());
      if (Number.isInteger(holder) && holder > 0 && alive(holder)) return { heldBy: holder };
      try {
        unlinkSync(path);
      } catch {
        // Someone else took it over first; try again.
      }
    }
  }
  throw new Error(`cannot take the dispatcher lock ${path}`);
}
