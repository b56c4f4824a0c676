/**
 * Only finished deliveries are pruned, but the dispatcher must survive a body that is gone anyway (a
 * registry edited by hand, a bug elsewhere): a clear error on the delivery, never a crash or a stuck
 * dispatcher. Only rows an older version stored without their route or plan need their body (they
 * are routed once, when first dispatched); a pruned row has lost its plan too. Real SQLite inbox and
 * registry; runTurn is a stub recording what it was asked.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import type { RoutedDelivery } from '../../src/core/ports/inbox.js';
import { Dispatcher } from '../../src/dispatch/dispatcher.js';
import { createLogger, memorySink } from '../../src/log/logger.js';
import type { TurnRequest } from '../../src/sessions/turn-service.js';
import { type Db, openDb } from '../../src/store/db.js';
import { SqliteInbox } from '../../src/store/sqlite/inbox.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sessions.js';

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

const route = (_event: string, payload: unknown): RoutedDelivery => {
  const n = payload && typeof payload === 'object' && 'n' in payload ? Number(payload.n) : 0;
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

/** Routed on arrival, as ingress stores it; or a row as an older version left it, unrouted. */
async function accept(id: string, n: number, routed: boolean): Promise<void> {
  const body = JSON.stringify({ n });
  if (routed) {
    await inbox.accept({
      id,
      source: 'github',
      event: 'issue_comment',
      action: 'created',
      body,
      routed: route('issue_comment', { n }),
    });
    return;
  }
  db.prepare(
    `INSERT INTO deliveries (id, source, event, action, received_at, body, status, updated_at)
     VALUES (?, 'github', 'issue_comment', 'created', '2026-01-01T00:00:00.000Z', ?, 'queued', '2026-01-01T00:00:00.000Z')`,
  ).run(id, body);
}

/** What the inbox itself never does: a queued row whose body (and with it the stored plan) is gone. */
const pruneByHand = (id: string) =>
  db
    .prepare(
      "UPDATE deliveries SET body = '', plan = NULL, pruned_at = '2026-01-01T00:00:00.000Z' WHERE id = ?",
    )
    .run(id);

it('a queued delivery whose body was pruned fails or is rejected with the reason; the rest still runs', async () => {
  await accept('unrouted', 1, false);
  await accept('routed', 2, true);
  await accept('fine', 3, true);
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
    routeLegacy: route,
    logger: createLogger({ level: 'debug', sinks: [sink] }),
    concurrency: 4,
    closeGraceMs: 60_000,
    pollMs: 60_000,
  });
  await dispatcher.start();
  await dispatcher.idle();

  expect(await inbox.get('unrouted')).toMatchObject({ status: 'rejected', route: 'reject' });
  expect((await inbox.get('unrouted'))?.reason).toMatch(
    /^unreadable delivery: the body of delivery unrouted was pruned at 2026-01-01T00:00:00.000Z \(inbox.retainDays\)/,
  );
  expect(await inbox.get('routed')).toMatchObject({ status: 'failed', turnId: null });
  expect((await inbox.get('routed'))?.error).toMatch(/the body of delivery routed was pruned at 2026-01-01/);
  // Neither reached an engine; the next delivery did.
  expect(requests.map((r) => r.deliveryId)).toEqual(['fine']);
  expect(await inbox.get('fine')).toMatchObject({ status: 'failed', error: 'stub engine: not run' });
  expect(sink.lines.some((l) => l.includes('dispatch pass failed'))).toBe(false);
});
