/**
 * The two floors bench/ingest.ts measures the daemon's webhook ingress against.
 *
 *   bare  `node:http`: read the body, check `X-Hub-Signature-256` (HMAC-SHA256, timingSafeEqual),
 *         answer 202. Stores nothing: printed for information only (no durable server can reach it).
 *   fair  the bare floor plus what invariant 5 asks of any durable ingress: the delivery id and the
 *         body (its raw bytes) inserted into SQLite opened by the daemon's own openDb (src/store/db.ts:
 *         the same pragmas — WAL, synchronous FULL, busy_timeout, foreign_keys — on a one-table
 *         schema), group-committed — the requests whose bodies complete while a commit runs (the
 *         commit is synchronous, so they wait in the socket buffers) are inserted in the next
 *         transaction, one WAL commit and one fsync for all of them — and 202 answered only after
 *         the commit that holds the delivery (a delivery id already stored: 200). No parse, no
 *         routing, no scrubbing, no secondary index: the least a server can do and lose nothing.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { openDb } from '../src/store/db.js';

export type FloorKind = 'bare' | 'fair';

export interface Floor {
  server: Server;
  /** Rows the fair floor stored (0 for the bare one). */
  stored(): number;
  close(): Promise<void>;
}

function answer(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'content-length': text.length });
  res.end(text);
}

function signed(secret: string, req: IncomingMessage, body: Buffer): boolean {
  const header = req.headers['x-hub-signature-256'];
  const given = typeof header === 'string' ? Buffer.from(header.slice(7), 'hex') : Buffer.alloc(0);
  const expected = createHmac('sha256', secret).update(body).digest();
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** The fair floor's store: one table, the daemon's settings, one transaction per group. */
function openFairStore(dbPath: string) {
  const db = openDb(dbPath, [
    {
      version: 1,
      name: 'floor',
      sql: 'CREATE TABLE floor_deliveries (id TEXT PRIMARY KEY, body BLOB NOT NULL)',
    },
  ]);
  const insert = db.prepare(
    'INSERT INTO floor_deliveries (id, body) VALUES (?, ?) ON CONFLICT (id) DO NOTHING',
  );
  type Pending = { id: string; body: Buffer; res: ServerResponse };
  let queue: Pending[] = [];
  const commit = db.transaction((items: Pending[]) => items.map((i) => insert.run(i.id, i.body).changes));
  const flush = () => {
    const items = queue;
    queue = [];
    let changes: number[];
    try {
      changes = commit.immediate(items);
    } catch {
      for (const i of items) answer(i.res, 503, 'could not store\n');
      return;
    }
    for (const [k, i] of items.entries()) {
      if (changes[k] === 1) answer(i.res, 202, 'accepted\n');
      else answer(i.res, 200, 'duplicate\n');
    }
  };
  return {
    store(item: Pending): void {
      queue.push(item);
      if (queue.length === 1) setImmediate(flush);
    },
    stored: () => (db.prepare('SELECT COUNT(*) AS n FROM floor_deliveries').get() as { n: number }).n,
    close: () => {
      if (db.open) db.close();
    },
  };
}

export function startFloor(kind: FloorKind, secret: string, dbPath: string): Promise<Floor> {
  const store = kind === 'fair' ? openFairStore(dbPath) : undefined;
  const server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (chunk: Buffer) => parts.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(parts);
      if (!signed(secret, req, body)) return answer(res, 401, 'bad signature\n');
      const id = req.headers['x-github-delivery'];
      if (!store) return answer(res, 202, 'accepted\n');
      if (typeof id !== 'string' || id === '') return answer(res, 400, 'no delivery id\n');
      store.store({ id, body, res });
    });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () =>
      resolve({
        server,
        stored: () => store?.stored() ?? 0,
        close: () =>
          new Promise<void>((r) => {
            server.close(() => {
              store?.close();
              r();
            });
            server.closeAllConnections();
          }),
      }),
    );
  });
}
