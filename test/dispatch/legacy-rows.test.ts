/**
 * Rows an older version left in the inbox — queued unrouted, or routed without the plan this
 * version stores — are routed once by the dispatcher, stored, and never routed again; everything
 * else runs as stored, with no router at all. Real SQLite inbox and registry; runTurn is a stub.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import type { RoutedDelivery } from '../../src/core/ports/inbox.js';
import { Dispatcher, type DispatcherDeps } from '../../src/dispatch/dispatcher.js';
import { nullLogger } from '../../src/log/logger.js';
import { type Db, openDb } from '../../src/store/db.js';
import { SqliteInbox } from '../../src/store/sqlite/inbox.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sessions.js';

const WI = 'github:octo/widgets#7';
const AT = '2026-03-01T00:00:00.000Z';

let dir: string;
let db: Db;
let inbox: SqliteInbox;
let store: SqliteSessionStore;
const routed: string[] = [];
const prompts: string[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'the-loop-legacy-rows-'));
  db = openDb(join(dir, 'the-loop.db'));
  inbox = new SqliteInbox(db);
  store = new SqliteSessionStore(db, { scrub: (t) => t });
  routed.length = 0;
  prompts.length = 0;
});

afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The router: the payload's text becomes the prompt; `ignore` in it routes to ignore. */
const routeLegacy = (_event: string, payload: unknown): RoutedDelivery => {
  const text = payload && typeof payload === 'object' && 'text' in payload ? String(payload.text) : '';
  routed.push(text);
  if (text === 'ignore') return { action: 'ignore', reason: 'nothing to do', workItem: WI };
  return {
    action: 'deliver',
    workItem: WI,
    repo: 'octo/widgets',
    prompt: `prompt: ${text}`,
    engine: '',
    runner: '',
    repoPath: dir,
    workspace: 'checkout',
    author: 'octocat',
    trigger: 'mention @the-loop',
  };
};

/** A row as an older version wrote it: no plan; routed (route and work item) or not. */
function legacy(id: string, text: string, route: 'deliver' | null): void {
  db.prepare(
    `INSERT INTO deliveries (id, source, event, action, received_at, body, status, route, work_item, updated_at)
     VALUES (?, 'github', 'issue_comment', 'created', ?, ?, 'queued', ?, ?, ?)`,
  ).run(id, AT, JSON.stringify({ text }), route, route ? WI : null, AT);
}

function dispatcher(deps: Partial<DispatcherDeps> = {}): Dispatcher {
  return new Dispatcher({
    inbox,
    store,
    runTurn: async (request) => {
      prompts.push(request.prompt);
      const session =
        (await store.findActive(request.workItem)) ??
        (await store.create({
          workItem: request.workItem,
          slug: 'github-octo-widgets-7',
          engine: 'fake',
          runner: 'process',
          engineSessionId: null,
          cwd: dir,
          credentialKind: null,
          credentialEnv: null,
        }));
      const turn = await store.beginTurn(session.id, {
        promptDigest: 'sha256:x',
        promptBytes: request.prompt.length,
        meter: 'stream-json',
        deliveryId: request.deliveryId,
      });
      const finished = await store.finishTurn(turn.id, {
        status: 'succeeded',
        endReason: 'result',
        endedAt: new Date().toISOString(),
        exitCode: 0,
        exitSignal: null,
        model: null,
        usage: null,
        costUsd: null,
        error: null,
      });
      return {
        session,
        turn: finished,
        created: false,
        outcome: {
          ok: true,
          endReason: 'result',
          endedAt: new Date(),
          exitCode: 0,
          exitSignal: null,
          error: null,
          stoppedBy: 'exit',
        },
      };
    },
    routeLegacy,
    logger: nullLogger,
    concurrency: 4,
    closeGraceMs: 60_000,
    pollMs: 60_000,
    ...deps,
  });
}

async function runAll(d: Dispatcher): Promise<void> {
  await d.start();
  await d.idle();
  await d.stop(0);
}

it('routes each legacy row once, stores what the router made of it, and runs it as stored', async () => {
  legacy('unrouted', 'one', null);
  legacy('routed-no-plan', 'two', 'deliver');
  legacy('now-ignored', 'ignore', null);
  await runAll(dispatcher());

  expect(routed).toEqual(['one', 'ignore', 'two']);
  expect(prompts).toEqual(['prompt: one', 'prompt: two']);
  expect(await inbox.get('unrouted')).toMatchObject({ status: 'done', route: 'deliver', workItem: WI });
  expect(await inbox.get('routed-no-plan')).toMatchObject({ status: 'done', route: 'deliver' });
  expect(await inbox.get('now-ignored')).toMatchObject({ status: 'ignored', reason: 'nothing to do' });
  for (const id of ['unrouted', 'routed-no-plan']) expect((await inbox.plan(id))?.repoPath).toBe(dir);

  // Run again (a person retries them): as stored, not routed again — not even with the router gone.
  db.prepare("UPDATE deliveries SET status = 'failed' WHERE id IN ('unrouted', 'routed-no-plan')").run();
  await inbox.retry('unrouted');
  await inbox.retry('routed-no-plan');
  await runAll(dispatcher({ routeLegacy: undefined }));
  expect(routed).toEqual(['one', 'ignore', 'two']);
  expect(prompts).toEqual(['prompt: one', 'prompt: two', 'prompt: one', 'prompt: two']);
});

it('without a router, a legacy row is rejected (unrouted) or fails (no plan), saying why; the rest runs', async () => {
  legacy('unrouted', 'one', null);
  legacy('routed-no-plan', 'two', 'deliver');
  await runAll(dispatcher({ routeLegacy: undefined }));
  expect(await inbox.get('unrouted')).toMatchObject({ status: 'rejected', route: 'reject' });
  expect((await inbox.get('unrouted'))?.reason).toMatch(/^unreadable delivery: .*no router/);
  expect(await inbox.get('routed-no-plan')).toMatchObject({ status: 'failed' });
  expect((await inbox.get('routed-no-plan'))?.error).toMatch(/no router/);
  expect(prompts).toEqual([]);
});

/** A row as this version stores it: routed on arrival, its plan made under the routing config `under`. */
async function planned(id: string, text: string, under: string): Promise<void> {
  const plan = routeLegacy('', { text: `stored ${text}` });
  if (plan.action !== 'deliver') throw new Error('the stub router plans a turn');
  await inbox.accept({
    id,
    source: 'github',
    event: 'issue_comment',
    action: 'created',
    body: JSON.stringify({ text }),
    routed: { ...plan, routedUnder: under },
  });
  routed.length = 0;
}

it('a plan made under another routing config is routed once more when it runs; one made under this one runs as stored', async () => {
  await planned('same-config', 'one', 'config-a');
  await planned('config-changed', 'two', 'config-b');
  await planned('now-refused', 'ignore', 'config-b');
  await planned('from-run', 'three', '');
  await runAll(dispatcher({ routingDigest: 'config-a' }));

  // Only the two planned under config-b were routed again; the refused one fails saying why.
  expect(routed).toEqual(['two', 'ignore']);
  expect(prompts).toEqual(['prompt: stored one', 'prompt: two', 'prompt: stored three']);
  expect(await inbox.get('config-changed')).toMatchObject({ status: 'done', route: 'deliver' });
  expect(await inbox.get('now-refused')).toMatchObject({
    status: 'failed',
    error: 'routing changed: ignore',
  });
  // Stored as routed now: a retry under the same config runs it as stored.
  expect((await inbox.plan('config-changed'))?.prompt).toBe('prompt: two');
});
