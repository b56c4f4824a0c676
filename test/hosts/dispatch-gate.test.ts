/**
 * The dispatcher with a lease gate (several hosts): a pass runs only the work items the gate says
 * this host holds, tells the gate what is pending and running here afterwards, and recovery leaves
 * another host's running delivery alone. Real SQLite inbox and registry; runTurn is a stub.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { Dispatcher } from '../../src/dispatch/dispatcher.js';
import type { LeaseGate } from '../../src/dispatch/dispatcher-deps.js';
import { nullLogger } from '../../src/log/logger.js';
import { SHUTDOWN } from '../../src/runners/runner.js';
import { type Db, openDb } from '../../src/store/db.js';
import { SqliteInbox } from '../../src/store/sqlite/inbox.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sessions.js';

let dir: string;
let db: Db;
let inbox: SqliteInbox;
let store: SqliteSessionStore;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'the-loop-gate-'));
  db = openDb(join(dir, 'the-loop.db'));
  inbox = new SqliteInbox(db);
  store = new SqliteSessionStore(db, { scrub: (t) => t });
});

afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

async function queue(id: string, workItem: string): Promise<void> {
  await inbox.accept({
    id,
    source: 'manual',
    event: 'manual',
    action: null,
    body: '{}',
    routed: {
      action: 'deliver',
      workItem,
      repo: 'o/r',
      prompt: `do ${id}`,
      engine: '',
      runner: '',
      repoPath: dir,
      workspace: 'checkout',
      author: 'me',
      trigger: 'manual',
    },
  });
}

/** A gate holding `mine`; what it was asked and told is kept. */
function gate(mine: string[]) {
  const asked: string[][] = [];
  const settled: Array<{ pending: string[]; running: string[] }> = [];
  const g: LeaseGate = {
    owned: async (candidates) => {
      asked.push(candidates.map((c) => `${c.workItem}:${c.deliveryId}`));
      return new Set(candidates.map((c) => c.workItem).filter((w) => mine.includes(w)));
    },
    settle: async (busy) => {
      settled.push({ pending: [...busy.pending].sort(), running: [...busy.running].sort() });
    },
    holds: (w) => mine.includes(w),
  };
  return { g, asked, settled };
}

it('runs only the work items this host holds, and tells the gate what is left', async () => {
  await queue('d1', 'github:o/r#1');
  await queue('d2', 'github:o/r#2');
  await queue('d3', 'github:o/r#1');
  const ran: string[] = [];
  const { g, asked, settled } = gate(['github:o/r#1']);
  const dispatcher = new Dispatcher({
    inbox,
    store,
    runTurn: async (request) => {
      ran.push(request.deliveryId ?? '');
      throw new Error('stub engine');
    },
    leases: g,
    logger: nullLogger,
    concurrency: 4,
    closeGraceMs: 60_000,
    pollMs: 60_000,
  });
  await dispatcher.start();
  await dispatcher.idle();
  await dispatcher.stop(0);
  expect(ran).toEqual(['d1', 'd3']);
  // Each work item asked about with its first pending delivery.
  expect(asked[0]).toEqual(['github:o/r#1:d1', 'github:o/r#2:d2']);
  expect((await inbox.get('d2'))?.status).toBe('queued');
  expect(settled.at(-1)).toEqual({ pending: [], running: [] });
});

it("leaves another host's running delivery to it on recovery", async () => {
  await queue('d1', 'github:o/r#2');
  const plan = {
    claims: [
      { deliveryId: 'd1', workItem: 'github:o/r#2', action: 'deliver' as const, source: 'manual' as const },
    ],
    held: [],
    ignored: [],
  };
  await inbox.applyClaims(plan);
  const { g } = gate([]);
  const dispatcher = new Dispatcher({
    inbox,
    store,
    runTurn: async () => {
      throw new Error('never');
    },
    leases: g,
    logger: nullLogger,
    concurrency: 4,
    closeGraceMs: 60_000,
    pollMs: 60_000,
  });
  await dispatcher.start();
  await dispatcher.idle();
  await dispatcher.stop(0);
  expect((await inbox.get('d1'))?.status).toBe('running');
});

it('aborts every running turn when the host is fenced (a tmux turn detaches on SHUTDOWN)', async () => {
  await queue('d1', 'github:o/r#1');
  const { g } = gate(['github:o/r#1']);
  let reason: unknown;
  let started!: () => void;
  const running = new Promise<void>((go) => {
    started = go;
  });
  const dispatcher = new Dispatcher({
    inbox,
    store,
    runTurn: (request) =>
      new Promise((_, fail) => {
        started();
        request.signal?.addEventListener('abort', () => {
          reason = request.signal?.reason;
          fail(new Error('aborted'));
        });
      }),
    leases: g,
    logger: nullLogger,
    concurrency: 4,
    closeGraceMs: 60_000,
    pollMs: 60_000,
  });
  await dispatcher.start();
  await running;
  expect(dispatcher.runningCount()).toBe(1);
  dispatcher.abortRunning();
  await dispatcher.idle();
  await dispatcher.stop(0);
  expect(reason).toBe(SHUTDOWN);
});
