import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeProject, runCli } from '../../helpers/cli.js';
import { call, privateTmux } from '../../helpers/mcp.js';
import { connectClient, type HttpServer, INITIALIZE, jsonHeaders, raw, startHttp } from './serve.js';

/**
 * `the-loop mcp --http` as a real process on 127.0.0.1: the SDK's Streamable HTTP client with the
 * grant's bearer token works; a request without it, from a rebound Host or a foreign Origin, too
 * large, of the wrong type or to another path is refused before any session sees it.
 */

const tmux = privateTmux();
let project: ReturnType<typeof makeProject>;
let dataDir: string;
let server: HttpServer;
let token: string;

beforeAll(async () => {
  await tmux.session('work-a');
  project = makeProject({
    tmux: { socket: tmux.socket },
    connector: { operators: { ops: { scope: 'read', targets: 'any' } } },
  });
  dataDir = join(project.dir, 'data');
  server = await startHttp(project.dir, { THE_LOOP_DATA_DIR: dataDir });
  token = readFileSync(server.tokenFile, 'utf8');
}, 30_000);

afterAll(async () => {
  await server?.stop();
  await tmux.stop();
  project?.cleanup();
});

describe('serving', () => {
  it('prints where it listens and which file holds the token — never the token — in a private file', () => {
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
    expect(server.operator).toBe('ops');
    expect(server.tokenFile).toMatch(new RegExp(`^${dataDir}/mcp/ops-[0-9a-f]{8}\\.token$`));
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(server.stdout()).not.toContain(token);
    expect(server.stderr()).not.toContain(token);
    expect(statSync(server.tokenFile).mode & 0o777).toBe(0o600);
    expect(statSync(dirname(server.tokenFile)).mode & 0o777).toBe(0o700);
  });

  it('answers the SDK client holding the token: its tools, list_terminals', async () => {
    const { client, transport } = await connectClient(server.url, token);
    try {
      const tools = (await client.listTools()).tools.map((t) => t.name).sort();
      expect(tools).toEqual([
        'close_terminal',
        'list_terminals',
        'read_terminal',
        'run_command',
        'send_input',
      ]);
      const listed = await call(client, 'list_terminals', {});
      expect(listed.isError, listed.text).toBe(false);
      expect(listed.structured?.terminals).toMatchObject([{ name: 'work-a', backend: 'tmux' }]);
      const read = await call(client, 'read_terminal', { target: 'work-a' });
      expect(read.isError, read.text).toBe(false);
      // Scope read: a write is refused by the one gate, as on stdio.
      expect((await call(client, 'send_input', { target: 'work-a', text: 'x' })).code).toBe('E_SCOPE');
    } finally {
      await transport.terminateSession();
      await client.close();
    }
  });
});

