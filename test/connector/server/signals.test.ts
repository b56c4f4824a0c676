import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeProject, pidAlive } from '../../helpers/cli.js';
import { call, privateTmux, startMcp } from '../../helpers/mcp.js';

/**
 * MCP clients end a stdio server by closing its stdin and then, if it lingers, with SIGTERM: either
 * way the connector disposes its backends, so no `tmux wait-for` child of it stays on the tmux server.
 */

const tmux = privateTmux();
let project: ReturnType<typeof makeProject>;

const waiters = () =>
  execFileSync('ps', ['-eo', 'args='], { encoding: 'utf8' })
    .split('\n')
    .filter((a) => a.startsWith('tmux') && a.includes(`-L ${tmux.socket} wait-for`));

async function until(probe: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 30));
  }
}

beforeAll(async () => {
  await tmux.session('loop-sig');
  project = makeProject({
    tmux: { socket: tmux.socket },
    connector: { operators: { ops: { scope: 'write', targets: { single: 'loop-sig' } } } },
  });
});

afterAll(async () => {
  await tmux.stop();
  project?.cleanup();
});

describe('stopping the stdio server', () => {
  it.each(['SIGTERM', 'SIGINT'] as const)('on %s: exits and leaves no waiter behind', async (signal) => {
    const mcp = await startMcp({ cwd: project.dir, args: ['--operator', 'ops'] });
    const ran = await call(mcp.client, 'run_command', { target: 'loop-sig', command: 'exit 2' });
    expect(ran.structured?.exitStatus, ran.text).toBe(2);
    // A run in flight: its waiting tmux child is there when the signal comes.
    const pending = call(mcp.client, 'run_command', { target: 'loop-sig', command: 'sleep 30' }).catch(
      () => null,
    );
    await until(() => waiters().length === 1);
    const pid = mcp.pid as number;
    process.kill(pid, signal);
    await until(() => !pidAlive(pid));
    expect(waiters()).toEqual([]);
    await mcp.close().catch(() => {});
    await pending;
  });
});
