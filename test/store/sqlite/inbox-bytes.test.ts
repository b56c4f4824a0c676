/**
 * A payload given as bytes (a webhook's body as it came) is stored as those bytes, a BLOB, and read
 * back as their UTF-8 text — what ingress stored when it decoded a body before storing it — whatever
 * the bytes: invalid UTF-8, NUL, a byte-order mark, a view into a larger buffer. A secret in them is
 * masked as in a text payload. Text payloads (made by hand, or rows from before) read as before.
 * Real SQLite file, the real scrubber.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import type { RoutedDelivery } from '../../../src/core/ports/inbox.js';
import { SecretScrubber } from '../../../src/log/secret-scrubber.js';
import { type Db, openDb } from '../../../src/store/db.js';
import { SqliteInbox } from '../../../src/store/sqlite/inbox.js';

const CANARY = 'sk-ant-api03-CANARYcanary0123456789abcdefXYZ';
const NOW = new Date('2026-03-31T12:00:00.000Z');
let dir: string;
let db: Db;
let inbox: SqliteInbox;
let clock: Date;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'the-loop-inbox-bytes-'));
  db = openDb(join(dir, 'the-loop.db'));
  const scrubber = new SecretScrubber();
  scrubber.add(CANARY);
  clock = new Date(NOW.getTime() - 40 * 24 * 60 * 60 * 1000);
  // As the daemon builds it: the bytes checked before their text is scrubbed (SecretScrubber.mayHold).
  inbox = new SqliteInbox(db, { scrub: scrubber.scrub, mayHold: scrubber.mayHold, now: () => clock });
});
afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

const ignored: RoutedDelivery = { action: 'ignore', reason: 'nothing to do' };
const accept = (id: string, body: string | Uint8Array, bodyText?: string) =>
  inbox.accept({ id, source: 'github', event: 'issues', action: 'opened', body, bodyText, routed: ignored });
const stored = (id: string) =>
  (db.prepare('SELECT body FROM deliveries WHERE id = ?').get(id) as { body: string | Buffer }).body;

const HOSTILE: Array<[string, Buffer]> = [
  ['plain JSON', Buffer.from('{"action":"opened","n":1}')],
  ['non-ASCII', Buffer.from('{"t":"café — 日本 🎉"}')],
  ['a lone 0xff', Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d])],
  [
    'a cut-off sequence',
    Buffer.concat([Buffer.from('{"a":"'), Buffer.from([0xe2, 0x82]), Buffer.from('"}')]),
  ],
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
    const column = stored('d-1');
    expect(Buffer.isBuffer(column)).toBe(true);
    expect((column as Buffer).equals(bytes)).toBe(true);
    expect(await inbox.body('d-1')).toBe(bytes.toString('utf8'));
    expect(await inbox.readBody('d-1')).toBe(bytes.toString('utf8'));
  },
);

it('stores only the bytes of a view, not the buffer around it', async () => {
  const whole = Buffer.from('xxxx{"a":"view"}yyyy');
  const view = new Uint8Array(whole.buffer, whole.byteOffset + 4, 12);
  await accept('d-1', view);
  expect((stored('d-1') as Buffer).toString('latin1')).toBe('{"a":"view"}');
  expect(await inbox.body('d-1')).toBe('{"a":"view"}');
});

it('masks a secret in bytes, with or without their text given, and keeps them valid JSON', async () => {
  const json = JSON.stringify({ comment: { body: `key ${CANARY} and ${CANARY.slice(3, 20)}` } });
  await accept('d-1', Buffer.from(json), json);
  await accept('d-2', Buffer.from(json));
  // The key at an odd offset of the buffer's memory, between bytes that are not UTF-8.
  const odd = Buffer.concat([
    Buffer.from('{"c":"\u00ff'),
    Buffer.from([0xff]),
    Buffer.from(`${CANARY.slice(5, 18)}"}`),
  ]);
  await accept('d-3', Buffer.from(odd).subarray(0), odd.toString('utf8'));
  expect(await inbox.body('d-3')).not.toContain(CANARY.slice(5, 18));
  for (const id of ['d-1', 'd-2']) {
    const body = (await inbox.body(id)) ?? '';
    expect(JSON.parse(body)).toEqual({ comment: { body: 'key [secret] and [secret]' } });
    expect(body).not.toContain(CANARY.slice(3, 20));
  }
  db.pragma('wal_checkpoint(TRUNCATE)');
  expect(readFileSync(join(dir, 'the-loop.db')).includes(Buffer.from(CANARY.slice(3, 20)))).toBe(false);
});

it('reads text payloads (by hand, or stored before) and bytes alike, and prunes both', async () => {
  await accept('text', '{"by":"hand"}');
  await accept('bytes', Buffer.from('{"by":"webhook"}'));
  expect(stored('text')).toBe('{"by":"hand"}');
  expect(await inbox.body('text')).toBe('{"by":"hand"}');
  expect(await inbox.body('bytes')).toBe('{"by":"webhook"}');
  const report = await inbox.prune({ retainDays: 30, now: NOW });
  expect(report).toMatchObject({ pruned: 2, bytes: 13 + 16 });
  expect(await inbox.body('text')).toBeUndefined();
  expect(await inbox.body('bytes')).toBeUndefined();
  expect(stored('bytes')).toBe('');
});
