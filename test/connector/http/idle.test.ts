import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { afterEach, describe, expect, it } from 'vitest';
import { startMcpListener } from '../../../src/connector/http/listener.js';
import { type OpenedSession, SessionTable } from '../../../src/connector/http/sessions.js';
import { nullLogger } from '../../../src/log/logger.js';
import { connectClient, jsonHeaders, raw } from './serve.js';

/**
 * The session table under the real listener and the SDK client, in process with a clock of its own:
 * an idle session is closed and its backends disposed, one busy with a call is not, and closing
 * everything leaves no session and no socket.
 */

const TOKEN = 'a-token-of-the-tests-0123456789';
const cleanups: Array<() => Promise<unknown>> = [];

afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function setUp(idleMs: number) {
  let now = 1_000_000;
  let release = () => {};
  let entered = 0;
  const disposed: string[] = [];
  let n = 0;
  const open = async (): Promise<OpenedSession> => {
    const connection = `c${++n}`;
    const server = new McpServer({ name: 'idle-test', version: '1' });
    // A tool that returns only when the test lets it: a call in flight.
    server.registerTool('wait', { description: 'waits' }, async () => {
      entered++;
      await new Promise<void>((resolve) => {
        release = resolve;
      });
      return { content: [{ type: 'text', text: 'done' }] };
    });
    return {
      server,
      connection,
      dispose: async () => {
        disposed.push(connection);
      },
    };
  };
  const sessions = new SessionTable({ open, max: 4, idleMs, logger: nullLogger, now: () => now });
  const listener = await startMcpListener({
    host: '127.0.0.1',
    port: 0,
    token: TOKEN,
    sessions,
    logger: nullLogger,
  });
  cleanups.push(async () => {
    await sessions.closeAll();
    await listener.close();
  });
  return {
    sessions,
    listener,
    disposed,
    advance: (ms: number) => {
      now += ms;
    },
    release: () => release(),
    entered: () => entered,
  };
}

describe('idle sessions', () => {
  it('are closed and disposed; their id then answers 404', async () => {
    const t = await setUp(30 * 60_000);
    const { client, transport } = await connectClient(t.listener.url, TOKEN);
    cleanups.push(() => client.close());
    const id = transport.sessionId as string;
    t.advance(29 * 60_000);
    t.sessions.sweep();
    expect(t.sessions.size).toBe(1);
    t.advance(2 * 60_000);
    t.sessions.sweep();
    await expect.poll(() => t.disposed).toEqual(['c1']);
    expect(t.sessions.size).toBe(0);
    const ping = JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'ping' });
    const res = await raw(t.listener.port, {
      headers: jsonHeaders(t.listener.port, TOKEN, { 'mcp-session-id': id }),
      body: ping,
    });
    expect(res.status).toBe(404);
  });

  it('are not closed while a call is in flight', async () => {
    const t = await setUp(60_000);
    const { client } = await connectClient(t.listener.url, TOKEN);
    cleanups.push(() => client.close());
    const pending = client.callTool({ name: 'wait', arguments: {} });
    await expect.poll(() => t.entered()).toBe(1);
    t.advance(10 * 60_000);
    t.sessions.sweep();
    expect(t.sessions.size).toBe(1);
    t.release();
    expect(await pending).toMatchObject({ content: [{ text: 'done' }] });
    t.advance(2 * 60_000);
    t.sessions.sweep();
    await expect.poll(() => t.sessions.size).toBe(0);
  });

  it('closeAll ends every session and disposes each', async () => {
    const t = await setUp(60_000);
    const a = await connectClient(t.listener.url, TOKEN);
    const b = await connectClient(t.listener.url, TOKEN);
    cleanups.push(
      () => a.client.close(),
      () => b.client.close(),
    );
    expect(
      t.sessions
        .list()
        .map((s) => s.connection)
        .sort(),
    ).toEqual(['c1', 'c2']);
    await t.sessions.closeAll();
    expect(t.disposed.sort()).toEqual(['c1', 'c2']);
    expect(t.sessions.size).toBe(0);
    // No session opens after.
    const res = await raw(t.listener.port, {
      headers: jsonHeaders(t.listener.port, TOKEN),
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } },
      }),
    });
    expect(res.status).toBe(503);
    await t.listener.close();
    await expect.poll(() => t.listener.stats()).toMatchObject({ open: 0, upgraded: 0 });
  });
});
