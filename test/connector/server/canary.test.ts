import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canaryFormsIn, canaryLeaksUnder } from '../../helpers/canary.js';
import { makeProject, runCli } from '../../helpers/cli.js';
import { call, type McpHandle, privateTmux, startMcp } from '../../helpers/mcp.js';

/**
 * Secrets and the connector: a secret in a terminal's environment, and a credential the-loop holds,
 * appear in no tool result, no audit row, no file of the data dir and no process argv — whatever the
 * tools are asked.
 */

const PANE_SECRET = 'pane-canary-5f1d9a7c3b2e8d40';
const LOOP_SECRET = 'sk-ant-api03-canary-7e3a1c9b5d2f4a6e8c0b';
const tmux = privateTmux();
let project: ReturnType<typeof makeProject>;
let mcp: McpHandle;
const results: string[] = [];

beforeAll(async () => {
  await tmux.session('work-env', ['bash', '--norc', '--noprofile'], { PANE_SECRET_TOKEN: PANE_SECRET });
  // A terminal that shows the-loop's own credential (as a misconfigured program might).
  await tmux.session('work-shows', ['sh', '-c', `echo "key=${LOOP_SECRET}"; exec bash --norc --noprofile`]);
  project = makeProject({
    tmux: { socket: tmux.socket },
    connector: {
      operators: { ops: { scope: 'destroy', targets: { prefixes: ['work-'] }, run: { timeoutSeconds: 10 } } },
    },
  });
  mcp = await startMcp({ cwd: project.dir, env: { ANTHROPIC_API_KEY: LOOP_SECRET } });
}, 30_000);

afterAll(async () => {
  await mcp?.close();
  await tmux.stop();
  project?.cleanup();
});

async function keep(name: string, args: Record<string, unknown>) {
  const result = await call(mcp.client, name, args);
  results.push(JSON.stringify(result));
  return result;
}

describe('secrets', () => {
  it('a terminal environment is never listed, and known secrets are masked in what tools return', async () => {
    await keep('list_terminals', {});
    await keep('send_input', { target: 'work-env', text: 'echo visible', keys: ['Enter'] });
    await keep('read_terminal', { target: 'work-env', lines: 50, history: true });
    await keep('run_command', { target: 'work-env', command: 'echo ran' });
    await keep('run_command', { target: 'work-env', command: 'sleep 30', timeoutSeconds: 1 });
    await new Promise((r) => setTimeout(r, 300));
    const shown = await keep('read_terminal', { target: 'work-shows', lines: 20 });
    expect(shown.isError).toBe(false);
    expect(JSON.stringify(shown.structured)).toContain('key=');
    await keep('close_terminal', { target: 'work-shows' });
    for (const text of results) {
      expect(canaryFormsIn(text, PANE_SECRET)).toEqual([]);
      expect(canaryFormsIn(text, LOOP_SECRET)).toEqual([]);
    }
  });

  it('is in no audit row, no file of the data dir, and on no command line', async () => {
    const audit = await runCli(['mcp', 'audit', '--json'], {
      cwd: project.dir,
      env: { ANTHROPIC_API_KEY: LOOP_SECRET },
    });
    expect(audit.code, audit.stderr).toBe(0);
    expect(audit.stdout).toContain('run_command');
    for (const secret of [PANE_SECRET, LOOP_SECRET]) {
      expect(canaryFormsIn(audit.stdout, secret)).toEqual([]);
      expect(canaryLeaksUnder(join(project.dir, '.the-loop'), secret)).toEqual([]);
    }
    if (mcp.pid) {
      const argv = readFileSync(`/proc/${mcp.pid}/cmdline`, 'utf8');
      expect(canaryFormsIn(argv, LOOP_SECRET)).toEqual([]);
      expect(statSync(`/proc/${mcp.pid}`).isDirectory()).toBe(true);
    }
  });
});
