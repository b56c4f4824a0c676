/**
 * Vitest global setup: every test process (and every CLI or daemon a test spawns with
 * `process.env`) gets a state home of its own, under the system temp dir, removed when the run ends.
 * Without it, the CLI's validated-config cache (`$XDG_STATE_HOME/the-loop/config-cache/`) was
 * written into the home of whoever ran the tests.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export default function setup(): () => void {
  const dir = mkdtempSync(join(tmpdir(), 'the-loop-test-state-'));
  const before = process.env.XDG_STATE_HOME;
  process.env.XDG_STATE_HOME = dir;
  return () => {
    if (before === undefined) delete process.env.XDG_STATE_HOME;
    else process.env.XDG_STATE_HOME = before;
    rmSync(dir, { recursive: true, force: true });
  };
}
