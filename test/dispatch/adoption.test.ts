/**
 * The dispatcher over a real SQLite inbox and registry: adopting a turn an earlier daemon left
 * running, leaving a detached turn in flight, stopping with SHUTDOWN, and checking a session before a
 * turn. Its collaborators (runTurn, adoptTurn, checkSession, workspace) are injected, so they are
 * stubs here that record what they were asked and write to the real registry as the turn service
 * would. Deliveries are stored routed, as ingress stores them: the dispatcher is given no router.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RoutedTurn } from '../../src/core/ports/inbox.js';
import type { NewSession, SessionRecord, TurnRecord } from '../../src/core/ports/sessions.js';
import { Dispatcher, type DispatcherDeps } from '../../src/dispatch/dispatcher.js';
import { createLogger, memorySink } from '../../src/log/logger.js';
import { type RunOutcome, SHUTDOWN } from '../../src/runners/runner.js';
import type { TurnRequest, TurnResult } from '../../src/sessions/turn-service.js';
import { type Db, openDb } from '../../src/store/db.js';
import { SqliteInbox } from '../../src/store/sqlite/inbox.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sessions.js';

const WI = 'github:octo/widgets#7';
const REPO_PATH = '/repos/widgets';

let dir: string;
let db: Db;
let store: SqliteSessionStore;
let inbox: SqliteInbox;
let sink: ReturnType<typeof memorySink>;
const dispatchers: Dispatcher[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'the-loop-adoption-'));
  db = openDb(join(dir, 'state', 'registry.sqlite'));
  store = new SqliteSessionStore(db, { scrub: (t) => t });
  inbox = new SqliteInbox(db);
  sink = memorySink();
});

afterEach(async () => {
  for (const d of dispatchers.splice(0)) await d.stop(0);
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

const newSession = (extra: Partial<NewSession> = {}): NewSession => ({
  workItem: WI,
  slug: 'github-octo-widgets-7',
  engine: 'claude',
  runner: 'tmux',
  engineSessionId: '11111111-2222-4333-8444-555555555555',
  cwd: REPO_PATH,
  credentialKind: 'api-key',
  credentialEnv: 'ANTHROPIC_API_KEY',
  tmuxTarget: 'loop-github-octo-widgets-7',
  ...extra,
});

/** A GitHub delivery for the work item, queued with its route and rendered prompt, as ingress stores it. */
async function accept(id: string, prompt = `prompt of ${id}`): Promise<void> {
  expect(
    await inbox.accept({
      id,
      source: 'github',
      event: 'issue_comment',
      action: 'created',
      body: JSON.stringify({ comment: { body: 'the payload is not read again' } }),
      routed: {
        action: 'deliver',
        workItem: WI,
        repo: 'octo/widgets',
        prompt,
        engine: '',
        runner: '',
        repoPath: REPO_PATH,
        workspace: 'checkout',
        author: 'octocat',
        trigger: 'comment',
      },
    }),
  ).toBe('accepted');
}

/** What an earlier daemon left: a delivery in flight whose turn was begun (its owner pid now dead). */
async function leftRunning(id: string): Promise<{ session: SessionRecord; turn: TurnRecord }> {
  await accept(id);
  const claims = [{ deliveryId: id, workItem: WI, action: 'deliver' as const, source: 'github' as const }];
  expect(await inbox.applyClaims({ claims, held: [], ignored: [] })).toEqual(claims);
  const earlier = new SqliteSessionStore(db, { scrub: (t) => t, ownerPid: 2_000_000 });
  const session = (await earlier.findActive(WI)) ?? (await earlier.create(newSession()));
  const turn = await earlier.beginTurn(session.id, {
    promptDigest: 'sha256:x',
    promptBytes: 10,
    meter: 'stream-json',
    deliveryId: id,
  });
  return { session, turn };
}

const outcome = (fields: Partial<RunOutcome> = {}): RunOutcome => ({
  ok: true,
  endReason: 'result',
  endedAt: new Date(),
  exitCode: 0,
  exitSignal: null,
  error: null,
  stoppedBy: 'exit',
  ...fields,
});

/** Finish a turn in the registry as the turn service would, and answer with its result. */
async function finish(turn: TurnRecord, ok = true, fields: Partial<RunOutcome> = {}): Promise<TurnResult> {
  const finished = await store.finishTurn(turn.id, {
    status: ok ? 'succeeded' : 'failed',
    endReason: ok ? 'result' : 'cancel',
    endedAt: new Date().toISOString(),
    exitCode: ok ? 0 : null,
    exitSignal: null,
    model: null,
    usage: null,
    costUsd: null,
    error: ok ? null : 'cancelled',
  });
  return {
    session: (await store.get(turn.sessionId)) as SessionRecord,
    turn: finished,
    created: false,
    outcome: outcome({ ok, ...fields }),
  };
}