describe('refusals', () => {
  it('no token, a wrong one or another scheme: 401 with WWW-Authenticate: Bearer', async () => {
    for (const authorization of [undefined, 'Bearer wrong', `Bearer ${token}x`, `Basic ${token}`, token]) {
      const res = await raw(server.port, {
        headers: jsonHeaders(server.port, null, authorization ? { authorization } : {}),
        body: INITIALIZE,
      });
      expect(res.status, authorization).toBe(401);
      expect(res.headers['www-authenticate']).toMatch(/^Bearer\b/);
    }
    await expect(connectClient(server.url, 'not-the-token')).rejects.toMatchObject({ code: 401 });
  });

  it('a Host other than its loopback names: 403 (DNS rebinding), even with the token', async () => {
    for (const host of [
      'evil.example',
      `evil.example:${server.port}`,
      '127.0.0.1:1',
      `10.0.0.1:${server.port}`,
    ]) {
      const res = await raw(server.port, {
        headers: jsonHeaders(server.port, token, { host }),
        body: INITIALIZE,
      });
      expect(res.status, host).toBe(403);
    }
    // Its own names pass the Host check (then a GET without a session is a bad request).
    for (const host of [`localhost:${server.port}`, `LOCALHOST:${server.port}`, `[::1]:${server.port}`]) {
      const res = await raw(server.port, {
        method: 'GET',
        headers: jsonHeaders(server.port, token, { host }),
      });
      expect(res.status, host).toBe(400);
    }
  });

  it('an Origin other than its own: 403; its own is let through', async () => {
    for (const origin of [
      'http://evil.example',
      `http://evil.example:${server.port}`,
      'null',
      `https://127.0.0.1:${server.port}`,
    ]) {
      const res = await raw(server.port, {
        headers: jsonHeaders(server.port, token, { origin }),
        body: INITIALIZE,
      });
      expect(res.status, origin).toBe(403);
    }
    const own = await raw(server.port, {
      method: 'GET',
      headers: jsonHeaders(server.port, token, { origin: `http://localhost:${server.port}` }),
    });
    expect(own.status).toBe(400);
  });

  it('a body over 1 MiB: 413, declared or streamed', async () => {
    const declared = await raw(server.port, {
      headers: jsonHeaders(server.port, token, { 'content-length': String(2 * 1024 * 1024) }),
      headOnly: true,
    });
    expect(declared.status).toBe(413);
    const big = JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'ping',
      params: { pad: 'x'.repeat(1536 * 1024) },
    });
    const streamed = await raw(server.port, {
      headers: jsonHeaders(server.port, token),
      body: big,
      chunked: true,
    });
    expect(streamed.status).toBe(413);
  });

  it('another path 404, another method 405, another content type 415, broken JSON 400', async () => {
    expect(
      (await raw(server.port, { path: '/', headers: jsonHeaders(server.port, token), body: INITIALIZE }))
        .status,
    ).toBe(404);
    expect(
      (await raw(server.port, { path: '/mcp/x', method: 'GET', headers: jsonHeaders(server.port, token) }))
        .status,
    ).toBe(404);
    const put = await raw(server.port, {
      method: 'PUT',
      headers: jsonHeaders(server.port, token),
      body: INITIALIZE,
    });
    expect(put.status).toBe(405);
    expect(put.headers.allow).toBe('GET, POST, DELETE');
    const text = await raw(server.port, {
      headers: jsonHeaders(server.port, token, { 'content-type': 'text/plain' }),
      body: INITIALIZE,
    });
    expect(text.status).toBe(415);
    const broken = await raw(server.port, { headers: jsonHeaders(server.port, token), body: '{"jsonrpc":' });
    expect(broken.status).toBe(400);
    expect(JSON.parse(broken.body).error.code).toBe(-32700);
    // A message that is not initialize, without a session: no session opens for it.
    const ping = JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'ping' });
    expect((await raw(server.port, { headers: jsonHeaders(server.port, token), body: ping })).status).toBe(
      400,
    );
    const unknown = await raw(server.port, {
      headers: jsonHeaders(server.port, token, { 'mcp-session-id': 'no-such-session' }),
      body: ping,
    });
    expect(unknown.status).toBe(404);
  });
});

describe('start-up', () => {
  it('refuses a non-loopback --host, and --host/--port without --http', async () => {
    const env = { THE_LOOP_DATA_DIR: dataDir };
    for (const host of ['0.0.0.0', '192.168.1.10', '::', 'example.com']) {
      const res = await runCli(['mcp', '--http', '--host', host, '--port', '0'], { cwd: project.dir, env });
      expect(res.code, res.stderr).toBe(2);
      expect(res.stderr).toMatch(/loopback/);
      expect(res.stdout).toBe('');
    }
    const stray = await runCli(['mcp', '--port', '0'], { cwd: project.dir, env });
    expect(stray.code).toBe(2);
    expect(stray.stderr).toMatch(/--http/);
  });

  it('refuses a second server of the same grant while the first runs (its token stays)', async () => {
    const res = await runCli(['mcp', '--http', '--port', '0'], {
      cwd: project.dir,
      env: { THE_LOOP_DATA_DIR: dataDir },
    });
    expect(res.code, res.stderr).toBe(2);
    expect(res.stderr).toContain(server.tokenFile);
    expect(readFileSync(server.tokenFile, 'utf8')).toBe(token);
    expect(existsSync(server.tokenFile)).toBe(true);
  });
});
