/**
 * Only finished deliveries are pruned, but the dispatcher must survive a body that is gone anyway (a
 * registry edited by hand, a bug elsewhere): a clear error on the delivery, never a crash or a stuck
 * dispatcher. Real SQLite inbox and registry; runTurn is a stub recording what it was asked.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { Dispatcher } from '../../src/dispatch/dispatcher.js';
import type { RouteResult } from '../../src/github/route.js';
import { SqliteInbox } from '../../src/inbox/sqlite-inbox.js';
import { createLogger, memorySink } from '../../src/log/logger.js';
import { SqliteSessionStore } from '../../src/sessions/registry.js';
import type { TurnRequest } from '../../src/sessions/turn-service.js';
import { type Db, openDb } from '../../src/store/db.js';

let dir: string;
let db: Db;
let inbox: SqliteInbox;
let dispatcher: Dispatcher | undefined;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'the-loop-pruned-dispatch-'));
  db = openDb(join(dir, 'the-loop.db'));
  inbox = new SqliteInbox(db);
});

afterEach(async () => {
  await dispatcher?.stop(0);
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

const route = (_event: string, payload: unknown): RouteResult => {
  const { n } = payload as { n: number };
  return {
    action: 'deliver',
    workItem: `github:octo/widgets#${n}`,
    repo: 'octo/widgets',
    prompt: `prompt ${n}`,
    engine: '',
    runner: '',
    repoPath: dir,
    workspace: 'checkout',
    author: 'octocat',
    trigger: 'comment',
  };
};

function accept(id: string, n: number, routed: boolean): void {
  inbox.accept({
    id,
    source: 'github',
    event: 'issue_comment',
    action: 'created',
    body: JSON.stringify({ n }),
    ...(routed ? { route: { action: 'deliver', workItem: `github:octo/widgets#${n}`, reason: null } } : {}),
  });
}

/** What the inbox itself never does: a queued row whose body is gone. */
const pruneByHand = (id: string) =>
  db.prepare("UPDATE deliveries SET body = '', pruned_at = '2026-01-01T00:00:00.000Z' WHERE id = ?").run(id);

it('a queued delivery whose body was pruned fails or is rejected with the reason; the rest still runs', async () => {
  accept('unrouted', 1, false);
  accept('routed', 2, true);
  accept('fine', 3, true);
  pruneByHand('unrouted');
  pruneByHand('routed');
  const requests: TurnRequest[] = [];
  const sink = memorySink();
  dispatcher = new Dispatcher({
    inbox,
    store: new SqliteSessionStore(db, { scrub: (t) => t }),
    runTurn: async (request) => {
      requests.push(request);
      throw new Error('stub engine: not run');
    },
    route,
    logger: createLogger({ level: 'debug', sinks: [sink] }),
    concurrency: 4,
    closeGraceMs: 60_000,
    pollMs: 60_000,
  });
  dispatcher.start();
  await dispatcher.idle();

  expect(inbox.get('unrouted')).toMatchObject({ status: 'rejected', route: 'reject' });
  expect(inbox.get('unrouted')?.reason).toMatch(
    /^unreadable delivery: the body of delivery unrouted was pruned at 2026-01-01T00:00:00.000Z \(inbox.retainDays\)/,
  );
  expect(inbox.get('routed')).toMatchObject({ status: 'failed', turnId: null });
  expect(inbox.get('routed')?.error).toMatch(/the body of delivery routed was pruned at 2026-01-01/);
  // Neither reached an engine; the next delivery did.
  expect(requests.map((r) => r.deliveryId)).toEqual(['fine']);
  expect(inbox.get('fine')).toMatchObject({ status: 'failed', error: 'stub engine: not run' });
  expect(sink.lines.some((l) => l.includes('dispatch pass failed'))).toBe(false);
});