/** Begin a turn for a request on the active session (or a new one), as the turn service would. */
async function begin(request: TurnRequest): Promise<{ turn: TurnRecord; created: boolean }> {
  const existing = await store.findActive(request.workItem);
  const session = existing ?? (await store.create(newSession({ cwd: request.cwd ?? REPO_PATH })));
  const turn = await store.beginTurn(session.id, {
    promptDigest: 'sha256:y',
    promptBytes: request.prompt.length,
    meter: 'stream-json',
    deliveryId: request.deliveryId,
  });
  return { turn, created: !existing };
}

/** A runTurn that runs each request to success in the registry, recording the requests. */
function recordingRunTurn(): { requests: TurnRequest[]; runTurn: DispatcherDeps['runTurn'] } {
  const requests: TurnRequest[] = [];
  return {
    requests,
    runTurn: async (request) => {
      requests.push(request);
      const { turn, created } = await begin(request);
      return { ...(await finish(turn)), created };
    },
  };
}

function dispatcher(deps: Partial<DispatcherDeps>): Dispatcher {
  const d = new Dispatcher({
    inbox,
    store,
    runTurn: async () => {
      throw new Error('runTurn not expected');
    },
    logger: createLogger({ level: 'debug', sinks: [sink] }),
    concurrency: 4,
    closeGraceMs: 60_000,
    pollMs: 60_000,
    ...deps,
  });
  dispatchers.push(d);
  return d;
}

function deferred<T>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

const tick = () => new Promise<void>((resolve) => setImmediate(resolve));
const logged = (msg: string) => sink.lines.some((l) => (JSON.parse(l) as { msg: string }).msg === msg);

describe('recover: adopting a turn left running', () => {
  it('adopts the running turn once; its result settles the delivery; later deliveries wait for it', async () => {
    const { turn } = await leftRunning('d-1');
    await accept('d-2');
    const adoption = deferred<TurnResult | undefined>();
    const adopted: Array<{ turn: TurnRecord; signal: AbortSignal | undefined }> = [];
    const { requests, runTurn } = recordingRunTurn();
    const d = dispatcher({
      runTurn,
      adoptTurn: (t, request) => {
        adopted.push({ turn: t, signal: request.signal });
        return adoption.promise;
      },
    });
    d.start();
    await tick();
    expect(adopted).toHaveLength(1);
    expect(adopted[0]?.turn).toEqual(turn);
    expect(adopted[0]?.signal).toBeInstanceOf(AbortSignal);
    // While it is followed: still in flight, and the next delivery of the work item waits behind it.
    expect((await inbox.get('d-1'))?.status).toBe('running');
    expect((await inbox.get('d-2'))?.status).toBe('queued');
    expect(requests).toEqual([]);
    expect(d.runningCount()).toBe(1);

    adoption.resolve(await finish(turn));
    await d.idle();
    expect(await inbox.get('d-1')).toMatchObject({
      status: 'done',
      turnId: turn.id,
      error: null,
      attempts: 1,
    });
    expect(adopted).toHaveLength(1);
    // runTurn never ran d-1 again; only d-2, after it.
    expect(requests.map((r) => r.deliveryId)).toEqual(['d-2']);
    expect((await inbox.get('d-2'))?.status).toBe('done');
    expect((await store.turnsForDelivery('d-1')).map((t) => t.status)).toEqual(['succeeded']);
  });

  it('an adopted turn that failed fails its delivery, with the turn’s error', async () => {
    const { turn } = await leftRunning('d-1');
    const d = dispatcher({ adoptTurn: async (t) => finish(t, false) });
    d.start();
    await d.idle();
    expect(await inbox.get('d-1')).toMatchObject({ status: 'failed', turnId: turn.id, error: 'cancelled' });
  });

  it('an adoption that returns undefined requeues the delivery, which then runs in its original order', async () => {
    const { turn } = await leftRunning('d-1');
    await accept('d-2');
    const order: string[] = [];
    const { requests, runTurn } = recordingRunTurn();
    const d = dispatcher({
      runTurn: (request) => {
        order.push(`run ${request.deliveryId}`);
        return runTurn(request);
      },
      adoptTurn: async (t) => {
        order.push(`adopt ${t.id}`);
        // As the turn service does when it cannot adopt: the turn is lost.
        await store.markTurnLost(t.id, 'could not be adopted: tmux session gone');
        return undefined;
      },
    });
    d.start();
    await d.idle();
    expect(order).toEqual([`adopt ${turn.id}`, 'run d-1', 'run d-2']);
    expect(requests.map((r) => r.prompt)).toEqual(['prompt of d-1', 'prompt of d-2']);
    const rerun = await store.turnsForDelivery('d-1');
    expect(rerun.map((t) => [t.id === turn.id, t.status, t.endReason])).toEqual([
      [true, 'failed', 'lost'],
      [false, 'succeeded', 'result'],
    ]);
    // Claimed twice: once by the earlier daemon, once again after the failed adoption.
    expect(await inbox.get('d-1')).toMatchObject({ status: 'done', turnId: rerun[1]?.id, attempts: 2 });
    expect((await inbox.get('d-2'))?.status).toBe('done');
    expect(logged('resuming a delivery interrupted by a restart')).toBe(true);
  });

  it('without an adoptTurn dep, a delivery whose last turn is running is requeued (old behaviour)', async () => {
    const { turn } = await leftRunning('d-1');
    const { requests, runTurn } = recordingRunTurn();
    const d = dispatcher({
      runTurn: async (request) => {
        // The daemon's start-up recovery would have recorded the old turn lost by now.
        await store.markTurnLost(turn.id, 'owner gone');
        return runTurn(request);
      },
    });
    d.start();
    await d.idle();
    expect(requests.map((r) => r.deliveryId)).toEqual(['d-1']);
    expect(await inbox.get('d-1')).toMatchObject({ status: 'done', attempts: 2 });
    expect(logged('resuming a delivery interrupted by a restart')).toBe(true);
  });

  it('a running delivery whose last turn already ended is settled from it, without adopting or running', async () => {
    const { turn } = await leftRunning('d-1');
    await finish(turn);
    let adoptions = 0;
    const d = dispatcher({
      adoptTurn: async () => {
        adoptions += 1;
        return undefined;
      },
    });
    d.start();
    await d.idle();
    expect(adoptions).toBe(0);
    expect(await inbox.get('d-1')).toMatchObject({ status: 'done', turnId: turn.id, attempts: 1 });
  });
});

