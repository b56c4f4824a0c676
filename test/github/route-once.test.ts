/**
 * A delivery is routed exactly once. The real daemon (ingress, dispatcher, turn service) over a real
 * SQLite file, real signed HTTP requests; the router (routeEvent) wrapped with a counter, so every
 * call is counted, at ingress or in the dispatcher. The engine is a stub runner that reports like a
 * headless engine (or, while told to, hangs until its turn is cancelled).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { stringify } from 'yaml';
import { type App, createApp, type Daemon, startDaemon } from '../../src/main.js';
import type { Runner, RunOutcome, RunTurnInput } from '../../src/runners/runner.js';
import { fakeEngineConfig } from '../helpers/cli.js';
import { fixture, sendDelivery } from '../helpers/daemon.js';

const router = vi.hoisted(() => ({ calls: 0 }));
vi.mock('../../src/github/route.js', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../src/github/route.js')>();
  return {
    ...real,
    routeEvent: (...args: Parameters<typeof real.routeEvent>) => {
      router.calls += 1;
      return real.routeEvent(...args);
    },
  };
});

// Shares no piece with the temp dir's name (`the-loop-route-once-…`): the scrubber masks pieces of secrets.
const SECRET = 'whk-7f3a9c2e4b1d8f60a5e3c7b9d2f4a6e8';
const WI = 'github:acme/widgets#15';

let root: string;
let configPath: string;
let app: App | undefined;
let daemon: Daemon | undefined;
/** While true, a turn hangs until it is cancelled (the daemon stopping). */
let hang = false;
const prompts: string[] = [];

const outcome = (ok: boolean): RunOutcome => ({
  ok,
  endReason: ok ? 'result' : 'cancel',
  endedAt: new Date(),
  exitCode: ok ? 0 : null,
  exitSignal: null,
  error: ok ? null : 'cancelled',
  stoppedBy: ok ? 'exit' : 'SIGTERM',
});

const stub: Runner = {
  name: 'process',
  mode: 'headless',
  runTurn: async (input: RunTurnInput): Promise<RunOutcome> => {
    prompts.push(input.prompt);
    if (hang) {
      await new Promise<void>((resolve) => {
        if (input.signal?.aborted) resolve();
        input.signal?.addEventListener('abort', () => resolve(), { once: true });
      });
      return outcome(false);
    }
    // Reports like the engine it stands for (a silent first turn would hold the session).
    input.onEvent({ type: 'text', text: 'done' });
    input.onEvent({
      type: 'usage',
      usage: {
        inputTokens: 1,
        outputTokens: 1,
        cacheReadTokens: 0,
        cacheCreationTokens: 0,
        reasoningTokens: 0,
      },
    });
    return outcome(true);
  },
};

async function start(): Promise<{ app: App; daemon: Daemon }> {
  app = await createApp({
    cwd: root,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: root },
    configPath,
  });
  app.runners.process = stub;
  daemon = await startDaemon(app);
  return { app, daemon };
}

/** The daemon running now, or a new one. */
async function running(): Promise<{ app: App; daemon: Daemon }> {
  return app && daemon ? { app, daemon } : start();
}

async function stop(): Promise<void> {
  await daemon?.stop(0);
  daemon = undefined;
  app?.dispose();
  app = undefined;
}

async function until<T>(what: string, probe: () => Promise<T | undefined>): Promise<T> {
  for (let i = 0; i < 600; i++) {
    const value = await probe();
    if (value !== undefined) return value;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`timed out waiting for ${what}`);
}

const statusOf = async (a: App, id: string) => (await a.inbox.get(id))?.status;
/** The delivery once settled (its error, if it failed, shows in a failed expectation). */
const settled = (a: App, id: string) =>
  until(`delivery ${id} to settle`, async () => {
    const d = await a.inbox.get(id);
    return d?.status === 'done' || d?.status === 'failed' ? d : undefined;
  });

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'the-loop-route-once-'));
  const repo = join(root, 'widgets');
  mkdirSync(repo);
  mkdirSync(join(root, 'engine-state'));
  configPath = join(root, 'config.yaml');
  const config = {
    ...fakeEngineConfig(join(root, 'engine-state')),
    dataDir: 'data',
    server: { host: '127.0.0.1', port: 0 },
    webhook: { secret: SECRET },
    routing: { triggers: { labels: ['the-loop'] } },
    repos: { 'acme/widgets': { path: repo } },
    dispatch: { pollSeconds: 0.1, closeGraceSeconds: 1 },
  };
  writeFileSync(configPath, stringify(config));
});

