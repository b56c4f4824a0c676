import { createHash } from 'node:crypto';
import { chmodSync, lstatSync, rmSync } from 'node:fs';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { dirname, join } from 'node:path';
import { LoopError } from '../../core/errors.js';
import { privateDirProblem } from '../../os/runtime-dir.js';
import { socketAlive } from '../../os/socket.js';
import { type KeysRequest, parseKeysRequest, type SentKey } from '../keys.js';

/**
 * The keys socket of a PTY turn: while the turn runs, the runner listens on a Unix socket in the
 * data dir's runtime directory (`<tmp>/the-loop-<uid>/<8 hex>/<10 hex of the slug>.sock`, see
 * os/runtime-dir.ts: dirs 0700, socket 0600, short whatever the names), and `the-loop sessions keys`
 * — any process of the same user, e.g. the CLI next to a daemon — connects to it and asks for keys
 * to be pressed. Requests are refused once the turn's session has ended.
 *
 * Protocol: one JSON line per request, `{"keys":["Escape","y","Enter"]}`, answered by one JSON line,
 * `{"ok":true,"sent":[{"key":"Escape","literal":false},…]}` or `{"ok":false,"error":"…"}`.
 */

/** 40 bits of the slug's digest: unique among one data dir's sessions (slugs are) with odds of 2^-40. */
const SOCKET_DIGEST_HEX = 10;
/** A request line is a few hundred bytes; anything this large is refused unread. */
export const MAX_KEYS_REQUEST_BYTES = 64 * 1024;
/** The longest path a Unix socket address holds (sun_path less its NUL: 108 on Linux, 104 elsewhere). */
const MAX_SOCKET_PATH_BYTES = process.platform === 'linux' ? 107 : 103;
/** Connections at once; a keys client holds one for a moment. */
const MAX_CONNECTIONS = 8;
/** A client that sends no complete request in this long is dropped. */
const IDLE_MS = 10_000;
/** Requests one connection may make (a keys client makes one): a flood is cut off, not queued. */
const MAX_REQUESTS_PER_CONNECTION = 32;

export type KeysReply = { ok: true; sent: SentKey[] } | { ok: false; error: string };

/**
 * Pure: where the keys socket of a session lives in the data dir's runtime directory (`runtimeDirOf`):
 * named by a digest of the slug, so its length does not depend on the repository's name.
 */
export function keysSocketPath(runtimeDir: string, slug: string): string {
  if (!/^[a-z0-9-]+$/.test(slug)) throw new LoopError('internal', `unsafe slug ${JSON.stringify(slug)}`);
  const digest = createHash('sha256').update(slug).digest('hex').slice(0, SOCKET_DIGEST_HEX);
  return join(runtimeDir, `${digest}.sock`);
}

/** Why a socket cannot live at this path, or null when it can. */
export function socketPathProblem(path: string): string | null {
  const bytes = Buffer.byteLength(path);
  return bytes > MAX_SOCKET_PATH_BYTES
    ? `the keys socket path ${path} is ${bytes} bytes, longer than the ${MAX_SOCKET_PATH_BYTES} a Unix socket allows`
    : null;
}

export interface ServeKeysOptions {
  /** Creates (and checks) the socket's private directory; called before listening. */
  prepareDir: () => void;
  /** Why requests are refused now (e.g. the session has ended), or null; asked before each request. */
  refusal?: (() => Promise<string | null>) | undefined;
}

/** Writes the checked keys of one request; throws (with a message for the client) when it cannot. */
export type DeliverKeys = (keys: Extract<KeysRequest, { ok: true }>['keys']) => Promise<void>;

export interface KeysServer {
  readonly path: string;
  /** Stop listening, drop the clients and remove the socket file. */
  close(): Promise<void>;
}

/** Make way for the socket: a file left by a process that died goes; a live socket is an error. */
async function clearSocketPath(path: string): Promise<void> {
  let existing: ReturnType<typeof lstatSync> | undefined;
  try {
    existing = lstatSync(path);
  } catch {
    existing = undefined;
  }
  if (existing) {
    if (!existing.isSocket()) throw new Error(`${path} exists and is not a socket`);
    if (await socketAlive(path)) throw new Error(`another process is serving keys on ${path}`);
    rmSync(path, { force: true });
  }
}

/** Listen on `path` in its private directory, made ready by `prepareDir` (again if it went meanwhile). */
async function listenIn(server: Server, path: string, prepareDir: () => void): Promise<void> {
  // Another process may remove the (empty) directory between prepareDir and listen: then once more.
  for (let attempt = 1; ; attempt++) {
    prepareDir();
    const dirProblem = privateDirProblem(dirname(path));
    if (dirProblem === 'missing' && attempt < 2) continue;
    if (dirProblem) throw new Error(`refusing the keys socket's directory: ${dirProblem}`);
    await clearSocketPath(path);
    try {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(path, () => {
          server.off('error', reject);
          resolve();
        });
      });
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT' || attempt >= 2) throw error;
    }
  }
}

/**
 * Listen for key requests on `path`. A socket file left by a process that died is replaced; a live
 * one (another process serving this session) is an error, never taken over.
 */
export async function serveKeys(
  path: string,
  deliver: DeliverKeys,
  options: ServeKeysOptions,
): Promise<KeysServer> {
  const problem = socketPathProblem(path);
  if (problem) throw new Error(problem);
  const clients = new Set<Socket>();
  const server = createServer(connectionHandler(clients, requestHandler(deliver, options.refusal)));
  await listenIn(server, path, options.prepareDir);
  // The directory is 0700 already; the socket is narrowed too (a listening socket takes the umask).
  chmodSync(path, 0o600);
  // Never what keeps a process alive: the engine is, while the turn runs.
  server.unref();
  server.on('error', () => {});

  return {
    path,
    close: async () => {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of clients) socket.destroy();
      await closed;
      // Closing removes the file; make sure of it (a turn's end leaves no socket behind).
      rmSync(path, { force: true });
    },
  };
}

