import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb } from '../../../src/store/db.js';
import { SqliteSessionStore } from '../../../src/store/sqlite/sessions.js';
import { makeProject, runCli } from '../../helpers/cli.js';
import { call, type McpHandle, privateTmux, startMcp } from '../../helpers/mcp.js';

/**
 * The daemon's own agent sessions as targets: a `session` grant binds exactly the tmux session of one
 * work item's active session (and its drives are charged to that work item); no grant closes one of
 * them, nor the terminal the connector itself runs in.
 */

const tmux = privateTmux();
let project: ReturnType<typeof makeProject>;
let dataDir: string;
const open: McpHandle[] = [];
const WORK_ITEM = 'github:octo/widgets#7';

beforeAll(async () => {
  for (const name of ['loop-agent', 'loop-agent-2', 'loop-scratch']) await tmux.session(name);
  project = makeProject({
    tmux: { socket: tmux.socket },
    connector: {
      operators: {
        nudger: { scope: 'write', targets: { session: WORK_ITEM } },
        admin: { scope: 'destroy', targets: { prefixes: ['loop-'] } },
      },
    },
  });
  dataDir = join(project.dir, 'data');
  // Register the agent session as the daemon would have (the registry in the data dir).
  const first = await runCli(['mcp', 'grants'], { cwd: project.dir, env: { THE_LOOP_DATA_DIR: dataDir } });
  expect(first.code, first.stderr).toBe(0);
  const db = openDb(join(dataDir, 'the-loop.db'));
  const sessions = new SqliteSessionStore(db, { scrub: (t) => t });
  await sessions.create({
    workItem: WORK_ITEM,
    slug: 'github-octo-widgets-7',
    engine: 'claude',
    runner: 'tmux',
    tmuxTarget: 'loop-agent',
    engineSessionId: null,
    cwd: project.dir,
    credentialKind: null,
    credentialEnv: null,
  });
  db.close();
}, 30_000);

afterAll(async () => {
  for (const handle of open) await handle.close();
  await tmux.stop();
  project?.cleanup();
});

async function connect(args: string[], env: Record<string, string> = {}): Promise<McpHandle> {
  const handle = await startMcp({ cwd: project.dir, args, env: { THE_LOOP_DATA_DIR: dataDir, ...env } });
  open.push(handle);
  return handle;
}

describe("the daemon's sessions", () => {
  it('a session grant reaches that session only, and charges its drives to its work item', async () => {
    const nudger = await connect(['--operator', 'nudger']);
    const listed = await call(nudger.client, 'list_terminals', {});
    expect(listed.structured?.terminals).toMatchObject([{ name: 'loop-agent', agentSession: WORK_ITEM }]);
    const nudge = await call(nudger.client, 'send_input', { target: 'loop-agent', text: 'keep going' });
    expect(nudge.isError, nudge.text).toBe(false);
    expect((await call(nudger.client, 'read_terminal', { target: 'loop-agent-2' })).code).toBe(
      'E_TARGET_NOT_BOUND',
    );
    expect((await call(nudger.client, 'read_terminal', { target: 'loop-scratch' })).code).toBe(
      'E_TARGET_NOT_BOUND',
    );
    const audit = await runCli(['mcp', 'audit', '--json', '--operator', 'nudger'], {
      cwd: project.dir,
      env: { THE_LOOP_DATA_DIR: dataDir },
    });
    const rows = JSON.parse(audit.stdout) as Array<{
      tool: string;
      workItem: string | null;
      outcome: string;
    }>;
    expect(rows.find((r) => r.tool === 'send_input' && r.outcome === 'ok')?.workItem).toBe(WORK_ITEM);
  });

  it('is never closed, whatever the scope; other terminals are', async () => {
    const admin = await connect(['--operator', 'admin']);
    const refused = await call(admin.client, 'close_terminal', { target: 'loop-agent' });
    expect(refused.code).toBe('E_SCOPE');
    expect((await tmux.tmux.run(['has-session', '-t', '=loop-agent'])).ok).toBe(true);
    expect((await call(admin.client, 'close_terminal', { target: 'loop-scratch' })).isError).toBe(false);
  });

  it('nor is the terminal the connector runs in', async () => {
    const own = await tmux.paneOf('loop-agent-2');
    const admin = await connect(['--operator', 'admin'], { TMUX_PANE: own });
    const refused = await call(admin.client, 'close_terminal', { target: own });
    expect(refused.code).toBe('E_SCOPE');
    expect((await tmux.tmux.run(['has-session', '-t', '=loop-agent-2'])).ok).toBe(true);
  });
});
