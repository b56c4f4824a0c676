import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { parseWorkItem, workItemSlug } from '../../src/core/work-item.js';
import { prepareClaudeHome } from '../fixtures/engine-homes/claude.js';
import { startAnthropicMock } from '../fixtures/mock-apis/anthropic.js';
import type { MockApi } from '../fixtures/mock-apis/types.js';
import { fakeEngineConfig, runCli } from '../helpers/cli.js';
import { type DaemonProcess, fixture, sendDelivery, startDaemonProcess } from '../helpers/daemon.js';
import { ARGV_RECORDER, realBinary } from './helpers.js';

const SECRET = 'test-webhook-secret-0123456789abcdef';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Row {
  id: string;
  status: string;
  route: string | null;
  work_item: string | null;
  reason: string | null;
  turn_id: number | null;
}

function openInbox(dataDir: string) {
  const db = new Database(join(dataDir, 'the-loop.db'), { readonly: true, fileMustExist: true });
  return {
    get: (id: string) =>
      db
        .prepare('SELECT id, status, route, work_item, reason, turn_id FROM deliveries WHERE id = ?')
        .get(id) as Row | undefined,
    count: () => (db.prepare('SELECT COUNT(*) n FROM deliveries').get() as { n: number }).n,
    turns: (workItem: string) =>
      db
        .prepare(
          `SELECT t.seq, t.status, t.end_reason, t.delivery_id, t.input_tokens FROM turns t JOIN sessions s ON s.id = t.session_id
           WHERE s.work_item = ? ORDER BY t.id`,
        )
        .all(workItem) as {
        seq: number;
        status: string;
        end_reason: string;
        delivery_id: string;
        input_tokens: number;
      }[],
    session: (workItem: string) =>
      db
        .prepare(
          'SELECT status, close_reason FROM sessions WHERE work_item = ? ORDER BY created_at DESC LIMIT 1',
        )
        .get(workItem) as { status: string; close_reason: string | null } | undefined,
    close: () => db.close(),
  };
}

/** Wait until a delivery reaches one of the final states. */
async function settled(dataDir: string, id: string, timeoutMs = 60_000): Promise<Row> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const inbox = openInbox(dataDir);
    const row = inbox.get(id);
    inbox.close();
    if (row && ['done', 'failed', 'rejected', 'ignored'].includes(row.status)) return row;
    if (Date.now() > deadline) throw new Error(`delivery ${id} not settled: ${JSON.stringify(row)}`);
    await sleep(50);
  }
}

