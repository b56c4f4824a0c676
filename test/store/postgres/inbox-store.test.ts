/**
 * The PostgreSQL inbox beyond the port contract, as SQLite's own inbox tests hold SqliteInbox
 * (inbox-bytes, inbox-retention): bytes stored as they came (BYTEA) and read back as their UTF-8
 * text, masked with the real scrubber; retention in batches (limit, maxBytes, more, dry run); and
 * outside text holding U+0000, which a PostgreSQL TEXT column cannot.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RoutedDelivery } from '../../../src/core/ports/inbox.js';
import { SecretScrubber } from '../../../src/log/secret-scrubber.js';
import { PgInbox } from '../../../src/store/postgres/inbox.js';
import { openPg } from '../../../src/store/postgres/migrate.js';
import type { Pg } from '../../../src/store/postgres/pg.js';
import { freshDatabase } from '../../helpers/postgres.js';

const CANARY = 'sk-ant-api03-CANARYcanary0123456789abcdefXYZ';
const WI = 'github:octo/widgets#7';
const NOW = new Date('2026-03-31T12:00:00.000Z');
const daysAgo = (n: number) => new Date(NOW.getTime() - n * 24 * 60 * 60 * 1000);

let db: Pg;
let drop: () => Promise<void>;
let inbox: PgInbox;
/** The clock rows are written with. */
let clock: Date;

beforeEach(async () => {
  const database = await freshDatabase();
  drop = database.drop;
  db = await openPg(database.url, { max: 2 });
  const scrubber = new SecretScrubber();
  scrubber.add(CANARY);
  clock = daysAgo(40);
  inbox = new PgInbox(db, { scrub: scrubber.scrub, mayHold: scrubber.mayHold, now: () => clock });
});

afterEach(async () => {
  await db.close();
  await drop();
});

const ignored: RoutedDelivery = { action: 'ignore', workItem: WI, reason: 'nothing to do' };
const accept = (id: string, body: string | Uint8Array, bodyText?: string, routed: RoutedDelivery = ignored) =>
  inbox.accept({ id, source: 'github', event: 'issues', action: 'opened', body, bodyText, routed });
const stored = async (id: string) =>
  ((await db.row<{ body: Buffer }>('SELECT body FROM deliveries WHERE id = $1', [id])) as { body: Buffer })
    .body;
const pad = (id: string, size = 1000) => JSON.stringify({ id, pad: 'x'.repeat(size) });

describe('PgInbox bodies', () => {
  const HOSTILE: Array<[string, Buffer]> = [
    ['non-ASCII', Buffer.from('{"t":"café — 日本 🎉"}')],
    ['a lone 0xff', Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d])],
    [
      'an encoded surrogate',
      Buffer.concat([Buffer.from('{"a":"'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('"}')]),
    ],
    ['NUL bytes', Buffer.from('{"a":"\u0000x\u0000"}\u0000')],
    ['a byte-order mark', Buffer.from('\ufeff{"a":1}')],
    ['not JSON at all', Buffer.from([0x00, 0xff, 0xfe, 0x80, 0x0a, 0x0d, 0x1b, 0x5b])],
    ['empty', Buffer.alloc(0)],
  ];

  it.each(HOSTILE)(
    'bytes with %s are stored as they are and read back as their UTF-8 text',
    async (_, bytes) => {
      expect(await accept('d-1', bytes)).toBe('accepted');
      expect((await stored('d-1')).equals(bytes)).toBe(true);
      expect(await inbox.body('d-1')).toBe(bytes.toString('utf8'));
      expect(await inbox.readBody('d-1')).toBe(bytes.toString('utf8'));
    },
  );

  it('stores a text body as its UTF-8 bytes; masks a secret in bytes, with or without their text', async () => {
    await accept('text', '{"by":"hand ✓"}');
    expect((await stored('text')).equals(Buffer.from('{"by":"hand ✓"}'))).toBe(true);
    const json = `{"comment":{"body":"key ${CANARY}"},  "n": 1}`;
    await accept('bytes', Buffer.from(json));
    await accept('decoded', Buffer.from(json), json);
    for (const id of ['bytes', 'decoded']) {
      const body = (await inbox.body(id)) ?? '';
      expect(body).not.toContain(CANARY);
      expect(JSON.parse(body)).toMatchObject({ n: 1 });
      expect((await stored(id)).toString('utf8')).not.toContain(CANARY);
    }
  });

  it('keeps outside text holding U+0000 (a TEXT column cannot): U+FFFD in its place', async () => {
    await inbox.accept({
      id: 'nul',
      source: 'github',
      event: 'issues',
      action: 'op\u0000ened',
      body: '{}',
      routed: { action: 'reject', workItem: WI, reason: 'why\u0000not' },
    });
    await inbox.finish('nul', { status: 'failed', turnId: null, error: 'exit\u00001' });
    expect(await inbox.get('nul')).toMatchObject({
      action: 'op\uFFFDened',
      reason: 'why\uFFFDnot',
      error: 'exit\uFFFD1',
    });
  });
});

