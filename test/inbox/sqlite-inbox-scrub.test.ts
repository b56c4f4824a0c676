/**
 * A payload that carries a secret back (an agent posted a key to GitHub; the webhook echoes it) is
 * stored masked, still the JSON it was; a payload without one is stored byte for byte. Real SQLite
 * file, the real scrubber.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { SqliteInbox } from '../../src/inbox/sqlite-inbox.js';
import { SecretScrubber } from '../../src/log/secret-scrubber.js';
import { type Db, openDb } from '../../src/store/db.js';

const CANARY = 'sk-ant-api03-CANARYcanary0123456789abcdefXYZ';
let dir: string;
let db: Db;
let inbox: SqliteInbox;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'the-loop-inbox-scrub-'));
  db = openDb(join(dir, 'the-loop.db'));
  const scrubber = new SecretScrubber();
  scrubber.add(CANARY);
  inbox = new SqliteInbox(db, { scrub: scrubber.scrub });
});
afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

const deliver = (id: string, body: string) =>
  inbox.accept({ id, source: 'github', event: 'issue_comment', action: 'created', body });

it('masks a secret in a stored payload, in every form, and keeps it valid JSON', () => {
  const reversed = [...CANARY].reverse().join('');
  const body = JSON.stringify({
    action: 'created',
    comment: { body: `here it is: ${CANARY}\nand part ${CANARY.slice(5, 25)} and ${reversed}` },
    issue: { title: `"quoted" \\ ${CANARY}` },
  });
  expect(deliver('d-1', body)).toBe('accepted');
  const stored = inbox.body('d-1') ?? '';
  const parsed = JSON.parse(stored) as {
    action: string;
    comment: { body: string };
    issue: { title: string };
  };
  expect(parsed.action).toBe('created');
  expect(parsed.issue.title.startsWith('"quoted" \\ ')).toBe(true);
  for (const form of [CANARY, CANARY.slice(5, 25), reversed]) expect(stored).not.toContain(form);
  db.pragma('wal_checkpoint(TRUNCATE)');
  const file = readFileSync(join(dir, 'the-loop.db'));
  expect(file.includes(Buffer.from(CANARY.slice(5, 25)))).toBe(false);
});

it('stores a payload without a secret byte for byte', () => {
  const body = '{ "action":"created",  "comment": {"body": "caf\\u00e9 \\/ ok"} }';
  deliver('d-2', body);
  expect(inbox.body('d-2')).toBe(body);
});