describe('a detached turn', () => {
  it('leaves its delivery running (not done, not requeued); the next dispatcher adopts it', async () => {
    await accept('d-1');
    await accept('d-2');
    let begun: TurnRecord | undefined;
    let runs = 0;
    const first = dispatcher({
      runTurn: async (request) => {
        runs += 1;
        const { turn } = await begin(request);
        begun = turn;
        // The runner let go of a turn still running in its TUI: nothing recorded.
        return {
          session: (await store.get(turn.sessionId)) as SessionRecord,
          turn,
          created: true,
          outcome: outcome({ detached: true, stoppedBy: 'still-running' }),
        };
      },
    });
    first.start();
    await first.idle();
    expect(runs).toBe(1);
    expect(await inbox.get('d-1')).toMatchObject({ status: 'running', turnId: null, attempts: 1 });
    expect((await store.turnsForDelivery('d-1')).map((t) => t.status)).toEqual(['running']);
    // The delivery in flight still holds its work item: d-2 does not start on a wake-up either.
    first.notify();
    await tick();
    await first.idle();
    expect(runs).toBe(1);
    expect((await inbox.get('d-2'))?.status).toBe('queued');
    expect(logged('delivery left in flight for the next daemon to adopt')).toBe(true);
    await first.stop(0);

    // The next daemon follows that same turn instead of running d-1 again.
    const adopted: number[] = [];
    const { requests, runTurn } = recordingRunTurn();
    const next = dispatcher({
      runTurn,
      adoptTurn: async (t) => {
        adopted.push(t.id);
        return finish(t);
      },
    });
    next.start();
    await next.idle();
    expect(adopted).toEqual([begun?.id]);
    expect(await inbox.get('d-1')).toMatchObject({ status: 'done', turnId: begun?.id });
    expect(requests.map((r) => r.deliveryId)).toEqual(['d-2']);
  });
});