afterAll(async () => {
  await stop();
  rmSync(root, { recursive: true, force: true });
});

describe('a delivery is routed exactly once, across ingress and dispatch', () => {
  it('a routed delivery run to its end: one router call', async () => {
    const { app, daemon } = await running();
    const before = router.calls;
    const sent = await sendDelivery(daemon.webhookUrl, SECRET, 'issues', fixture('issues.labeled'));
    expect(sent.status).toBe(202);
    expect(await settled(app, sent.id)).toMatchObject({ status: 'done', error: null });
    expect(await app.inbox.get(sent.id)).toMatchObject({
      route: 'start',
      workItem: WI,
      turnId: expect.any(Number),
    });
    expect(prompts.at(-1)).toContain(`GitHub issue ${WI}`);
    expect(router.calls - before).toBe(1);
  });

  it('a duplicate (the same delivery id again, after it ran and while it is sent twice at once): no further call', async () => {
    const { app, daemon } = await running();
    const first = await sendDelivery(
      daemon.webhookUrl,
      SECRET,
      'issue_comment',
      fixture('issue_comment.created'),
    );
    expect(first.status).toBe(202);
    expect(await settled(app, first.id)).toMatchObject({ status: 'done' });
    const before = router.calls;
    const again = await sendDelivery(
      daemon.webhookUrl,
      SECRET,
      'issue_comment',
      fixture('issue_comment.created'),
      {
        id: first.id,
      },
    );
    expect(again).toMatchObject({ status: 200, text: 'duplicate' });
    const twice = await Promise.all(
      [1, 2].map(() =>
        sendDelivery(daemon.webhookUrl, SECRET, 'issue_comment', fixture('issue_comment.created'), {
          id: `${first.id}-b`,
        }),
      ),
    );
    expect(twice.map((r) => r.status).sort()).toEqual([200, 202]);
    expect(await settled(app, `${first.id}-b`)).toMatchObject({ status: 'done' });
    // Nothing for the redelivery of the first; one for the second id, sent twice at once.
    expect(router.calls - before).toBe(1);
  });

  it('a daemon restart mid-queue: the next daemon runs what was queued without routing it again', async () => {
    const { app: first, daemon: current } = await running();
    const before = router.calls;
    hang = true;
    const ids: string[] = [];
    for (let n = 0; n < 3; n++) {
      const sent = await sendDelivery(
        current.webhookUrl,
        SECRET,
        'issue_comment',
        fixture('issue_comment.created'),
      );
      expect(sent.status).toBe(202);
      ids.push(sent.id);
      // The first one's turn hangs; the others queue behind it (one turn at a time per work item).
      if (n === 0)
        await until('the first turn to hang', async () =>
          (await statusOf(first, sent.id)) === 'running' ? true : undefined,
        );
    }
    expect(await Promise.all(ids.map((id) => statusOf(first, id)))).toEqual(['running', 'queued', 'queued']);
    expect(router.calls - before).toBe(3);
    // Stopped before they ran: the hanging turn is cancelled and its delivery queued again, in its place.
    await stop();
    hang = false;

    // A row an older version queued unrouted: routed once, by the next dispatcher, when first seen.
    const db = new Database(join(root, 'data', 'the-loop.db'));
    db.prepare(
      `INSERT INTO deliveries (id, source, event, action, received_at, body, status, updated_at)
       VALUES ('legacy-1', 'github', 'issue_comment', 'created', ?, ?, 'queued', ?)`,
    ).run(
      new Date().toISOString(),
      JSON.stringify(fixture('issue_comment.created')),
      new Date().toISOString(),
    );
    db.close();
    const afterStop = router.calls;
    expect(afterStop - before).toBe(3);

    const { app: next } = await start();
    for (const id of [...ids, 'legacy-1']) expect(await settled(next, id)).toMatchObject({ status: 'done' });
    // The three were routed at ingress, before the restart; only the legacy row, once, after it.
    expect(router.calls - afterStop).toBe(1);
    expect(await next.inbox.get('legacy-1')).toMatchObject({ route: 'deliver', workItem: WI });
    expect((await next.inbox.plan('legacy-1'))?.prompt).toContain(`GitHub issue ${WI}`);
  });
});