/** Answers one request line; `enqueue` runs after every request queued before it. */
type RequestHandler = (socket: Socket, line: string) => void;
type Enqueue = (task: () => void | Promise<void>) => void;

/** One request at a time across all clients: the keys of two requests never interleave. */
function requestHandler(
  deliver: DeliverKeys,
  refusal: ServeKeysOptions['refusal'],
): { handle: RequestHandler; enqueue: Enqueue } {
  let queue: Promise<void> = Promise.resolve();
  const enqueue: Enqueue = (task) => {
    queue = queue.then(task);
  };
  const answer = async (line: string): Promise<KeysReply> => {
    // Asked at the wire, for each request: a turn that outlives its session (closed meanwhile) takes no keys.
    let refused: string | null | undefined;
    try {
      refused = await refusal?.();
    } catch (error) {
      refused = `cannot tell whether keys may reach it: ${error instanceof Error ? error.message : String(error)}`;
    }
    if (refused) return { ok: false, error: refused };
    const request = parseKeysRequest(line);
    if (!request.ok) return request;
    try {
      await deliver(request.keys);
      return { ok: true, sent: request.keys.map(({ key, literal }) => ({ key, literal })) };
    } catch (error) {
      return { ok: false, error: error instanceof Error ? error.message : String(error) };
    }
  };
  const handle: RequestHandler = (socket, line) =>
    enqueue(async () => {
      const reply = await answer(line);
      if (!socket.destroyed) socket.write(`${JSON.stringify(reply)}\n`);
    });
  return { handle, enqueue };
}

/** Reads request lines from each connection, within the limits on connections, size and count. */
function connectionHandler(
  clients: Set<Socket>,
  { handle, enqueue }: ReturnType<typeof requestHandler>,
): (socket: Socket) => void {
  return (socket) => {
    socket.on('error', () => {});
    if (clients.size >= MAX_CONNECTIONS) {
      socket.end(`${JSON.stringify({ ok: false, error: 'too many connections; try again' })}\n`);
      return;
    }
    clients.add(socket);
    socket.once('close', () => clients.delete(socket));
    socket.setTimeout(IDLE_MS, () => socket.destroy());
    let pending: Buffer = Buffer.alloc(0);
    let requests = 0;
    let refused = false;
    // Answered after the requests already queued, then the connection ends: the rest is not read.
    const refuse = (error: string) => {
      refused = true;
      pending = Buffer.alloc(0);
      enqueue(() => {
        if (!socket.destroyed) socket.end(`${JSON.stringify({ ok: false, error })}\n`);
      });
    };
    socket.on('data', (chunk: Buffer) => {
      if (refused) return;
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
      let nl = pending.indexOf(0x0a);
      while (nl !== -1 && nl <= MAX_KEYS_REQUEST_BYTES) {
        const line = pending.subarray(0, nl).toString('utf8');
        pending = pending.subarray(nl + 1);
        if (line.trim() !== '') {
          if (++requests > MAX_REQUESTS_PER_CONNECTION) {
            refuse(`more than ${MAX_REQUESTS_PER_CONNECTION} requests on one connection`);
            return;
          }
          handle(socket, line);
        }
        nl = pending.indexOf(0x0a);
      }
      if (nl > MAX_KEYS_REQUEST_BYTES || pending.length > MAX_KEYS_REQUEST_BYTES) {
        refuse(`request larger than ${MAX_KEYS_REQUEST_BYTES} bytes`);
      }
    });
  };
}

/**
 * Send one raw request line and read one reply line. Rejects with the connection's error (ENOENT or
 * ECONNREFUSED: nobody is listening) or on timeout.
 */
export function exchangeKeysLine(path: string, line: string, timeoutMs = 5000): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = createConnection({ path });
    let received = '';
    let done = false;
    const finish = (error: Error | null, reply?: string) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      if (error) reject(error);
      else resolve(reply ?? '');
    };
    const timer = setTimeout(
      () => finish(Object.assign(new Error('no reply from the keys socket'), { code: 'ETIMEDOUT' })),
      timeoutMs,
    );
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      received += chunk;
      const nl = received.indexOf('\n');
      if (nl !== -1) finish(null, received.slice(0, nl));
      else if (received.length > MAX_KEYS_REQUEST_BYTES) finish(new Error('the reply is too large'));
    });
    socket.once('end', () => finish(new Error('the keys socket closed without a reply')));
    socket.once('error', (error) => finish(error));
    socket.once('connect', () => socket.write(line.endsWith('\n') ? line : `${line}\n`));
  });
}

/** Ask the runner of a PTY turn to press `keys`. The client side of `the-loop sessions keys`. */
export async function requestKeys(
  path: string,
  keys: readonly string[],
  timeoutMs = 5000,
): Promise<KeysReply> {
  const reply = await exchangeKeysLine(path, JSON.stringify({ keys }), timeoutMs);
  try {
    const parsed = JSON.parse(reply) as KeysReply;
    if (parsed && typeof parsed === 'object' && typeof parsed.ok === 'boolean') return parsed;
  } catch {
    // Reported below.
  }
  return { ok: false, error: `unexpected reply from the keys socket: ${reply.slice(0, 200)}` };
}
