/**
 * A work item's line keeps arrival order across hosts. A delivery's `seq` is given when it is
 * inserted but seen by other hosts when it commits: without the line lock an arrival takes, a later
 * delivery committed first could be claimed while an earlier one of its work item was still in
 * flight. Here host A's arrival is held open right after its insert (a test trigger sleeps), and
 * host B accepts and claims a later delivery of the same work item meanwhile: B's claim must not
 * overtake A's delivery.
 */
import { afterEach, beforeEach, expect, it } from 'vitest';
import type { ArrivingDelivery } from '../../../src/core/ports/inbox.js';
import { PgInbox } from '../../../src/store/postgres/inbox.js';
import { openPg } from '../../../src/store/postgres/migrate.js';
import type { Pg } from '../../../src/store/postgres/pg.js';
import { freshDatabase } from '../../helpers/postgres.js';
import { delivery, routed } from '../contract/fixtures.js';

const WI = 'github:octo/widgets#7';
let pools: Pg[] = [];
let drop: () => Promise<void> = async () => {};

beforeEach(async () => {
  const database = await freshDatabase();
  drop = database.drop;
  pools = [await openPg(database.url, { max: 4 }), await openPg(database.url, { max: 4 })];
  // The first delivery's arrival stays open for a while after its row is inserted.
  await pools[0]?.run(`CREATE FUNCTION slow_first() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN IF NEW.id = 'first' THEN PERFORM pg_sleep(1.5); END IF; RETURN NEW; END $$`);
  await pools[0]?.run(
    'CREATE TRIGGER slow_first AFTER INSERT ON deliveries FOR EACH ROW EXECUTE FUNCTION slow_first()',
  );
});

afterEach(async () => {
  for (const db of pools.splice(0)) await db.close();
  await drop();
});

const arriving = (id: string): ArrivingDelivery => {
  const { routed: r, ...rest } = delivery(id, routed('deliver', WI));
  return { ...rest, route: () => r };
};

it("a later delivery accepted and claimed by another host while an earlier one's arrival is in flight waits its turn", async () => {
  const [a, b] = pools.map((db) => new PgInbox(db, { scrub: (t) => t })) as [PgInbox, PgInbox];
  const first = a.acceptArriving([arriving('first')]);
  // Host A is inside its arrival's transaction (its row inserted, the trigger sleeping).
  for (let i = 0; i < 200; i++) {
    const sleeping = await pools[1]?.row<{ n: number }>(
      "SELECT COUNT(*) AS n FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND datname = current_database()",
    );
    if (sleeping?.n) break;
    await new Promise((go) => setTimeout(go, 10));
  }
  const second = b.acceptArriving([arriving('second')]);
  const claim = b.applyClaims({
    claims: [{ deliveryId: 'second', workItem: WI, action: 'deliver', source: 'github' }],
    held: [],
    ignored: [],
  });
  const [, , won] = await Promise.all([first, second, claim]);
  const rows = await b.list({ workItem: WI });
  const seqOf = (id: string) => rows.find((r) => r.id === id)?.seq ?? -1;
  // Arrival order is commit order: the first is ahead in the line, and the second was not claimed.
  expect(seqOf('first')).toBeLessThan(seqOf('second'));
  expect(won).toEqual([]);
  expect(rows.find((r) => r.id === 'second')?.status).toBe('queued');
  const next = await b.applyClaims({
    claims: [{ deliveryId: 'first', workItem: WI, action: 'deliver', source: 'github' }],
    held: [],
    ignored: [],
  });
  expect(next.map((c) => c.deliveryId)).toEqual(['first']);
});
