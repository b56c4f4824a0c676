import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, makeProject } from '../../helpers/cli.js';
import { privateTmux } from '../../helpers/mcp.js';

/**
 * Hostile bytes on the connector's stdin: lines that are not JSON, JSON that is not JSON-RPC, a huge
 * line, requests for tools that do not exist. Each gets an error or is dropped, the server goes on
 * answering, and its stdout carries nothing but JSON-RPC messages.
 */

const tmux = privateTmux();
let project: ReturnType<typeof makeProject>;
let child: ChildProcessWithoutNullStreams;
let stdout = '';
let stderr = '';

function messages(): Array<Record<string, unknown>> {
  return stdout
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

async function answer(id: number, timeoutMs = 10_000): Promise<Record<string, unknown>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = messages().find((m) => m.id === id);
    if (found) return found;
    if (Date.now() > deadline) throw new Error(`no answer to ${id}\nstdout: ${stdout}\nstderr: ${stderr}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const send = (message: unknown) => child.stdin.write(`${JSON.stringify(message)}\n`);

beforeAll(async () => {
  await tmux.session('work-a');
  project = makeProject({
    tmux: { socket: tmux.socket },
    connector: { operators: { ops: { scope: 'read', targets: 'any' } } },
  });
  child = spawn(process.execPath, [BIN, 'mcp'], {
    cwd: project.dir,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      XDG_STATE_HOME: process.env.XDG_STATE_HOME,
      LANG: 'C.UTF-8',
    },
  });
  child.stdout.setEncoding('utf8').on('data', (c: string) => {
    stdout += c;
  });
  child.stderr.setEncoding('utf8').on('data', (c: string) => {
    stderr += c;
  });
}, 30_000);

afterAll(async () => {
  if (child && child.exitCode === null) {
    const exited = new Promise((r) => child.once('exit', r));
    child.stdin.end();
    await exited;
  }
  await tmux.stop();
  project?.cleanup();
});

describe('hostile stdin', () => {
  it('drops what is not JSON-RPC and keeps answering', async () => {
    child.stdin.write('not json at all\n');
    child.stdin.write('{"jsonrpc": "2.0"\n');
    child.stdin.write('[1, 2, 3]\n');
    child.stdin.write(
      `{"jsonrpc":"2.0","id":99,"method":"initialize","params":${'['.repeat(5000)}${']'.repeat(5000)}}\n`,
    );
    child.stdin.write(`${JSON.stringify({ junk: 'x'.repeat(2 * 1024 * 1024) })}\n`);
    send({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: {
        protocolVersion: '2025-06-18',
        capabilities: {},
        clientInfo: { name: 'abuse', version: '1' },
      },
    });
    const init = await answer(1);
    expect(init.result).toMatchObject({ serverInfo: { name: 'the-loop' } });
    send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    send({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'rm_rf', arguments: {} } });
    const unknown = await answer(2);
    expect(JSON.stringify(unknown)).toMatch(/rm_rf/);
    send({
      jsonrpc: '2.0',
      id: 3,
      method: 'tools/call',
      params: { name: 'read_terminal', arguments: 'work-a' },
    });
    expect(await answer(3)).toBeDefined();
    const deep = { a: Array.from({ length: 1000 }, (_, i) => ({ i })) };
    send({
      jsonrpc: '2.0',
      id: 4,
      method: 'tools/call',
      params: { name: 'list_terminals', arguments: deep },
    });
    expect(JSON.stringify(await answer(4))).toMatch(/isError|error/);
    send({ jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'list_terminals', arguments: {} } });
    const listed = (await answer(5)) as { result?: { structuredContent?: { terminals?: unknown[] } } };
    expect(listed.result?.structuredContent?.terminals).toHaveLength(1);
    // Everything written to stdout parsed as JSON above: no log line, no banner, no stray text.
    for (const m of messages()) expect(m.jsonrpc).toBe('2.0');
  });
});
