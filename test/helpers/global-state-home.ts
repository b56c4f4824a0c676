/**
 * Vitest global setup: every test process (and every CLI or daemon a test spawns with
 * `process.env.XDG_STATE_HOME`) gets a state home of its own, under the system temp dir, removed
 * when the run ends. Without it, the CLI's validated-config cache (`<state home>/the-loop/config-cache/`)
 * was written into the home of whoever ran the tests. At the end, an entry written there during the
 * run fails it: a test spawned the CLI without the run's state home.
 */
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';

const USER_CACHE = join(homedir(), '.local', 'state', 'the-loop', 'config-cache');

function writtenSince(dir: string, since: number): string[] {
  try {
    return readdirSync(dir).filter((name) => statSync(join(dir, name)).mtimeMs >= since);
  } catch {
    return [];
  }
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
    const leaked = writtenSince(USER_CACHE, started);
    if (leaked.length > 0)
      throw new Error(
        `tests wrote ${leaked.length} config-cache entries into ${USER_CACHE} (a CLI spawned without XDG_STATE_HOME)`,
      );
  };
}
