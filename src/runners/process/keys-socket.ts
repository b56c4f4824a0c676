import { chmodSync, lstatSync, mkdirSync, rmSync } from 'node:fs';
import { createConnection, createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { LoopError } from '../../core/errors.js';
import { socketAlive } from '../../os/socket.js';
import { type KeysRequest, parseKeysRequest, type SentKey } from '../keys.js';

/**
 * The keys socket of a PTY turn: while the turn runs, the runner listens on a Unix socket in the
 * session's private directory (`<dataDir>/sessions/<slug>/keys.sock`, dir 0700, socket 0600), and
 * `the-loop sessions keys` — any process of the same user, e.g. the CLI next to a daemon — connects
 * to it and asks for keys to be pressed.
 *
 * Protocol: one JSON line per request, `{"keys":["Escape","y","Enter"]}`, answered by one JSON line,
 * `{"ok":true,"sent":[{"key":"Escape","literal":false},…]}` or `{"ok":false,"error":"…"}`.
 */

export const KEYS_SOCKET_FILE = 'keys.sock';
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

/** Where the keys socket of a session lives. The slug goes into a path: it is checked first. */
export function keysSocketPath(stateRoot: string, slug: string): string {
  if (!/^[a-z0-9-]+$/.test(slug)) throw new LoopError('internal', `unsafe slug ${JSON.stringify(slug)}`);
  return join(stateRoot, slug, KEYS_SOCKET_FILE);
}

/** Why a socket cannot live at this path, or null when it can. */
export function socketPathProblem(path: string): string | null {
  const bytes = Buffer.byteLength(path);
  return bytes > MAX_SOCKET_PATH_BYTES
    ? `the keys socket path ${path} is ${bytes} bytes, longer than the ${MAX_SOCKET_PATH_BYTES} a Unix socket allows`
    : null;
}

/** Writes the checked keys of one request; throws (with a message for the client) when it cannot. */
export type DeliverKeys = (keys: Extract<KeysRequest, { ok: true }>['keys']) => Promise<void>;

export interface KeysServer {
  readonly path: string;
  /** Stop listening, drop the clients and remove the socket file. */
  close(): Promise<void>;
}

/** A private directory for the socket: created 0700, and refused if it is not ours or not a directory. */
function ensurePrivateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const stat = lstatSync(dir);
  if (!stat.isDirectory()) throw new Error(`${dir} is not a directory`);
  if (typeof process.getuid === 'function' && stat.uid !== process.getuid()) {
    throw new Error(`${dir} belongs to another user`);
  }
  if ((stat.mode & 0o777) !== 0o700) chmodSync(dir, 0o700);
}

/**
 * Listen for key requests on `path`. A socket file left by a process that died is replaced; a live
 * one (another process serving this session) is an error, never taken over.
 */
export async function serveKeys(path: string, deliver: DeliverKeys): Promise<KeysServer> {
  const problem = socketPathProblem(path);
  if (problem) throw new Error(problem);
  ensurePrivateDir(join(path, '..'));
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

  const clients = new Set<Socket>();
  // One request at a time across all clients: the keys of two requests never interleave.
  let queue: Promise<void> = Promise.resolve();
  const handle = (socket: Socket, line: string) => {
    queue = queue.then(async () => {
      const request = parseKeysRequest(line);
      let reply: KeysReply;
      if (!request.ok) {
        reply = request;
      } else {
        try {
          await deliver(request.keys);
          reply = { ok: true, sent: request.keys.map(({ key, literal }) => ({ key, literal })) };
        } catch (error) {
          reply = { ok: false, error: error instanceof Error ? error.message : String(error) };
        }
      }
      if (!socket.destroyed) socket.write(`${JSON.stringify(reply)}\n`);
    });
  };

  const server = createServer((socket) => {
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
      queue = queue.then(() => {
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
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => {
      server.off('error', reject);
      resolve();
    });
  });
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
