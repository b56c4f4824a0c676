/**
 * The gateway's capability tokens (stored hashed, revoked with their session) and its listeners:
 * routing, where a token may be carried, refusals before any handler runs, the Unix socket.
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { resolvePolicy } from '../../src/acts/policy.js';
import { headerToken, MAX_CONNECTIONS, routeOf, startGateway } from '../../src/gateway/server.js';
import { GatewayTokens, isTokenShaped, TOKEN_PATTERN } from '../../src/gateway/tokens.js';
import type { GatewayHandler, GatewayPorts, GatewaySession } from '../../src/gateway/types.js';
import { createLogger, memorySink, SecretScrubber } from '../../src/log/logger.js';
import { type Db, openDb } from '../../src/store/db.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sessions.js';
import { SqliteTokenStore } from '../../src/store/sqlite/tokens.js';

let dir: string;
let db: Db;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'the-loop-gw-'));
  db = openDb(join(dir, 'the-loop.db'));
});
afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

function session(store: SqliteSessionStore, workItem = 'github:acme/demo#1') {
  return store.create({
    workItem,
    slug: 'github-acme-demo-1',
    engine: 'claude',
    runner: 'process',
    engineSessionId: null,
    cwd: dir,
    credentialKind: null,
    credentialEnv: null,
  });
}

describe('capability tokens', () => {
  it('are random, token-shaped, stored only as a hash, and name their session until revoked', async () => {
    const store = new SqliteSessionStore(db, { scrub: (t) => t });
    const s = await session(store);
    const tokens = new GatewayTokens(new SqliteTokenStore(db));
    const a = await tokens.mint(s.id);
    const b = await tokens.mint(s.id);
    expect(a).not.toBe(b);
    expect(isTokenShaped(a)).toBe(true);
    expect(await tokens.sessionOf(a)).toBe(s.id);
    expect(await tokens.sessionOf(b)).toBe(s.id);
    // The database holds no token.
    const rows = db.prepare('SELECT * FROM gateway_tokens').all();
    expect(JSON.stringify(rows)).not.toContain(a.slice(5));
    expect(rows).toHaveLength(2);
    expect(await tokens.revokeSession(s.id)).toBe(2);
    expect(await tokens.sessionOf(a)).toBeUndefined();
    expect(await tokens.sessionOf(b)).toBeUndefined();
  });

  it('refuse anything that is not a minted token', async () => {
    const tokens = new GatewayTokens(new SqliteTokenStore(db));
    for (const bad of ['', 'tlg1_', `tlg1_${'A'.repeat(43)}`, `tlg1_${'A'.repeat(44)}`, 'x'.repeat(10_000)]) {
      expect(await tokens.sessionOf(bad)).toBeUndefined();
    }
  });

  it('are masked by the scrubber wherever they appear, whoever minted them', async () => {
    const scrubber = new SecretScrubber();
    scrubber.addPattern(TOKEN_PATTERN);
    const store = new SqliteSessionStore(db, { scrub: (t) => t });
    const token = await new GatewayTokens(new SqliteTokenStore(db)).mint((await session(store)).id);
    expect(scrubber.scrub(`ANTHROPIC_API_KEY=${token}\nagain ${token}`)).toBe(
      'ANTHROPIC_API_KEY=[token]\nagain [token]',
    );
  });
});

describe('routing', () => {
  const t = `tlg1_${'a'.repeat(43)}`;
  it('takes the token from the model path, or from a key header when the path says _', () => {
    expect(routeOf(`/m/${t}/v1/messages?beta=true`, {})).toEqual({
      route: 'model',
      token: t,
      path: '/v1/messages?beta=true',
    });
    expect(routeOf('/m/_/responses', { authorization: `Bearer ${t}` })).toMatchObject({
      route: 'model',
      token: t,
      path: '/responses',
    });
    expect(routeOf(`/m/_/v1beta/models/x:generateContent?key=${t}`, {})).toMatchObject({ token: t });
    expect(routeOf('/m/_/x', { 'x-goog-api-key': t })).toMatchObject({ token: t });
  });

  it('reads git and API tokens from Bearer, token and Basic authorization', () => {
    expect(
      routeOf('/git/acme/demo.git/info/refs?service=git-receive-pack', { authorization: `Bearer ${t}` }),
    ).toEqual({
      route: 'git',
      token: t,
      path: 'acme/demo.git/info/refs?service=git-receive-pack',
    });
    expect(headerToken({ authorization: `token ${t}` })).toBe(t);
    const basic = Buffer.from(`x-access-token:${t}`).toString('base64');
    expect(headerToken({ authorization: `Basic ${basic}` })).toBe(t);
    expect(routeOf('/gh/repos/acme/demo', { authorization: `token ${t}` })).toMatchObject({
      route: 'github',
      path: '/repos/acme/demo',
    });
  });

  it('refuses other paths and tokens of the wrong shape', () => {
    expect(routeOf('/', {})).toBeUndefined();
    expect(routeOf('/mx/abc', {})).toBeUndefined();
    expect(routeOf('/m', {})).toBeUndefined();
    expect(headerToken({ authorization: 'Bearer sk-ant-real-key-0123456789' })).toBeUndefined();
    expect(headerToken({ authorization: `Basic ${'%%%'}` })).toBeUndefined();
  });
});

function fakePorts(): GatewayPorts {
  return {
    logger: createLogger({ level: 'error', sinks: [memorySink()] }),
    policyFor: () => resolvePolicy(undefined, undefined, 'main'),
    recordAct: async () => undefined,
    recordUsage: async () => undefined,
    modelRoute: () => undefined,
    overBudget: async () => undefined,
    github: { gitUrl: 'http://127.0.0.1:1', apiUrl: 'http://127.0.0.1:1', tokenFor: async () => undefined },
  };
}

function call(
  target: { port: number } | { socketPath: string },
  path: string,
  headers: Record<string, string> = {},
  method = 'GET',
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { ...('port' in target ? { host: '127.0.0.1', port: target.port } : target), path, method, headers },
      (res) => {
        let body = '';
        res.on('data', (c) => {
          body += c;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

describe('the gateway listeners', () => {
  it('refuse a missing, unknown or revoked token before any handler runs; pass a valid one with its session', async () => {
    const store = new SqliteSessionStore(db, { scrub: (t) => t });
    const s = await session(store);
    const tokens = new GatewayTokens(new SqliteTokenStore(db));
    const token = await tokens.mint(s.id);
    const seen: Array<{ route: string; session: GatewaySession; path: string; token: string }> = [];
    const handler =
      (route: string): GatewayHandler =>
      async (_req, res, ctx) => {
        seen.push({ route, session: ctx.session, path: ctx.path, token: ctx.token });
        res.end('ok');
      };
    const socketPath = join(dir, 'gw.sock');
    const gateway = await startGateway({
      host: '127.0.0.1',
      port: 0,
      socketPath,
      logger: createLogger({ level: 'error', sinks: [memorySink()] }),
      authorize: async (t) => {
        const id = await tokens.sessionOf(t);
        const found = id ? await store.get(id) : undefined;
        return found?.status === 'active'
          ? {
              id: found.id,
              workItem: found.workItem,
              owner: 'acme',
              repo: 'demo',
              engine: 'claude',
              cwd: dir,
            }
          : undefined;
      },
      ports: fakePorts(),
      routes: { git: handler('git'), github: handler('github'), model: handler('model') },
      idleTimeoutMs: 5000,
    });
    try {
      const port = Number(new URL(gateway.url).port);
      expect((await call({ port }, '/healthz')).status).toBe(200);
      expect((await call({ port }, '/nowhere')).status).toBe(404);
      expect((await call({ port }, '/git/acme/demo.git/info/refs')).status).toBe(403);
      const bad = await call({ port }, `/m/tlg1_${'b'.repeat(43)}/v1/messages`, {}, 'POST');
      expect(bad.status).toBe(401);
      expect(bad.body).toContain('capability token');
      // Claude Code's reachability check needs no token.
      expect((await call({ port }, '/m', {}, 'HEAD')).status).toBe(404);
      expect((await call({ port }, `/m/${token}/v1/messages`, {}, 'POST')).body).toBe('ok');
      expect(await call({ socketPath }, '/graphql', { authorization: `token ${token}` }, 'POST')).toEqual({
        status: 200,
        body: 'ok',
      });
      expect(seen.map((x) => [x.route, x.path, x.session.id, x.token === token])).toEqual([
        ['model', '/v1/messages', s.id, true],
        ['github', '/graphql', s.id, true],
      ]);
      expect(statSync(socketPath).mode & 0o777).toBe(0o600);
      // A closed session's token is refused, revoked or not.
      await store.close(s.id, 'closed by hand');
      expect((await call({ port }, `/m/${token}/v1/messages`, {}, 'POST')).status).toBe(401);
      expect(
        (await call({ socketPath }, '/graphql', { authorization: `token ${token}` }, 'POST')).status,
      ).toBe(401);
      expect(seen).toHaveLength(2);
    } finally {
      await gateway.close();
    }
    expect(() => statSync(socketPath)).toThrow();
  });

  it('replaces a socket file left by a dead process, and refuses to take over a live one', async () => {
    const socketPath = join(dir, 'gw.sock');
    const options = {
      host: '127.0.0.1',
      port: 0,
      socketPath,
      logger: createLogger({ level: 'error', sinks: [memorySink()] }),
      authorize: async () => undefined,
      ports: fakePorts(),
      routes: { git: async () => {}, github: async () => {}, model: async () => {} },
      idleTimeoutMs: 5000,
    };
    const first = await startGateway(options);
    await expect(startGateway(options)).rejects.toThrow(/another process serves the gateway socket/);
    await first.close();
    const again = await startGateway(options);
    await again.close();
  });
});

describe('connections', () => {
  it('past its cap closes the connection idle longest (503, Retry-After) and serves the newcomer', async () => {
    const gateway = await startGateway({
      host: '127.0.0.1',
      port: 0,
      logger: createLogger({ level: 'error', sinks: [memorySink()] }),
      authorize: async () => undefined,
      ports: fakePorts(),
      routes: { git: async () => {}, github: async () => {}, model: async () => {} },
      idleTimeoutMs: 60_000,
    });
    const port = Number(new URL(gateway.url).port);
    const idle: { socket: Socket; got: string; closed: Promise<void> }[] = [];
    try {
      for (let i = 0; i < MAX_CONNECTIONS; i++) {
        const socket = connect(port, '127.0.0.1');
        await new Promise((r) => socket.once('connect', r));
        const entry = { socket, got: '', closed: new Promise<void>((r) => socket.once('close', () => r())) };
        socket.on('data', (d: Buffer) => {
          entry.got += d.toString('latin1');
        });
        socket.on('error', () => {});
        idle.push(entry);
      }
      // The newcomer past the cap is served: the full listener makes room, it does not refuse.
      expect((await call({ port }, '/healthz')).status).toBe(200);
      const [oldest] = idle;
      await oldest?.closed;
      expect(oldest?.got).toMatch(/^HTTP\/1\.1 503 Service Unavailable\r\nRetry-After: 5\r\n/);
      // Only what was needed went: the newest idle connections are still open.
      expect(idle.slice(-10).every((e) => !e.socket.destroyed && e.got === '')).toBe(true);
    } finally {
      for (const e of idle) e.socket.destroy();
      await gateway.close();
    }
  });
});
