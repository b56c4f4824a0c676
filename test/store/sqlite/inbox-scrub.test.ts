/**
 * A payload that carries a secret back (an agent posted a key to GitHub; the webhook echoes it) is
 * stored masked, still the JSON it was; a payload without one is stored byte for byte. Real SQLite
 * file, the real scrubber. The stored plan (a rendered prompt quotes the payload) is masked the same way.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { SecretScrubber } from '../../../src/log/secret-scrubber.js';
import { type Db, openDb } from '../../../src/store/db.js';
import { SqliteInbox } from '../../../src/store/sqlite/inbox.js';

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

const WI = 'github:octo/widgets#7';
const deliver = (id: string, body: string, prompt = 'a prompt') =>
  inbox.accept({
    id,
    source: 'github',
    event: 'issue_comment',
    action: 'created',
    body,
    routed: {
      action: 'deliver',
      workItem: WI,
      repo: 'octo/widgets',
      prompt,
      engine: '',
      runner: '',
      repoPath: '/repos/widgets',
      workspace: 'checkout',
      author: 'octocat',
      trigger: 'mention @the-loop',
    },
  });

it('masks a secret in a stored payload, in every form, and keeps it valid JSON', async () => {
  const reversed = [...CANARY].reverse().join('');
  const body = JSON.stringify({
    action: 'created',
    comment: { body: `here it is: ${CANARY}\nand part ${CANARY.slice(5, 25)} and ${reversed}` },
    issue: { title: `"quoted" \\ ${CANARY}` },
  });
  expect(await deliver('d-1', body)).toBe('accepted');
  const stored = (await inbox.body('d-1')) ?? '';
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

it('stores a payload without a secret byte for byte', async () => {
  const body = '{ "action":"created",  "comment": {"body": "caf\\u00e9 \\/ ok"} }';
  await deliver('d-2', body);
  expect(await inbox.body('d-2')).toBe(body);
});

it('masks a secret in the stored plan (the rendered prompt quotes the payload); the plan is read back', async () => {
  const prompt = `New comment by @octocat:\n<<<UNTRUSTED\nhere it is: ${CANARY}\nUNTRUSTED>>>`;
  await deliver('d-3', JSON.stringify({ comment: { body: CANARY } }), prompt);
  const plan = await inbox.plan('d-3');
  expect(plan).toMatchObject({
    action: 'deliver',
    workItem: WI,
    repo: 'octo/widgets',
    trigger: 'mention @the-loop',
  });
  expect(plan?.prompt.startsWith('New comment by @octocat:\n<<<UNTRUSTED\nhere it is: ')).toBe(true);
  expect(plan?.prompt).not.toContain(CANARY);
  db.pragma('wal_checkpoint(TRUNCATE)');
  expect(readFileSync(join(dir, 'the-loop.db')).includes(Buffer.from(CANARY))).toBe(false);
});