/** Wait (polling, bounded) until `probe` returns a value. */
async function until<T>(what: string, probe: () => T | undefined, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/** The daemon's log lines (JSON, written synchronously). */
const logLines = (dataDir: string): Array<Record<string, unknown>> =>
  readFileSync(join(dataDir, 'the-loop.log'), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Record<string, unknown>);

describe('webhooks end to end (real HTTP, signed fixtures, fake engine)', () => {
  let root: string;
  let dataDir: string;
  let daemon: DaemonProcess;
  const WI = 'github:acme/widgets#15';

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'the-loop-webhook-'));
    const state = join(root, 'engine-state');
    const repo = join(root, 'widgets');
    mkdirSync(state);
    mkdirSync(repo);
    dataDir = join(root, 'data');
    const config = {
      ...fakeEngineConfig(state),
      dataDir: 'data',
      webhook: { secret: SECRET },
      routing: { triggers: { labels: ['the-loop'] } },
      repos: { 'acme/widgets': { path: repo } },
    };
    writeFileSync(join(root, 'config.yaml'), stringify(config));
    daemon = await startDaemonProcess({ cwd: root, env: { THE_LOOP_CONFIG: join(root, 'config.yaml') } });
  }, 60_000);
  afterAll(async () => {
    await daemon?.stop();
    rmSync(root, { recursive: true, force: true });
  });

  it('answers /healthz', async () => {
    const res = await fetch(daemon.webhookUrl.replace('/gh-webhook', '/healthz'));
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ ok: true });
  });

  it('answers ping with pong and stores nothing', async () => {
    const res = await sendDelivery(daemon.webhookUrl, SECRET, 'ping', fixture('ping'));
    expect(res).toMatchObject({ status: 200, text: 'pong' });
  });

  it('ignores an issue opened without a trigger, with the reason stored', async () => {
    const res = await sendDelivery(daemon.webhookUrl, SECRET, 'issues', fixture('issues.opened'));
    expect(res).toMatchObject({ status: 202, text: 'accepted' });
    const row = await settled(dataDir, res.id);
    expect(row).toMatchObject({ status: 'ignored', route: 'ignore', work_item: WI });
    expect(row.reason).toMatch(/no trigger/);
  });

  it('starts a session on a trigger label and continues it on a mention, in order, once per delivery', async () => {
    const labeled = await sendDelivery(daemon.webhookUrl, SECRET, 'issues', fixture('issues.labeled'));
    const comment = await sendDelivery(
      daemon.webhookUrl,
      SECRET,
      'issue_comment',
      fixture('issue_comment.created'),
    );
    expect([labeled.status, comment.status]).toEqual([202, 202]);
    const again = await sendDelivery(
      daemon.webhookUrl,
      SECRET,
      'issue_comment',
      fixture('issue_comment.created'),
      { id: comment.id },
    );
    expect(again).toMatchObject({ status: 200, text: 'duplicate' });
    expect(await settled(dataDir, labeled.id)).toMatchObject({ status: 'done', route: 'start' });
    expect(await settled(dataDir, comment.id)).toMatchObject({ status: 'done', route: 'deliver' });
    const inbox = openInbox(dataDir);
    const turns = inbox.turns(WI);
    inbox.close();
    expect(turns.map((t) => [t.seq, t.status, t.end_reason, t.delivery_id])).toEqual([
      [1, 'succeeded', 'result', labeled.id],
      [2, 'succeeded', 'result', comment.id],
    ]);
    // The engine saw the rendered prompts, and the second turn resumed the first (fake engine memory).
    const logs = await runCli(['sessions', 'logs', WI], {
      cwd: root,
      env: { THE_LOOP_CONFIG: join(root, 'config.yaml') },
    });
    expect(logs.stdout).toMatch(/turn 2; I remember: GitHub issue github:acme\/widgets#15/);
  });

  it('stores an unauthorized author’s mention as rejected and runs nothing', async () => {
    const payload = fixture('issue_comment.created') as {
      comment: { author_association: string; user: { login: string } };
    };
    payload.comment.author_association = 'NONE';
    payload.comment.user.login = 'drive-by';
    const res = await sendDelivery(daemon.webhookUrl, SECRET, 'issue_comment', payload);
    expect(res.status).toBe(202);
    const row = await settled(dataDir, res.id);
    expect(row).toMatchObject({ status: 'rejected', route: 'reject', turn_id: null });
    expect(row.reason).toMatch(/drive-by \(NONE\) is not allowed to trigger work/);
    const inbox = openInbox(dataDir);
    expect(inbox.turns(WI)).toHaveLength(2);
    inbox.close();
  });

  it('refuses a bad signature without storing it', async () => {
    const inbox = openInbox(dataDir);
    const before = inbox.count();
    inbox.close();
    const res = await sendDelivery(
      daemon.webhookUrl,
      SECRET,
      'issue_comment',
      fixture('issue_comment.created'),
      { badSignature: true },
    );
    expect(res.status).toBe(401);
    const after = openInbox(dataDir);
    expect(after.get(res.id)).toBeUndefined();
    expect(after.count()).toBe(before);
    after.close();
  });

  it('closes the session when the issue closes, and lists the inbox', async () => {
    const res = await sendDelivery(daemon.webhookUrl, SECRET, 'issues', fixture('issues.closed'));
    expect(await settled(dataDir, res.id)).toMatchObject({ status: 'done', route: 'close' });
    const inbox = openInbox(dataDir);
    expect(inbox.session(WI)).toEqual({ status: 'closed', close_reason: 'work item closed on GitHub' });
    inbox.close();
    const list = await runCli(['events', 'list', '--json'], {
      cwd: root,
      env: { THE_LOOP_CONFIG: join(root, 'config.yaml') },
    });
    const rows = JSON.parse(list.stdout) as { status: string }[];
    expect(rows.map((r) => r.status).sort()).toEqual(['done', 'done', 'done', 'ignored', 'rejected']);
  });

  it('queues `the-loop run` behind webhook turns through the running daemon', async () => {
    const run = await runCli(['run', 'github:acme/widgets#16', '--cwd', root, 'by hand'], {
      cwd: root,
      env: { THE_LOOP_CONFIG: join(root, 'config.yaml') },
    });
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/the daemon \(pid \d+\) dispatches it — following/);
    expect(run.stdout).toMatch(/✔ turn 1 succeeded/);
  });

  it('stops cleanly on SIGTERM and releases the data dir', async () => {
    expect(await daemon.stop()).toBe(0);
    expect(daemon.output()).toMatch(/Stopped\./);
    const { existsSync } = await import('node:fs');
    expect(existsSync(join(dataDir, 'dispatch.lock'))).toBe(false);
  });
});

