/**
 * Vitest global setup: every test process (and every CLI or daemon a test spawns with
 * `process.env.XDG_STATE_HOME`) gets a state home of its own, under the system temp dir, removed
 * when the run ends. Without it, the CLI's validated-config cache and the guard's kept probes
 * (`<state home>/the-loop/config-cache/`, `…/probe-cache/`) were written into the home of whoever ran
 * the tests. At the end, anything written under the user's `~/.local/state/the-loop` during the run
 * fails it: a test spawned the CLI or the daemon without the run's state home.
 */
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';

const USER_STATE = join(homedir(), '.local', 'state', 'the-loop');

/** The files under `dir` (recursively) changed since `since`. */
function writtenSince(dir: string, since: number): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  return names.flatMap((name) => {
    const path = join(dir, name);
    const stat = statSync(path, { throwIfNoEntry: false });
    if (!stat) return [];
    if (stat.isDirectory()) return writtenSince(path, since);
    return stat.mtimeMs >= since ? [path] : [];
  });
}

export default function setup(): () => void {
  const started = Date.now();
  const dir = mkdtempSync(join(tmpdir(), 'the-loop-test-state-'));
  const before = process.env.XDG_STATE_HOME;
  process.env.XDG_STATE_HOME = dir;
  return () => {
    if (before === undefined) delete process.env.XDG_STATE_HOME;
    else process.env.XDG_STATE_HOME = before;
    rmSync(dir, { recursive: true, force: true });
    const leaked = writtenSince(USER_STATE, started);
    if (leaked.length > 0)
      throw new Error(
        `tests wrote into ${USER_STATE} (a CLI or daemon spawned without XDG_STATE_HOME): ${leaked.join(', ')}`,
      );
  };
}