describe('PgInbox.prune', () => {
  const deliver: RoutedDelivery = {
    action: 'deliver',
    workItem: WI,
    repo: 'octo/widgets',
    prompt: 'the prompt',
    engine: '',
    runner: '',
    repoPath: '/repos/widgets',
    workspace: 'checkout',
    author: 'octocat',
    trigger: 'mention @the-loop',
  };
  const claim = async (id: string) =>
    (
      await inbox.applyClaims({
        claims: [{ deliveryId: id, workItem: WI, action: 'deliver', source: 'github' }],
        held: [],
        ignored: [],
      })
    ).length === 1;

  /** Finished rows (done, failed, ignored ×2) and a queued one, all 40 days old. */
  async function seedOld(): Promise<void> {
    for (const [id, status] of [
      ['done-1', 'done'],
      ['failed-1', 'failed'],
    ] as const) {
      await accept(id, pad(id), undefined, deliver);
      expect(await claim(id)).toBe(true);
      await inbox.finish(id, { status, turnId: null, error: status === 'failed' ? 'boom' : null });
    }
    await accept('ignored-1', pad('ignored-1'));
    await accept('ignored-2', pad('ignored-2'));
    await accept('queued-1', pad('queued-1'), undefined, deliver);
  }

  it('a dry run counts every prunable body and changes nothing; retainDays 0 keeps all', async () => {
    await seedOld();
    expect(await inbox.prune({ retainDays: 0, now: NOW })).toEqual({
      cutoff: null,
      pruned: 0,
      bytes: 0,
      more: false,
      dryRun: false,
    });
    const dry = await inbox.prune({ retainDays: 30, now: NOW, dryRun: true, limit: 1 });
    expect(dry).toMatchObject({ pruned: 4, more: false, dryRun: true, cutoff: daysAgo(30).toISOString() });
    expect(dry.bytes).toBeGreaterThan(4000);
    expect((await inbox.list()).every((d) => d.prunedAt === null)).toBe(true);
    expect(await inbox.prune({ retainDays: 50, now: NOW })).toMatchObject({ pruned: 0, more: false });
  });

  it('goes in batches: `limit` rows oldest first, or until maxBytes of bodies went', async () => {
    await seedOld();
    expect(await inbox.prune({ retainDays: 30, now: NOW, limit: 3 })).toMatchObject({
      pruned: 3,
      more: true,
    });
    expect((await inbox.list()).filter((d) => d.prunedAt).map((d) => d.id)).toEqual([
      'ignored-1',
      'failed-1',
      'done-1',
    ]);
    expect(await inbox.prune({ retainDays: 30, now: NOW, limit: 3 })).toMatchObject({
      pruned: 1,
      more: false,
    });
    for (const id of ['b-1', 'b-2', 'b-3']) await accept(id, pad(id, 1000));
    expect(await inbox.prune({ retainDays: 30, now: NOW, maxBytes: 2000 })).toMatchObject({
      pruned: 2,
      more: true,
    });
    await accept('huge', pad('huge', 5000));
    expect(await inbox.prune({ retainDays: 30, now: NOW, maxBytes: 1 })).toMatchObject({
      pruned: 1,
      more: true,
    });
    const last = await inbox.prune({ retainDays: 30, now: NOW, maxBytes: 1 });
    expect(last).toMatchObject({ pruned: 1, more: false });
    expect(last.bytes).toBe(pad('huge', 5000).length);
    expect((await stored('huge')).length).toBe(0);
    expect(await inbox.plan('done-1')).toBeUndefined();
    expect(await inbox.plan('queued-1')).toMatchObject({ action: 'deliver' });
  });

  it('a pruned body cannot be read or retried, and two hosts pruning at once count each body once', async () => {
    await seedOld();
    const other = await openPg(db.url, { max: 2 });
    try {
      const reports = await Promise.all([
        inbox.prune({ retainDays: 30, now: NOW }),
        new PgInbox(other).prune({ retainDays: 30, now: NOW }),
      ]);
      expect(reports[0].pruned + reports[1].pruned).toBe(4);
    } finally {
      await other.close();
    }
    await expect(inbox.readBody('done-1')).rejects.toMatchObject({ code: 'delivery-pruned' });
    await expect(inbox.retry('failed-1')).rejects.toMatchObject({ code: 'delivery-pruned' });
    expect((await inbox.get('failed-1'))?.status).toBe('failed');
    expect(await accept('done-1', '{}')).toBe('duplicate');
  });
});
