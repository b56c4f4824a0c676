import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { request } from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { BIN } from '../../helpers/cli.js';

/**
 * `the-loop mcp --http` as a real child process, and the ways tests talk to it: the SDK's own
 * Streamable HTTP client, and raw requests (Host, Origin and bodies no well-behaved client sends).
 */

export interface HttpServer {
  child: ChildProcessWithoutNullStreams;
  url: string;
  port: number;
  tokenFile: string;
  operator: string;
  /** The first line the server printed, as it printed it. */
  line: string;
  stdout(): string;
  stderr(): string;
  /** Resolves with the exit code once the process has exited. */
  exited: Promise<number | null>;
  /** SIGTERM, then the exit code (SIGKILL if it is still there after 10 s). */
  stop(): Promise<number | null>;
}

export function spawnHttp(cwd: string, env: Record<string, string>, args: string[] = []) {
  const child = spawn(process.execPath, [BIN, 'mcp', '--http', ...args], {
    cwd,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      XDG_STATE_HOME: process.env.XDG_STATE_HOME ?? '',
      LANG: 'C.UTF-8',
      ...env,
    },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (c: string) => {
    stdout += c;
  });
  child.stderr.setEncoding('utf8').on('data', (c: string) => {
    stderr += c;
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, stdout: () => stdout, stderr: () => stderr, exited };
}

/** Start the server and wait for its line on stdout (`--json` is added). */
export async function startHttp(
  cwd: string,
  env: Record<string, string>,
  args: string[] = [],
): Promise<HttpServer> {
  const spawned = spawnHttp(cwd, env, ['--port', '0', '--json', ...args]);
  const line = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`no line from the server\nstderr: ${spawned.stderr()}`)),
      20_000,
    );
    const check = () => {
      const out = spawned.stdout();
      if (out.includes('\n')) {
        clearTimeout(timer);
        spawned.child.stdout.off('data', check);
        resolve(out.slice(0, out.indexOf('\n')));
      }
    };
    spawned.child.stdout.on('data', check);
    void spawned.exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`the server exited (${code}) before printing\nstderr: ${spawned.stderr()}`));
    });
  });
  const printed = JSON.parse(line) as { url: string; tokenFile: string; operator: string };
  const stop = async () => {
    if (spawned.child.exitCode !== null || spawned.child.signalCode !== null) return spawned.exited;
    spawned.child.kill('SIGTERM');
    const timer = setTimeout(() => spawned.child.kill('SIGKILL'), 10_000);
    const code = await spawned.exited;
    clearTimeout(timer);
    return code;
  };
  return { ...spawned, ...printed, port: Number(new URL(printed.url).port), line, stop };
}

/** An SDK client connected with this token; `close()` ends it (and `terminate` the session first). */
export async function connectClient(url: string, token: string) {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const client = new Client({ name: 'the-loop-http-test', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}

export interface Raw {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One request with exactly these headers (Host included), over a fresh connection. */
export function raw(
  port: number,
  options: {
    method?: string;
    path?: string;
    headers?: Record<string, string | number>;
    body?: string | Buffer;
    /** Stream the body in chunks without a Content-Length. */
    chunked?: boolean;
    /** Send the head only (its Content-Length announcing a body that never comes) and wait for the answer. */
    headOnly?: boolean;
  } = {},
): Promise<Raw> {
  return new Promise((resolve, reject) => {
    let answered = false;
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method: options.method ?? 'POST',
        path: options.path ?? '/mcp',
        headers: { connection: 'close', ...options.headers },
        agent: false,
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (c: string) => {
          body += c;
        });
        res.on('end', () => {
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body });
          if (options.headOnly) req.destroy();
        });
        res.on('error', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
        answered = true;
      },
    );
    // The server may answer and close before the whole body is written: the answer is what counts.
    req.on('error', (error) => {
      if (!answered) reject(error);
    });
    if (options.headOnly) req.flushHeaders();
    else if (options.body === undefined) req.end();
    else if (options.chunked) {
      const data = Buffer.from(options.body);
      for (let at = 0; at < data.length; at += 64 * 1024) req.write(data.subarray(at, at + 64 * 1024));
      req.end();
    } else req.end(options.body);
  });
}

/** A JSON-RPC initialize request, as a client's first POST. */
export const INITIALIZE = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: {
    protocolVersion: '2025-06-18',
    capabilities: {},
    clientInfo: { name: 'raw', version: '1' },
  },
});

export const jsonHeaders = (port: number, token: string | null, extra: Record<string, string> = {}) => ({
  host: `127.0.0.1:${port}`,
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  ...(token === null ? {} : { authorization: `Bearer ${token}` }),
  ...extra,
});