describe('webhooks drive the real Claude Code CLI', () => {
  let root: string;
  let mock: MockApi;
  let daemon: DaemonProcess;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'the-loop-webhook-claude-'));
    const repo = join(root, 'widgets');
    mkdirSync(repo);
    mock = await startAnthropicMock({
      script: [
        { kind: 'text', text: 'Looking at issue 15 now.', usage: { input: 500, output: 20 } },
        { kind: 'text', text: 'Fixed the empty state.', usage: { input: 800, output: 30, cacheRead: 400 } },
      ],
    });
    const home = prepareClaudeHome(join(root, 'engine'), mock.url);
    writeFileSync(
      join(root, 'config.yaml'),
      stringify({
        dataDir: 'data',
        webhook: { secret: SECRET },
        defaults: { engine: 'claude', backstopSeconds: 120, killGraceSeconds: 2 },
        routing: { triggers: { labels: ['the-loop'] } },
        repos: { 'acme/widgets': { path: repo } },
        engines: {
          claude: { binary: ARGV_RECORDER, env: { ...home.env, REAL_BINARY: realBinary('claude') } },
        },
      }),
    );
    daemon = await startDaemonProcess({
      cwd: root,
      env: { THE_LOOP_CONFIG: join(root, 'config.yaml'), [home.credentialEnv]: 'sk-ant-webhook-test-key' },
    });
  }, 60_000);
  afterAll(async () => {
    await daemon?.stop();
    await mock?.close();
    rmSync(root, { recursive: true, force: true });
  });

  it('runs a labeled issue and a comment as two turns of one resumed session', async () => {
    const first = await sendDelivery(daemon.webhookUrl, SECRET, 'issues', fixture('issues.labeled'));
    const second = await sendDelivery(
      daemon.webhookUrl,
      SECRET,
      'issue_comment',
      fixture('issue_comment.created'),
    );
    const dataDir = join(root, 'data');
    expect(await settled(dataDir, first.id, 120_000)).toMatchObject({ status: 'done' });
    expect(await settled(dataDir, second.id, 120_000)).toMatchObject({ status: 'done' });
    const turns = mock.modelTurns();
    expect(turns).toHaveLength(2);
    const secondBody = JSON.stringify(turns[1]?.body);
    expect(secondBody).toContain('Looking at issue 15 now.');
    expect(secondBody).toContain('@the-loop please fix this');
    // Untrusted text arrives marked as data.
    expect(secondBody).toContain('untrusted data from GitHub');
    const inbox = openInbox(dataDir);
    expect(inbox.turns('github:acme/widgets#15').map((t) => [t.seq, t.status, t.input_tokens])).toEqual([
      [1, 'succeeded', 500],
      [2, 'succeeded', 800],
    ]);
    inbox.close();
  });
});

