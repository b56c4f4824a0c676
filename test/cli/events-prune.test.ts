/**
 * Retention through the real CLI and the real daemon: `events prune` drops the bodies of finished
 * deliveries older than inbox.retainDays, and `events show` / `list` still show their metadata and
 * outcome and say the body was pruned. The registry is seeded through the real inbox and store, with
 * a clock 40 days back (nothing sleeps).
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { openDb } from '../../src/store/db.js';
import { SqliteInbox } from '../../src/store/sqlite/inbox.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sessions.js';
import { fakeEngineConfig, runCli } from '../helpers/cli.js';
import { startDaemonProcess } from '../helpers/daemon.js';

const SECRET = 'test-webhook-secret-0123456789abcdef';
const WI = 'github:octo/widgets#7';
const DAY = 24 * 60 * 60 * 1000;
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

let root: string;
let dataDir: string;
let turnId: number;

function writeConfig(extra: Record<string, unknown> = {}): void {
  const config = {
    ...fakeEngineConfig(join(root, 'engine-state')),
    dataDir: 'data',
    webhook: { secret: SECRET },
    ...extra,
  };
  writeFileSync(join(root, 'config.yaml'), stringify(config));
}

const cli = (args: string[]) =>
  runCli(args, { cwd: root, env: { THE_LOOP_CONFIG: join(root, 'config.yaml') } });
const showJson = async (id: string, ...more: string[]) => {
  const res = await cli(['events', 'show', id, '--json', ...more]);
  expect(res.code).toBe(0);
  return JSON.parse(res.stdout) as {
    delivery: Record<string, unknown>;
    turns: { id: number }[];
    body?: unknown;
  };
};

/** Deliveries received (and settled) `days` ago, through the real inbox and registry. */
async function seed(
  days: number,
  ids: { done?: string; failed?: string; queued?: string; ignored?: string },
): Promise<void> {
  const db = openDb(join(dataDir, 'the-loop.db'));
  const at = new Date(Date.now() - days * DAY);
  const inbox = new SqliteInbox(db, { now: () => at });
  const accept = (id: string, action: 'deliver' | 'ignore' = 'deliver') =>
    inbox.accept({
      id,
      source: 'github',
      event: 'issue_comment',
      action: 'created',
      body: JSON.stringify({ comment: { body: `@the-loop please (${id})` }, pad: 'x'.repeat(10_000) }),
      routed:
        action === 'ignore'
          ? { action, workItem: WI, reason: 'no trigger in the comment' }
          : {
              action,
              workItem: WI,
              repo: 'octo/widgets',
              prompt: `please (${id})`,
              engine: '',
              runner: '',
              // A queued one the daemon runs later fails at once (no such directory): no engine runs.
              repoPath: join(root, 'no-such-checkout'),
              workspace: 'checkout',
              author: 'octocat',
              trigger: 'mention @the-loop',
            },
    });
  const claim = async (id: string) =>
    inbox.applyClaims({
      claims: [{ deliveryId: id, workItem: WI, action: 'deliver', source: 'github' }],
      held: [],
      ignored: [],
    });
  if (ids.done) {
    await accept(ids.done);
    await claim(ids.done);
    const store = new SqliteSessionStore(db, { scrub: (t) => t });
    const session = await store.create({
      workItem: WI,
      slug: 'github-octo-widgets-7-test',
      engine: 'fake',
      runner: 'process',
      engineSessionId: null,
      cwd: root,
      credentialKind: null,
      credentialEnv: null,
    });
    // Another session's turn first: the delivery's turn is the session's turn 1, not turn id 1.
    const other = await store.create({
      workItem: 'github:octo/widgets#8',
      slug: 'github-octo-widgets-8-test',
      engine: 'fake',
      runner: 'process',
      engineSessionId: null,
      cwd: root,
      credentialKind: null,
      credentialEnv: null,
    });
    await store.beginTurn(other.id, { promptDigest: 'sha256:y', promptBytes: 1, meter: 'stream-json' });
    const turn = await store.beginTurn(session.id, {
      promptDigest: 'sha256:x',
      promptBytes: 10,
      meter: 'stream-json',
      deliveryId: ids.done,
    });
    await store.finishTurn(turn.id, {
      status: 'succeeded',
      endReason: 'result',
      endedAt: at.toISOString(),
      exitCode: 0,
      exitSignal: null,
      model: null,
      usage: null,
      costUsd: null,
      error: null,
    });
    await store.close(session.id, 'test over');
    turnId = turn.id;
    await inbox.finish(ids.done, { status: 'done', turnId: turn.id, error: null });
  }
  if (ids.failed) {
    await accept(ids.failed);
    await claim(ids.failed);
    await inbox.finish(ids.failed, { status: 'failed', turnId: null, error: 'engine exited with code 1' });
  }
  if (ids.queued) await accept(ids.queued);
  if (ids.ignored) await accept(ids.ignored, 'ignore');
  db.close();
}

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'the-loop-prune-'));
  dataDir = join(root, 'data');
  mkdirSync(join(root, 'engine-state'));
  writeConfig();
  await seed(40, { done: 'old-done', failed: 'old-failed', queued: 'old-queued' });
  await seed(2, { ignored: 'new-ignored' });
});

afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

describe('the-loop events prune / show / list', () => {
  it('--dry-run counts the finished old bodies and changes nothing', async () => {
    const dry = await cli(['events', 'prune', '--dry-run', '--json']);
    expect(dry.code).toBe(0);
    const report = JSON.parse(dry.stdout);
    expect(report).toMatchObject({ retainDays: 30, dryRun: true, pruned: 2 });
    expect(report.bytes).toBeGreaterThan(20_000);
    expect(report.cutoff).toMatch(ISO);
    const human = await cli(['events', 'prune', '--dry-run']);
    expect(human.stdout).toMatch(
      /^Would drop the bodies of 2 finished deliveries \(\d+ KiB\) received and last changed before .* \(30 days\)\. Nothing changed/,
    );
    expect((await showJson('old-done')).delivery.prunedAt).toBeNull();
  });

  it('prunes the finished old ones only', async () => {
    const res = await cli(['events', 'prune']);
    expect(res.code).toBe(0);
    expect(res.stdout).toMatch(/^Dropped the bodies of 2 finished deliveries \(\d+ KiB\)/);
    expect(res.stdout).toMatch(/rows are kept/);
    expect(res.stdout).toMatch(/the database file keeps its size/);
    for (const id of ['old-queued', 'new-ignored']) {
      const kept = await showJson(id, '--body');
      expect(kept.delivery.prunedAt).toBeNull();
      expect(kept.body).toMatchObject({ comment: { body: `@the-loop please (${id})` } });
    }
    const again = await cli(['events', 'prune', '--json']);
    expect(JSON.parse(again.stdout)).toMatchObject({ pruned: 0, bytes: 0, dryRun: false });
  });

  it('events show: a pruned delivery keeps its metadata and outcome, and says it was pruned', async () => {
    const res = await cli(['events', 'show', 'old-done', '--body']);
    expect(res.code).toBe(0);
    expect(res.stdout).toContain('Delivery old-done');
    expect(res.stdout).toMatch(/event\s+issue_comment\.created \(github\)/);
    expect(res.stdout).toMatch(/received\s+\d{4}-/);
    expect(res.stdout).toMatch(/status\s+done\n/);
    expect(res.stdout).toMatch(`route      deliver → ${WI}`);
    expect(res.stdout).toMatch(new RegExp(`turn\\s+${turnId}: session \\w+ turn 1, succeeded \\(result\\)`));
    expect(res.stdout).toMatch(
      /body\s+pruned at \d{4}-\S+ \(inbox\.retainDays\); its metadata and outcome are kept/,
    );
    // No payload printed: it is gone.
    expect(res.stdout).not.toContain('@the-loop please');

    const failed = await cli(['events', 'show', 'old-failed']);
    expect(failed.stdout).toMatch(/status\s+failed/);
    expect(failed.stdout).toMatch(/error\s+engine exited with code 1/);
    expect(failed.stdout).toMatch(/body\s+pruned at/);
    // Not offered a retry it cannot have.
    expect(failed.stdout).not.toMatch(/retry with/);

    const json = await showJson('old-done', '--body');
    expect(json.delivery).toMatchObject({
      id: 'old-done',
      event: 'issue_comment',
      action: 'created',
      status: 'done',
      route: 'deliver',
      workItem: WI,
      turnId,
    });
    expect(json.delivery.prunedAt).toMatch(ISO);
    expect(json.turns.map((t) => t.id)).toEqual([turnId]);
    expect(json.body).toBeNull();
  });

  it('events list keeps listing pruned rows, with prunedAt', async () => {
    const res = await cli(['events', 'list', '--json']);
    const rows = JSON.parse(res.stdout) as { id: string; status: string; prunedAt: string | null }[];
    expect(rows.map((r) => [r.id, r.status, r.prunedAt !== null])).toEqual([
      ['new-ignored', 'ignored', false],
      ['old-queued', 'queued', false],
      ['old-failed', 'failed', true],
      ['old-done', 'done', true],
    ]);
    const human = await cli(['events', 'list']);
    expect(human.stdout).toMatch(/old-done\s+issue_comment\.created\s+done/);
    // The session's turn number, not the global turn id.
    expect(turnId).not.toBe(1);
    expect(human.stdout).toMatch(/old-done .* turn 1\s*$/m);
  });

  it('events retry of a pruned failed delivery says why it cannot', async () => {
    const res = await cli(['events', 'retry', 'old-failed']);
    expect(res.code).toBe(1);
    expect(res.stderr).toMatch(
      /old-failed cannot be retried: its body was pruned at .* \(inbox\.retainDays\)/,
    );
    expect((await showJson('old-failed')).delivery.status).toBe('failed');
  });

  it('--retain-days overrides the config; bad values are usage errors; 0 in the config keeps bodies', async () => {
    const one = await cli(['events', 'prune', '--retain-days', '1', '--json']);
    expect(JSON.parse(one.stdout)).toMatchObject({ retainDays: 1, pruned: 1 });
    expect((await showJson('new-ignored')).delivery.prunedAt).toMatch(ISO);
    for (const bad of ['0', '-3', '1.5', 'soon', '4000']) {
      const res = await cli(['events', 'prune', '--retain-days', bad]);
      expect(res.code).toBe(2);
      expect(res.stderr).toMatch(/--retain-days takes a whole number from 1 to 3650/);
    }
    writeConfig({ inbox: { retainDays: 0 } });
    try {
      const forever = await cli(['events', 'prune']);
      expect(forever.code).toBe(0);
      expect(forever.stdout).toMatch(/inbox\.retainDays is 0: delivery bodies are kept forever/);
      writeConfig({ inbox: { retainDays: -1 } });
      const invalid = await cli(['events', 'prune']);
      expect(invalid.code).toBe(2);
      expect(invalid.stderr).toMatch(/inbox\.retainDays: 0 \(keep bodies forever\) or more days/);
    } finally {
      writeConfig();
    }
  });

  it('the daemon prunes when it starts, and logs it', async () => {
    await seed(45, { ignored: 'daemon-old' });
    expect((await showJson('daemon-old')).delivery.prunedAt).toBeNull();
    const daemon = await startDaemonProcess({
      cwd: root,
      env: { THE_LOOP_CONFIG: join(root, 'config.yaml') },
    });
    try {
      let prunedAt: unknown = null;
      for (let i = 0; i < 200 && prunedAt === null; i++) {
        prunedAt = (await showJson('daemon-old')).delivery.prunedAt;
        if (prunedAt === null) await new Promise((r) => setTimeout(r, 100));
      }
      expect(prunedAt).toMatch(ISO);
      expect((await showJson('old-queued')).delivery.prunedAt).toBeNull();
    } finally {
      expect(await daemon.stop()).toBe(0);
    }
    const log = readFileSync(join(dataDir, 'the-loop.log'), 'utf8');
    const line = log.split('\n').find((l) => l.includes('inbox retention: dropped the bodies'));
    expect(JSON.parse(line ?? '{}')).toMatchObject({ deliveries: 1, retainDays: 30 });
  });
});
