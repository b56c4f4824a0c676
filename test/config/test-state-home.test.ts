import { existsSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { stateHome } from '../../src/config/data-dir.js';

// The suite's global setup (test/helpers/global-state-home.ts) gives the run a state home of its own:
// no test writes the validated-config cache, or anything else, into the home of whoever runs it.
describe('the test run’s state home', () => {
  it('is a private temp dir, not the user’s ~/.local/state', () => {
    const dir = process.env.XDG_STATE_HOME ?? '';
    expect(dir.startsWith(join(tmpdir(), 'the-loop-test-state-'))).toBe(true);
    expect(existsSync(dir)).toBe(true);
    expect(stateHome(process.env)).toBe(dir);
    expect(stateHome(process.env).startsWith(join(homedir(), '.local/state'))).toBe(false);
  });
});
