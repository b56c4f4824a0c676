/**
 * Take over and hand back over a real SQLite registry, inbox and ledger, with a real Dispatcher
 * asking `deliveryHold` (as main.ts wires it): a taken-over session's delivery waits with the
 * reason, and runs after the hand back; the hand back is logged and recorded as an unmetered drive.
 * The dispatcher's runTurn is a stub that writes the turn to the registry as the turn service would.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { SessionRecord } from '../../src/core/ports/sessions.js';
import { Dispatcher } from '../../src/dispatch/dispatcher.js';
import { createLogger, type Logger, memorySink } from '../../src/log/logger.js';
import {
  deliveryHold,
  endingTakeovers,
  handBack,
  type TakeoverDeps,
  takeOver,
  takeoverReason,
} from '../../src/sessions/takeover.js';
import { type Db, openDb } from '../../src/store/db.js';
import { SqliteBudgets } from '../../src/store/sqlite/budgets.js';
import { SqliteInbox } from '../../src/store/sqlite/inbox.js';
import { SqliteLedgerStore } from '../../src/store/sqlite/ledger.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sessions.js';

const WI = 'github:octo/widgets#7';
const T0 = new Date('2026-03-01T10:00:00.000Z');
const T1 = new Date('2026-03-01T10:12:05.000Z');

let dir: string;
let db: Db;
let store: SqliteSessionStore;
let inbox: SqliteInbox;
let ledger: SqliteLedgerStore;
let sink: ReturnType<typeof memorySink>;
let logger: Logger;
let deps: TakeoverDeps;
const dispatchers: Dispatcher[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'the-loop-takeover-'));
  db = openDb(join(dir, 'the-loop.db'));
  store = new SqliteSessionStore(db, { scrub: (t) => t });
  inbox = new SqliteInbox(db);
  ledger = new SqliteLedgerStore(db);
  sink = memorySink();
  logger = createLogger({ level: 'info', sinks: [sink] });
  deps = { store, ledger, logger };
});

afterEach(async () => {
  for (const d of dispatchers.splice(0)) await d.stop(0);
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

const openSession = () =>
  store.create({
    workItem: WI,
    slug: 'github-octo-widgets-7',
    engine: 'claude',
    runner: 'tmux',
    engineSessionId: null,
    cwd: dir,
    credentialKind: null,
    credentialEnv: null,
    tmuxTarget: 'loop-github-octo-widgets-7',
  });

const logged = () => sink.lines.map((l) => JSON.parse(l) as Record<string, unknown>);

describe('take over and hand back', () => {
  it('says why deliveries wait, in words, only while someone holds the session', async () => {
    const session = await openSession();
    expect(takeoverReason(session)).toBeUndefined();
    const taken = await takeOver(deps, session, { by: 'alice@host', principal: 'p1' }, T0);
    expect(takeoverReason(taken)).toBe(
      'taken over by alice@host since 2026-03-01T10:00:00.000Z: hand back to go on',
    );
    expect(logged().at(-1)).toMatchObject({ msg: expect.stringContaining('taken over'), by: 'alice@host' });
  });

  it('the same person taking over again changes nothing; someone else is refused, naming who', async () => {
    const session = await openSession();
    const first = await takeOver(deps, session, { by: 'alice@host', principal: 'p1' }, T0);
    const again = await takeOver(deps, session, { by: 'alice@host', principal: 'p1' }, T1);
    expect(again.takeover).toEqual(first.takeover);
    await expect(takeOver(deps, session, { by: 'bob', principal: null }, T1)).rejects.toMatchObject({
      code: 'usage',
      message: expect.stringContaining('alice@host'),
    });
  });

  it('refuses a name with control characters, an empty or an overlong one', async () => {
    const session = await openSession();
    for (const by of ['', '   ', 'a\u001b[31mb', 'a\nb', 'x'.repeat(101)])
      await expect(takeOver(deps, session, { by, principal: null }, T0)).rejects.toMatchObject({
        code: 'usage',
      });
    expect((await store.get(session.id))?.takeover).toBeNull();
  });

  it('the same person from a new login (after a daemon restart) goes on typing: the principal follows, since stays', async () => {
    const session = await openSession();
    await takeOver(deps, session, { by: 'alice@host', principal: 'login-before-restart' }, T0);
    const again = await takeOver(deps, session, { by: 'alice@host', principal: 'login-after-restart' }, T1);
    expect(again.takeover).toEqual({
      by: 'alice@host',
      since: T0.toISOString(),
      principal: 'login-after-restart',
    });
    await expect(
      takeOver(deps, session, { by: 'bob', principal: 'login-after-restart-2' }, T1),
    ).rejects.toMatchObject({
      code: 'usage',
    });
  });

  it('two hand backs at once (two tabs, the CLI and the console): one drive recorded', async () => {
    const session = await openSession();
    await takeOver(deps, session, { by: 'alice@host', principal: null }, T0);
    const ending = endingTakeovers(store, { ledger, logger });
    await Promise.all([
      handBack(deps, session, T1),
      handBack(deps, session, T1),
      ending.close(session.id, 'closed'),
    ]);
    const report = await ledger.report({ since: T0, until: new Date(Date.now() + 1000), by: 'day' });
    expect(report.notIncluded.unmeteredCount).toBe(1);
  });

  it('a session closed or lost while taken over: the take over ends, its typing recorded as a drive', async () => {
    const ending = endingTakeovers(store, { ledger, logger });
    const session = await openSession();
    await takeOver(deps, session, { by: 'alice@host', principal: null }, T0);
    const closed = await ending.close(session.id, 'closed by a person');
    expect(closed.status).toBe('closed');
    expect(closed.takeover).toBeNull();
    const report = await ledger.report({ since: T0, until: new Date(Date.now() + 1000), by: 'day' });
    expect(report.notIncluded.unmetered.map((u) => u.reason)).toEqual([
      expect.stringMatching(/^typed by alice@host \(taken over 2026-03-01T10:00:00.000Z → /),
    ]);
    // A session nobody held ends as before, with nothing recorded.
    const other = await store.create({
      workItem: 'github:octo/widgets#8',
      slug: 'github-octo-widgets-8',
      engine: 'claude',
      runner: 'tmux',
      engineSessionId: null,
      cwd: dir,
      credentialKind: null,
      credentialEnv: null,
    });
    expect((await ending.markGone(other.id, 'lost', 'tmux session vanished')).status).toBe('lost');
    const after = await ledger.report({ since: T0, until: new Date(Date.now() + 1000), by: 'day' });
    expect(after.notIncluded.unmeteredCount).toBe(1);
  });

  it('hand back clears it, logs who and how long, and records an unmetered drive', async () => {
    const session = await openSession();
    await takeOver(deps, session, { by: 'alice@host', principal: null }, T0);
    const back = await handBack(deps, session, T1);
    expect(back.takeover).toBeNull();
    expect(logged().at(-1)).toMatchObject({
      msg: expect.stringContaining('handed back'),
      by: 'alice@host',
      since: T0.toISOString(),
      until: T1.toISOString(),
      lasted: '12 min 5 s',
    });
    const report = await ledger.report({ since: T0, until: new Date(T1.getTime() + 1), by: 'day' });
    expect(report.notIncluded.unmetered).toEqual([
      {
        engine: 'claude',
        runner: 'tmux',
        reason: `typed by alice@host (taken over ${T0.toISOString()} → ${T1.toISOString()})`,
        count: 1,
        last: T1.toISOString(),
      },
    ]);
    // Handing back what no one holds records nothing more.
    await handBack(deps, back, T1);
    expect(
      (await ledger.report({ since: T0, until: new Date(T1.getTime() + 1), by: 'day' })).notIncluded
        .unmeteredCount,
    ).toBe(1);
  });
});

describe('the dispatcher holds a taken-over session (deliveryHold, as main.ts wires it)', () => {
  const ran: string[] = [];
  beforeEach(() => {
    ran.length = 0;
  });

  function dispatcher(): Dispatcher {
    const hold = {
      budgets: new SqliteBudgets(db),
      store,
      logger,
      loaded: { config: { budgets: { session: {}, workItem: {} } } },
    };
    const d = new Dispatcher({
      inbox,
      store,
      heldReason: (workItem) => deliveryHold(hold, workItem),
      runTurn: async (request) => {
        ran.push(request.deliveryId ?? '');
        const session = (await store.findActive(request.workItem)) as SessionRecord;
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
        const outcome = {
          ok: true,
          endReason: 'result' as const,
          endedAt: new Date(),
          exitCode: 0,
          exitSignal: null,
          error: null,
          stoppedBy: 'exit' as const,
        };
        return { session, turn: finished, created: false, outcome };
      },
      logger,
      concurrency: 4,
      closeGraceMs: 1000,
      pollMs: 60_000,
    });
    dispatchers.push(d);
    return d;
  }

  async function accept(id: string): Promise<void> {
    const routed = {
      action: 'deliver' as const,
      workItem: WI,
      repo: 'octo/widgets',
      prompt: `prompt of ${id}`,
      engine: '',
      runner: '',
      repoPath: dir,
      workspace: 'checkout' as const,
      author: 'octocat',
      trigger: 'comment',
    };
    const body = JSON.stringify({ comment: { body: 'not read again' } });
    expect(
      await inbox.accept({ id, source: 'github', event: 'issue_comment', action: 'created', body, routed }),
    ).toBe('accepted');
  }

  it("a taken-over session's delivery waits with the reason; after the hand back, it runs", async () => {
    const session = await openSession();
    const taken = await takeOver(deps, session, { by: 'alice@host', principal: 'p1' }, T0);
    await accept('d-1');
    const d = dispatcher();
    await d.start();
    d.notify();
    await d.idle();
    expect(ran).toEqual([]);
    const held = await inbox.get('d-1');
    expect(held).toMatchObject({ status: 'queued', heldReason: takeoverReason(taken) });

    await handBack(deps, taken, T1);
    d.notify();
    await d.idle();
    expect(ran).toEqual(['d-1']);
    expect((await inbox.get('d-1'))?.status).toBe('done');
  });

  it('a work item with no take over is not held (the budget rules decide, here none)', async () => {
    await openSession();
    await accept('d-2');
    const d = dispatcher();
    await d.start();
    d.notify();
    await d.idle();
    expect(ran).toEqual(['d-2']);
  });
});
