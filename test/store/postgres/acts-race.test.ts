/**
 * Two hosts recording the gateway's acts of one running turn at once: two pools on one database,
 * each recording 100 wire acts as fast as it can. Every act is kept, numbered 1..200 without a gap
 * or a repeat (each saveWire locks the turn's row before it reads the turn's highest number).
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { ActTurn, NewAct } from '../../../src/core/ports/acts.js';
import { PgActStore } from '../../../src/store/postgres/acts.js';
import { openPg } from '../../../src/store/postgres/migrate.js';
import type { Pg } from '../../../src/store/postgres/pg.js';
import { PgSessionStore } from '../../../src/store/postgres/sessions.js';
import { freshDatabase } from '../../helpers/postgres.js';
import { sessionInput, turnInput } from '../contract/fixtures.js';

const PER_HOST = 100;

const wireAct = (host: string, n: number): Omit<NewAct, 'seq'> => ({
  toolUseId: null,
  tool: 'gateway',
  kind: 'git-push',
  command: `git push (${host} #${n})`,
  detail: { host, n },
  outcome: 'succeeded',
  verdict: 'allow',
  rule: null,
  breach: false,
});

describe('ActStore on PostgreSQL: two hosts numbering wire acts of one turn', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  it(`keeps ${2 * PER_HOST} wire acts recorded at once by two pools, numbered 1..${2 * PER_HOST}`, async () => {
    const database = await freshDatabase();
    cleanups.push(database.drop);
    const pools: Pg[] = [];
    for (let i = 0; i < 2; i++) {
      const db = await openPg(database.url, { max: 8, applicationName: `host-${i}` });
      pools.push(db);
      cleanups.push(() => db.close());
    }
    const [a, b] = pools as [Pg, Pg];
    const sessions = new PgSessionStore(a, { scrub: (text) => text });
    const session = await sessions.create(sessionInput());
    const running = await sessions.beginTurn(session.id, turnInput());
    const turn: ActTurn = {
      id: running.id,
      seq: running.seq,
      sessionId: session.id,
      workItem: session.workItem,
      engine: session.engine,
      runner: session.runner,
      at: new Date().toISOString(),
    };
    const hosts = [
      { name: 'a', acts: new PgActStore(a, { scrub: (text) => text }) },
      { name: 'b', acts: new PgActStore(b, { scrub: (text) => text }) },
    ];
    await Promise.all(
      hosts.flatMap((host) =>
        Array.from({ length: PER_HOST }, (_, n) => host.acts.saveWire(turn, wireAct(host.name, n))),
      ),
    );

    const stored = await hosts[1]?.acts.list({ turnId: turn.id, limit: 10 * PER_HOST });
    const seqs = (stored ?? []).map((act) => act.seq).sort((x, y) => x - y);
    expect(seqs).toEqual(Array.from({ length: 2 * PER_HOST }, (_, i) => i + 1));
    expect(stored?.every((act) => act.source === 'wire' && act.turnSeq === running.seq)).toBe(true);
    const commands = new Set(stored?.map((act) => act.command));
    expect(commands.size).toBe(2 * PER_HOST);
  });
});