describe('every routed fixture over HTTP, per-item worktrees, and the close grace period', () => {
  let root: string;
  let dataDir: string;
  let daemon: DaemonProcess;
  const gitEnv = {
    GIT_AUTHOR_NAME: 't',
    GIT_AUTHOR_EMAIL: 't@e.x',
    GIT_COMMITTER_NAME: 't',
    GIT_COMMITTER_EMAIL: 't@e.x',
  };

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'the-loop-webhook-all-'));
    const state = join(root, 'engine-state');
    const repo = join(root, 'widgets');
    mkdirSync(state);
    mkdirSync(repo);
    const { execFileSync } = await import('node:child_process');
    execFileSync('git', ['init', '-q', '-b', 'main'], { cwd: repo });
    writeFileSync(join(repo, 'README.md'), 'widgets\n');
    execFileSync('git', ['add', '.'], { cwd: repo });
    execFileSync('git', ['commit', '-qm', 'init'], { cwd: repo, env: { ...process.env, ...gitEnv } });
    dataDir = join(root, 'data');
    writeFileSync(
      join(root, 'config.yaml'),
      stringify({
        ...fakeEngineConfig(state),
        dataDir: 'data',
        webhook: { secret: SECRET },
        routing: { triggers: { labels: ['the-loop'], assignees: ['the-loop-bot'] } },
        repos: { 'acme/widgets': { path: repo, workspace: 'worktree' } },
        dispatch: { concurrency: 2, closeGraceSeconds: 1 },
      }),
    );
    daemon = await startDaemonProcess({
      cwd: root,
      env: { THE_LOOP_CONFIG: join(root, 'config.yaml'), ...gitEnv },
    });
  }, 60_000);
  afterAll(async () => {
    await daemon?.stop();
    rmSync(root, { recursive: true, force: true });
  });

  it('routes each fixture as expected and stores the outcome', async () => {
    const cases: Array<[string, string, string, string | null, string]> = [
      ['issues', 'issues.opened', 'ignore', 'github:acme/widgets#15', 'ignored'],
      ['issues', 'issues.labeled', 'start', 'github:acme/widgets#15', 'done'],
      ['issues', 'issues.assigned', 'start', 'github:acme/widgets#15', 'done'],
      ['issue_comment', 'issue_comment.created', 'deliver', 'github:acme/widgets#15', 'done'],
      ['pull_request', 'pull_request.opened', 'ignore', 'github:acme/widgets#16', 'ignored'],
      ['issue_comment', 'issue_comment.created.pr', 'deliver', 'github:acme/widgets#16', 'done'],
      [
        'pull_request_review_comment',
        'pull_request_review_comment.created',
        'deliver',
        'github:acme/widgets#16',
        'done',
      ],
      ['pull_request_review', 'pull_request_review.submitted', 'deliver', 'github:acme/widgets#16', 'done'],
    ];
    const sent = [];
    for (const [event, name] of cases)
      sent.push(await sendDelivery(daemon.webhookUrl, SECRET, event, fixture(name)));
    expect(sent.map((s) => s.status)).toEqual(cases.map(() => 202));
    for (const [i, [, name, route, workItem, status]] of cases.entries()) {
      const row = await settled(dataDir, sent[i]?.id ?? '');
      expect([name, row.route, row.work_item, row.status]).toEqual([name, route, workItem, status]);
    }
    const inbox = openInbox(dataDir);
    expect(inbox.turns('github:acme/widgets#15').map((t) => t.seq)).toEqual([1, 2, 3]);
    expect(inbox.turns('github:acme/widgets#16').map((t) => t.seq)).toEqual([1, 2, 3]);
    inbox.close();
    const wt = join(dataDir, 'worktrees', workItemSlug(parseWorkItem('github:acme/widgets#15')));
    const { existsSync } = await import('node:fs');
    expect(existsSync(join(wt, 'README.md'))).toBe(true);
    // Closing removes a clean worktree.
    for (const [event, name] of [
      ['issues', 'issues.closed'],
      ['pull_request', 'pull_request.closed'],
    ] as const) {
      const res = await sendDelivery(daemon.webhookUrl, SECRET, event, fixture(name));
      expect(await settled(dataDir, res.id)).toMatchObject({ route: 'close', status: 'done' });
    }
    expect(existsSync(wt)).toBe(false);
  });

  it('cancels a running turn when its work item closes, after the grace period', async () => {
    const hang = fixture('issue_comment.created') as { issue: { number: number }; comment: { body: string } };
    hang.issue.number = 17;
    hang.comment.body = '@the-loop mode:hang';
    const closed = fixture('issues.closed') as { issue: { number: number } };
    closed.issue.number = 17;
    const a = await sendDelivery(daemon.webhookUrl, SECRET, 'issue_comment', hang);
    // The close must find the turn running (a close that finds the delivery still queued ignores it).
    await until('the hanging turn to run', () => {
      const inbox = openInbox(dataDir);
      const running = inbox.turns('github:acme/widgets#17').some((t) => t.status === 'running');
      inbox.close();
      return running ? true : undefined;
    });
    const b = await sendDelivery(daemon.webhookUrl, SECRET, 'issues', closed);
    expect(await settled(dataDir, a.id, 30_000)).toMatchObject({ status: 'failed' });
    expect(await settled(dataDir, b.id, 30_000)).toMatchObject({ status: 'done', route: 'close' });
    // Ended by the close's grace timer (closeGraceSeconds 1), not by the backstop (60 s): once.
    expect(
      logLines(dataDir).filter(
        (l) => l.msg === 'work item closed; cancelling its running turn after the grace period',
      ),
    ).toEqual([expect.objectContaining({ workItem: 'github:acme/widgets#17' })]);
    const inbox = openInbox(dataDir);
    expect(inbox.turns('github:acme/widgets#17').map((t) => [t.status, t.end_reason])).toEqual([
      ['failed', 'cancel'],
    ]);
    expect(inbox.session('github:acme/widgets#17')?.status).toBe('closed');
    inbox.close();
  });

  it('retries a failed delivery by hand', async () => {
    const crash = fixture('issue_comment.created') as {
      issue: { number: number };
      comment: { body: string };
    };
    crash.issue.number = 18;
    crash.comment.body = '@the-loop mode:crash';
    const res = await sendDelivery(daemon.webhookUrl, SECRET, 'issue_comment', crash);
    expect(await settled(dataDir, res.id)).toMatchObject({ status: 'failed' });
    const env = { THE_LOOP_CONFIG: join(root, 'config.yaml') };
    const show = await runCli(['events', 'show', res.id], { cwd: root, env });
    expect(show.stdout).toMatch(/status\s+failed/);
    expect(show.stdout).toMatch(/the-loop events retry/);
    const retry = await runCli(['events', 'retry', res.id], { cwd: root, env });
    expect(retry.code).toBe(0);
    expect(await settled(dataDir, res.id)).toMatchObject({ status: 'failed' });
    const inbox = openInbox(dataDir);
    expect(inbox.turns('github:acme/widgets#18').map((t) => t.delivery_id)).toEqual([res.id, res.id]);
    inbox.close();
    const again = await runCli(['events', 'retry', 'no-such-id'], { cwd: root, env });
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/no delivery no-such-id/);
  });
});
