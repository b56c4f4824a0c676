/**
 * The daemon's retention timer over a real SQLite inbox: a pass at start, batches until nothing is
 * left, a failing pass logged (not thrown), stop() clears the timer and waits for a pass in progress.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Inbox } from '../../src/core/ports/inbox.js';
import { startRetention } from '../../src/inbox/retention-timer.js';
import { createLogger, memorySink } from '../../src/log/logger.js';
import { type Db, openDb } from '../../src/store/db.js';
import { SqliteInbox } from '../../src/store/sqlite/inbox.js';

const NOW = new Date('2026-03-31T12:00:00.000Z');
const FORTY_DAYS_AGO = new Date(NOW.getTime() - 40 * 24 * 60 * 60 * 1000);

let dir: string;
let db: Db;
let inbox: SqliteInbox;
let sink: ReturnType<typeof memorySink>;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'the-loop-retention-timer-'));
  db = openDb(join(dir, 'the-loop.db'));
  inbox = new SqliteInbox(db, { now: () => FORTY_DAYS_AGO });
  sink = memorySink();
});

afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

const logger = () => createLogger({ level: 'debug', sinks: [sink] });
const logs = () => sink.lines.map((l) => JSON.parse(l) as Record<string, unknown>);

async function seed(n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    await inbox.accept({
      id: `d-${i}`,
      source: 'github',
      event: 'issues',
      action: 'opened',
      body: JSON.stringify({ i }),
      routed: { action: 'ignore', reason: 'no trigger' },
    });
  }
  await inbox.accept({
    id: 'waiting',
    source: 'github',
    event: 'issues',
    action: 'opened',
    body: '{"w":1}',
    routed: {
      action: 'close',
      workItem: 'github:octo/widgets#1',
      repo: 'octo/widgets',
      reason: 'issue closed',
    },
  });
}

describe('startRetention', () => {
  it('prunes at start, every batch until done, and logs the total', async () => {
    await seed(250);
    const retention = startRetention({ inbox, retainDays: 30, logger: logger(), now: () => NOW });
    await vi.waitFor(async () =>
      expect((await inbox.list({ status: 'ignored', limit: 1000 })).every((d) => d.prunedAt)).toBe(true),
    );
    await vi.waitFor(() =>
      expect(logs().some((l) => l.msg?.toString().startsWith('inbox retention'))).toBe(true),
    );
    await retention.stop();
    const done = logs().find((l) => l.msg === 'inbox retention: dropped the bodies of finished deliveries');
    // 250 rows in batches of 100: one log line for the whole pass.
    expect(done).toMatchObject({ deliveries: 250, retainDays: 30, cutoff: '2026-03-01T12:00:00.000Z' });
    expect((await inbox.get('waiting'))?.prunedAt).toBeNull();
    expect(await inbox.body('waiting')).toBe('{"w":1}');
  });

  it('runs again every interval; stop() clears the timer', async () => {
    const calls: number[] = [];
    const counting: Pick<Inbox, 'prune'> = {
      prune: (options) => {
        calls.push(Date.now());
        return inbox.prune(options);
      },
    };
    const retention = startRetention({ inbox: counting, retainDays: 30, logger: logger(), intervalMs: 20 });
    await vi.waitFor(() => expect(calls.length).toBeGreaterThanOrEqual(3));
    await retention.stop();
    const after = calls.length;
    await new Promise((r) => setTimeout(r, 60));
    expect(calls.length).toBe(after);
  });

  it('stop() ends a pass in progress between two batches and waits for it', async () => {
    let calls = 0;
    const endless: Pick<Inbox, 'prune'> = {
      prune: async () => {
        calls++;
        return { cutoff: 'x', pruned: 1, bytes: 10, more: true, dryRun: false };
      },
    };
    const retention = startRetention({ inbox: endless, retainDays: 30, logger: logger() });
    await vi.waitFor(() => expect(calls).toBeGreaterThan(5));
    await retention.stop();
    const after = calls;
    await new Promise((r) => setTimeout(r, 20));
    expect(calls).toBe(after);
    expect(
      logs().find((l) => l.msg === 'inbox retention: dropped the bodies of finished deliveries'),
    ).toMatchObject({
      deliveries: after,
      bytes: after * 10,
    });
  });

  it('a failing pass is logged and the daemon goes on; 0 days never prunes', async () => {
    const failing: Pick<Inbox, 'prune'> = {
      prune: async () => {
        throw new Error('disk I/O error');
      },
    };
    const retention = startRetention({ inbox: failing, retainDays: 30, logger: logger() });
    await vi.waitFor(() =>
      expect(
        logs().find((l) => l.msg === 'inbox retention pass failed; the next one tries again'),
      ).toBeDefined(),
    );
    await retention.stop();

    await seed(3);
    let called = false;
    const never = startRetention({
      inbox: {
        prune: (o) => {
          called = true;
          return inbox.prune(o);
        },
      },
      retainDays: 0,
      logger: logger(),
      intervalMs: 1,
    });
    await new Promise((r) => setTimeout(r, 30));
    await never.stop();
    expect(called).toBe(false);
    expect((await inbox.list()).every((d) => d.prunedAt === null)).toBe(true);
  });
});