describe('stop', () => {
  it('stop(0) aborts a running turn with the reason SHUTDOWN; a cancelled turn is queued again', async () => {
    await accept('d-1');
    const reasons: unknown[] = [];
    const started = deferred<void>();
    const d = dispatcher({
      runTurn: async (request) => {
        const { turn } = await begin(request);
        started.resolve();
        return new Promise<TurnResult>((resolve) => {
          request.signal?.addEventListener('abort', () => {
            reasons.push(request.signal?.reason);
            resolve(finish(turn, false, { endReason: 'cancel', stoppedBy: 'SIGTERM' }));
          });
        });
      },
    });
    d.start();
    await started.promise;
    expect((await inbox.get('d-1'))?.status).toBe('running');
    await d.stop(0);
    expect(reasons).toEqual([SHUTDOWN]);
    // Interrupted by the shutdown, not failed by its work: it runs again when dispatching resumes.
    expect((await inbox.get('d-1'))?.status).toBe('queued');
  });

  it('a turn that ended on its own when the shutdown abort landed is settled, not queued again', async () => {
    await accept('d-1');
    const started = deferred<void>();
    const d = dispatcher({
      runTurn: async (request) => {
        const { turn } = await begin(request);
        started.resolve();
        // The engine's result came first (the turn is reading its last records): the abort changes nothing.
        return new Promise<TurnResult>((resolve) => {
          request.signal?.addEventListener('abort', () => resolve(finish(turn, true)));
        });
      },
    });
    d.start();
    await started.promise;
    await d.stop(0);
    // Running it again would do the work twice.
    expect((await inbox.get('d-1'))?.status).toBe('done');
  });

  it('stop(0) aborts an adoption with SHUTDOWN too; a detached result keeps the delivery in flight', async () => {
    await leftRunning('d-1');
    const reasons: unknown[] = [];
    const d = dispatcher({
      adoptTurn: (t, request) =>
        new Promise<TurnResult | undefined>((resolve) => {
          request.signal?.addEventListener('abort', async () => {
            reasons.push(request.signal?.reason);
            resolve({
              session: (await store.get(t.sessionId)) as SessionRecord,
              turn: t,
              created: false,
              outcome: outcome({ detached: true, stoppedBy: 'still-running' }),
            });
          });
        }),
    });
    d.start();
    await tick();
    expect(d.runningCount()).toBe(1);
    await d.stop(0);
    expect(reasons).toEqual([SHUTDOWN]);
    expect((await inbox.get('d-1'))?.status).toBe('running');
  });
});

describe('checkSession before a turn', () => {
  it('a session found lost gets a new one: the turn is asked for in the resolved workspace', async () => {
    const active = await store.create(newSession());
    await accept('d-1');
    const calls: string[] = [];
    const checked: SessionRecord[] = [];
    const routes: RoutedTurn[] = [];
    const { requests, runTurn } = recordingRunTurn();
    const d = dispatcher({
      checkSession: async (session) => {
        calls.push('check');
        checked.push(session);
        return store.markGone(session.id, 'lost', 'tmux session loop-github-octo-widgets-7 is gone');
      },
      workspace: async (r) => {
        calls.push('workspace');
        routes.push(r);
        return '/worktrees/github-octo-widgets-7';
      },
      runTurn: (request) => {
        calls.push('run');
        return runTurn(request);
      },
    });
    d.start();
    await d.idle();
    expect(calls).toEqual(['check', 'workspace', 'run']);
    expect(checked).toEqual([active]);
    expect(routes).toHaveLength(1);
    expect(routes[0]).toMatchObject({ action: 'deliver', workItem: WI, prompt: 'prompt of d-1' });
    expect(requests[0]).toMatchObject({
      workItem: WI,
      cwd: '/worktrees/github-octo-widgets-7',
      deliveryId: 'd-1',
    });
    expect((await store.get(active.id))?.status).toBe('lost');
    const fresh = await store.findActive(WI);
    expect(fresh?.id).not.toBe(active.id);
    expect(fresh?.cwd).toBe('/worktrees/github-octo-widgets-7');
    expect((await inbox.get('d-1'))?.status).toBe('done');
  });

  it('a session still active keeps its own cwd: no workspace resolved', async () => {
    const active = await store.create(newSession());
    await accept('d-1');
    const checked: SessionRecord[] = [];
    let workspaces = 0;
    const { requests, runTurn } = recordingRunTurn();
    const d = dispatcher({
      checkSession: async (session) => {
        checked.push(session);
        return session;
      },
      workspace: async () => {
        workspaces += 1;
        return '/worktrees/unused';
      },
      runTurn,
    });
    d.start();
    await d.idle();
    expect(checked).toEqual([active]);
    expect(workspaces).toBe(0);
    expect(requests[0]?.cwd).toBeUndefined();
    expect((await store.turnsForDelivery('d-1'))[0]?.sessionId).toBe(active.id);
  });
});

describe('a wake-up before start (the daemon listens before its dispatcher starts)', () => {
  it('dispatches nothing before the recovery: a delivery accepted meanwhile runs once, after it', async () => {
    await accept('d-early');
    const { requests, runTurn } = recordingRunTurn();
    const adopted: TurnRecord[] = [];
    const d = dispatcher({
      runTurn,
      adoptTurn: async (t) => {
        adopted.push(t);
        return undefined;
      },
    });
    // Ingress wakes the dispatcher for what it accepted before `start` ran the recovery.
    d.notify();
    d.notifySoon();
    for (let i = 0; i < 5; i++) await tick();
    expect(requests).toEqual([]);
    await d.start();
    await d.idle();
    expect(requests.map((r) => r.deliveryId)).toEqual(['d-early']);
    expect(adopted).toEqual([]);
    const turns = await store.turnsForDelivery('d-early');
    expect(turns.map((t) => t.status)).toEqual(['succeeded']);
    expect((await inbox.get('d-early'))?.status).toBe('done');
  });
});
