import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeProject, pidAlive, runCli } from '../../helpers/cli.js';
import { call, privateTmux } from '../../helpers/mcp.js';
import { connectClient, type HttpServer, INITIALIZE, jsonHeaders, raw, startHttp } from './serve.js';

/**
 * Sessions of `the-loop mcp --http`: each has its own connection (its own id in the audit, its own
 * binding of a `single` grant, made when it starts), at most 16 at once, DELETE ends one, and SIGTERM
 * ends them all, removes the token file and exits 0.
 */

const tmux = privateTmux();
let project: ReturnType<typeof makeProject>;
let dataDir: string;
const servers: HttpServer[] = [];

beforeAll(async () => {
  await tmux.session('work-a');
  project = makeProject({
    tmux: { socket: tmux.socket },
    connector: {
      operators: {
        ops: { scope: 'read', targets: 'any' },
        pinned: { scope: 'read', targets: { single: 'bound' } },
      },
    },
  });
  dataDir = join(project.dir, 'data');
}, 30_000);

afterAll(async () => {
  for (const s of servers) await s.stop();
  await tmux.stop();
  project?.cleanup();
});

async function serve(operator: string): Promise<{ server: HttpServer; token: string }> {
  const server = await startHttp(project.dir, { THE_LOOP_DATA_DIR: dataDir }, ['--operator', operator]);
  servers.push(server);
  return { server, token: readFileSync(server.tokenFile, 'utf8') };
}

async function auditConnections(operator: string): Promise<Set<string>> {
  const audit = await runCli(['mcp', 'audit', '--json', '--operator', operator], {
    cwd: project.dir,
    env: { THE_LOOP_DATA_DIR: dataDir },
  });
  expect(audit.code, audit.stderr).toBe(0);
  const rows = JSON.parse(audit.stdout) as Array<{ connection: string; operator: string }>;
  // `--operator` and `--json` after `audit` are the report's, though `mcp` has options of those names.
  expect(rows.every((r) => r.operator === operator)).toBe(true);
  return new Set(rows.map((r) => r.connection));
}

describe('sessions', () => {
  it('each session is its own connection; DELETE ends one; SIGTERM ends all and cleans up', async () => {
    const { server, token } = await serve('ops');
    const one = await connectClient(server.url, token);
    const two = await connectClient(server.url, token);
    expect(one.transport.sessionId).not.toBe(two.transport.sessionId);
    expect((await call(one.client, 'list_terminals', {})).isError).toBe(false);
    expect((await call(two.client, 'list_terminals', {})).isError).toBe(false);
    expect((await auditConnections('ops')).size).toBe(2);

    // DELETE: that session is gone (its id answers 404), the other goes on.
    const ended = one.transport.sessionId as string;
    await one.transport.terminateSession();
    await one.client.close();
    const ping = JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'ping' });
    const gone = await raw(server.port, {
      headers: jsonHeaders(server.port, token, { 'mcp-session-id': ended }),
      body: ping,
    });
    expect(gone.status).toBe(404);
    expect((await call(two.client, 'list_terminals', {})).isError).toBe(false);

    const pid = server.child.pid as number;
    expect(await server.stop()).toBe(0);
    expect(pidAlive(pid)).toBe(false);
    expect(existsSync(server.tokenFile)).toBe(false);
    // The token file is gone; the install's audit key stays.
    expect(readdirSync(join(dataDir, 'mcp'))).toEqual(['audit.key']);
    await expect(call(two.client, 'list_terminals', {})).rejects.toThrow();
    await two.client.close();
  }, 30_000);

  it('at most 16 at once: the 17th is 503 until one ends', async () => {
    const { server, token } = await serve('ops');
    const ids: string[] = [];
    for (let i = 0; i < 16; i++) {
      const res = await raw(server.port, { headers: jsonHeaders(server.port, token), body: INITIALIZE });
      expect(res.status, res.body).toBe(200);
      ids.push(res.headers['mcp-session-id'] as string);
    }
    expect(new Set(ids).size).toBe(16);
    const full = await raw(server.port, { headers: jsonHeaders(server.port, token), body: INITIALIZE });
    expect(full.status).toBe(503);
    expect(full.headers['retry-after']).toBeDefined();
    const del = await raw(server.port, {
      method: 'DELETE',
      headers: jsonHeaders(server.port, token, { 'mcp-session-id': ids[0] as string }),
    });
    expect(del.status).toBe(200);
    const again = await raw(server.port, { headers: jsonHeaders(server.port, token), body: INITIALIZE });
    expect(again.status).toBe(200);
    expect(await server.stop()).toBe(0);
  }, 30_000);

  it("binds a single grant's terminal when each session starts", async () => {
    const { server, token } = await serve('pinned');
    // No terminal of that name yet: the session cannot start, the server goes on.
    const early = await raw(server.port, { headers: jsonHeaders(server.port, token), body: INITIALIZE });
    expect(early.status).toBe(503);
    expect(early.body).toContain('bound');

    await tmux.session('bound');
    const first = await connectClient(server.url, token);
    expect((await call(first.client, 'read_terminal', { target: 'bound' })).isError).toBe(false);
    // Re-created under the same name: the first session's binding does not follow; a new session binds it.
    await tmux.tmux.must(['kill-session', '-t', '=bound'], 'kill-session');
    await tmux.session('bound');
    expect((await call(first.client, 'read_terminal', { target: 'bound' })).code).toBe('E_TARGET_NOT_BOUND');
    const second = await connectClient(server.url, token);
    expect((await call(second.client, 'read_terminal', { target: 'bound' })).isError).toBe(false);
    // Two sessions, two connections; the other operator's calls are not among them.
    expect((await auditConnections('pinned')).size).toBe(2);
    for (const c of [first, second]) {
      await c.transport.terminateSession();
      await c.client.close();
    }
    expect(await server.stop()).toBe(0);
  }, 30_000);
});
