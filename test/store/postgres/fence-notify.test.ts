/**
 * Wake-ups across hosts (issue 17): the inbox's writes that make work runnable notify
 * `INBOX_CHANNEL` with a hint of the work item (its sha256), delivered to a `LISTEN`ing connection when their transaction
 * commits, never before and never when it rolls back.
 */
import { createHash } from 'node:crypto';
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { INBOX_CHANNEL, PgInbox } from '../../../src/store/postgres/inbox.js';
import { notifyInbox } from '../../../src/store/postgres/inbox-notify.js';
import { openPg } from '../../../src/store/postgres/migrate.js';
import type { Pg } from '../../../src/store/postgres/pg.js';
import { freshDatabase } from '../../helpers/postgres.js';
import { claimOf, delivery, onlyClaims, routed } from '../contract/fixtures.js';

const WI = 'github:octo/widgets#7';
const sha256hex = (text: string) => createHash('sha256').update(text).digest('hex');
const HINT = sha256hex(WI);
let db: Pg;
let drop: () => Promise<void>;
let listener: pg.Client;
let heard: string[];
let inbox: PgInbox;

beforeEach(async () => {
  const database = await freshDatabase();
  drop = database.drop;
  db = await openPg(database.url, { max: 3 });
  inbox = new PgInbox(db, { scrub: (t) => t });
  listener = new pg.Client({ connectionString: database.url });
  await listener.connect();
  heard = [];
  listener.on('notification', (n) => {
    if (n.channel === INBOX_CHANNEL) heard.push(n.payload ?? '');
  });
  await listener.query(`LISTEN ${INBOX_CHANNEL}`);
});

afterEach(async () => {
  await listener.end();
  await db.close();
  await drop();
});

const settle = () => new Promise((go) => setTimeout(go, 150));

describe('inbox wake-ups', () => {
  it('an accepted delivery notifies its work item on commit; an ignored one does not', async () => {
    expect(INBOX_CHANNEL).toBe('the_loop_inbox');
    await inbox.accept(delivery('d-0', routed('ignore', WI)));
    await inbox.accept(delivery('d-1', routed('deliver', WI)));
    const { routed: _, ...arriving } = delivery('d-2', routed('start', WI));
    await inbox.acceptArriving([{ ...arriving, route: () => routed('start', WI) }]);
    await inbox.accept(delivery('d-1', routed('deliver', WI))); // a duplicate: nothing new runnable
    await settle();
    expect(heard).toEqual([HINT, HINT]);
  });

  it('nothing is heard before the transaction commits, nor when it rolls back', async () => {
    let release: () => void = () => {};
    const held = new Promise<void>((go) => {
      release = go;
    });
    const tx = db.tx(async (q) => {
      await notifyInbox(q, [WI, WI, null]);
      await held;
    });
    await settle();
    expect(heard).toEqual([]);
    release();
    await tx;
    await settle();
    expect(heard).toEqual([HINT]);
    await expect(
      db.tx(async (q) => {
        await notifyInbox(q, ['github:octo/widgets#8']);
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    await settle();
    expect(heard).toEqual([HINT]);
  });

  it('a work item longer than a NOTIFY payload may be (8000 bytes) is accepted, and still wakes the hosts', async () => {
    const long = `github:octo/${'w'.repeat(9000)}#1`;
    expect(await inbox.accept(delivery('d-long', routed('deliver', long)))).toBe('accepted');
    expect((await inbox.get('d-long'))?.workItem).toBe(long);
    await settle();
    // A fixed-size hint, not the work item.
    expect(heard).toEqual([sha256hex(long)]);
  });

  it('a retry and a requeue notify; a claim and a finish do not', async () => {
    await inbox.accept(delivery('d-1', routed('deliver', WI)));
    await settle();
    expect(heard).toEqual([HINT]);
    await inbox.applyClaims(onlyClaims(claimOf('d-1', WI)));
    await settle();
    expect(heard).toEqual([HINT]);
    await inbox.requeue('d-1');
    await settle();
    expect(heard).toEqual([HINT, HINT]);
    await inbox.applyClaims(onlyClaims(claimOf('d-1', WI)));
    await inbox.finish('d-1', { status: 'failed', turnId: null, error: 'boom' });
    await settle();
    expect(heard).toEqual([HINT, HINT]);
    heard = [];
    await inbox.retry('d-1');
    await inbox.requeue('d-1'); // not running: nothing changes, nothing heard
    await settle();
    expect(heard).toEqual([HINT]);
  });
});
