/**
 * One identity per work item, end to end: real signed deliveries to the real daemon (a child
 * process), repositories whose names read alike (`octo/a-b`, `octo/a_b`) and one named in other
 * letter case (`Octo/A-B`), each in its own worktree. Then a slug held by another work item (a row
 * forced into the registry) is refused with a clear error, and nothing is created for it.
 */
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { parseWorkItem, workItemSlug } from '../../src/core/work-item.js';
import { fakeEngineConfig, runCli } from '../helpers/cli.js';
import { type DaemonProcess, fixture, sendDelivery, startDaemonProcess } from '../helpers/daemon.js';

const SECRET = 'test-webhook-secret-identity-0123456789';
const A = 'github:octo/a-b#1';
const B = 'github:octo/a_b#1';
const slugOf = (text: string) => workItemSlug(parseWorkItem(text));
const gitEnv = {
  GIT_AUTHOR_NAME: 't',
  GIT_AUTHOR_EMAIL: 't@e.x',
  GIT_COMMITTER_NAME: 't',
  GIT_COMMITTER_EMAIL: 't@e.x',
};

/** A fixture payload moved to another repository and issue. */
function payload(name: string, fullName: string, number: number): Record<string, unknown> {
  const p = fixture(name) as Record<string, Record<string, unknown>>;
  const [owner = '', repo = ''] = fullName.split('/');
  p.repository = { ...p.repository, full_name: fullName, name: repo, owner: { login: owner, type: 'User' } };
  p.issue = { ...p.issue, number };
  return p;
}

function gitRepo(dir: string, readme: string): void {
  mkdirSync(dir);
  execFileSync('git', ['init', '-q', '-b', 'main'], { cwd: dir });
  writeFileSync(join(dir, 'README.md'), readme);
  execFileSync('git', ['add', '.'], { cwd: dir });
  execFileSync('git', ['commit', '-qm', 'init'], { cwd: dir, env: { ...process.env, ...gitEnv } });
}

describe('one identity per work item (real daemon, signed deliveries, worktrees)', () => {
  let root: string;
  let dataDir: string;
  let daemon: DaemonProcess;
  const env = () => ({ THE_LOOP_CONFIG: join(root, 'config.yaml') });

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'the-loop-identity-'));
    const state = join(root, 'engine-state');
    mkdirSync(state);
    gitRepo(join(root, 'a-b'), 'repository a-b\n');
    gitRepo(join(root, 'a_b'), 'repository a_b\n');
    dataDir = join(root, 'data');
    writeFileSync(
      join(root, 'config.yaml'),
      stringify({
        ...fakeEngineConfig(state),
        dataDir: 'data',
        webhook: { secret: SECRET },
        routing: { triggers: { labels: ['the-loop'] } },
        repos: {
          'octo/a-b': { path: join(root, 'a-b'), workspace: 'worktree' },
          'octo/a_b': { path: join(root, 'a_b'), workspace: 'worktree' },
        },
      }),
    );
    daemon = await startDaemonProcess({ cwd: root, env: { ...env(), ...gitEnv } });
  }, 60_000);
  afterAll(async () => {
    await daemon?.stop();
    rmSync(root, { recursive: true, force: true });
  });

  /** Send one delivery and wait until the daemon has settled it; its stored record (via the CLI). */
  async function deliver(event: string, body: Record<string, unknown>) {
    const sent = await sendDelivery(daemon.webhookUrl, SECRET, event, body);
    expect(sent.status).toBe(202);
    for (let i = 0; i < 600; i++) {
      const shown = await runCli(['events', 'show', sent.id, '--json'], { cwd: root, env: env() });
      expect(shown.stderr).toBe('');
      const { delivery } = JSON.parse(shown.stdout) as {
        delivery: { status: string; workItem: string | null; error: string | null };
      };
      if (delivery.status === 'done' || delivery.status === 'failed') return { id: sent.id, ...delivery };
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`delivery ${sent.id} did not settle:\n${daemon.output()}`);
  }

  const registry = () => new Database(join(dataDir, 'the-loop.db'), { readonly: true, fileMustExist: true });

  it('octo/a-b#1, octo/a_b#1 and Octo/A-B#1: two sessions, two worktrees, two state directories', async () => {
    const first = await deliver('issues', payload('issues.labeled', 'octo/a-b', 1));
    const second = await deliver('issues', payload('issues.labeled', 'octo/a_b', 1));
    const third = await deliver('issue_comment', payload('issue_comment.created', 'Octo/A-B', 1));
    expect([first, second, third].map((d) => [d.status, d.workItem])).toEqual([
      ['done', A],
      ['done', B],
      ['done', A],
    ]);

    const db = registry();
    const sessions = db
      .prepare('SELECT id, work_item, slug, cwd FROM sessions ORDER BY created_at')
      .all() as {
      id: string;
      work_item: string;
      slug: string;
      cwd: string;
    }[];
    const turns = db.prepare('SELECT session_id, seq, delivery_id FROM turns ORDER BY id').all() as {
      session_id: string;
      seq: number;
      delivery_id: string;
    }[];
    db.close();
    const [sa, sb] = sessions;
    expect(sessions.map((s) => [s.work_item, s.slug])).toEqual([
      [A, slugOf(A)],
      [B, slugOf(B)],
    ]);
    // The delivery in other letter case is a turn of the first work item's session.
    expect(turns.map((t) => [t.session_id, t.seq, t.delivery_id])).toEqual([
      [sa?.id, 1, first.id],
      [sb?.id, 1, second.id],
      [sa?.id, 2, third.id],
    ]);

    // Each session in its own worktree, of its own repository, on its own branch.
    expect(readdirSync(join(dataDir, 'worktrees')).sort()).toEqual([slugOf(A), slugOf(B)].sort());
    expect(sa?.cwd).toBe(join(dataDir, 'worktrees', slugOf(A)));
    expect(sb?.cwd).toBe(join(dataDir, 'worktrees', slugOf(B)));
    expect(readFileSync(join(sa?.cwd ?? '', 'README.md'), 'utf8')).toBe('repository a-b\n');
    expect(readFileSync(join(sb?.cwd ?? '', 'README.md'), 'utf8')).toBe('repository a_b\n');
    const branch = (cwd: string) =>
      execFileSync('git', ['rev-parse', '--abbrev-ref', 'HEAD'], { cwd, encoding: 'utf8' }).trim();
    expect([branch(sa?.cwd ?? ''), branch(sb?.cwd ?? '')]).toEqual([
      `loop/${slugOf(A)}`,
      `loop/${slugOf(B)}`,
    ]);
    // …and its own state directory (git and gh config, policy, hook files).
    expect(readdirSync(join(dataDir, 'sessions')).sort()).toEqual([slugOf(A), slugOf(B)].sort());

    // What a person sees: the two sessions, whatever case they are named in.
    const listed = await runCli(['sessions', 'list', '--json'], { cwd: root, env: env() });
    expect((JSON.parse(listed.stdout) as { workItem: string }[]).map((s) => s.workItem).sort()).toEqual([
      A,
      B,
    ]);
    const shown = await runCli(['sessions', 'show', 'github:OCTO/A-B#1', '--json'], {
      cwd: root,
      env: env(),
    });
    expect(shown.code).toBe(0);
    expect(JSON.parse(shown.stdout)).toMatchObject({ session: { id: sa?.id, slug: slugOf(A) } });
  }, 120_000);

  it('a slug another work item holds is refused with a clear error, and nothing is created for it', async () => {
    const item = 'github:octo/a-b#2';
    const slug = slugOf(item);
    // Forced: a session of another work item holding the slug octo/a-b#2 would take.
    const db = new Database(join(dataDir, 'the-loop.db'));
    db.pragma('busy_timeout = 5000');
    db.prepare(
      `INSERT INTO sessions (id, work_item, slug, engine, runner, cwd, status, created_at, updated_at)
       VALUES ('squatter', 'github:octo/other#9', ?, 'fake', 'process', '/nowhere', 'closed', ?, ?)`,
    ).run(slug, new Date().toISOString(), new Date().toISOString());
    db.close();

    const refused = await deliver('issues', payload('issues.labeled', 'octo/a-b', 2));
    expect(refused.status).toBe('failed');
    expect(refused.error).toContain(
      `the slug ${slug} of ${item} already belongs to github:octo/other#9: refusing to share its worktree, tmux session and state directory`,
    );
    const check = registry();
    expect(check.prepare('SELECT COUNT(*) AS n FROM sessions WHERE work_item = ?').get(item)).toEqual({
      n: 0,
    });
    check.close();
    expect(existsSync(join(dataDir, 'worktrees', slug))).toBe(false);
    expect(existsSync(join(dataDir, 'sessions', slug))).toBe(false);
    // The CLI refuses it the same way, before queueing anything.
    const run = await runCli(['run', 'github:Octo/A-B#2', 'hello'], { cwd: root, env: env() });
    expect(run.code).not.toBe(0);
    expect(run.stderr).toContain(`already belongs to github:octo/other#9`);
  }, 120_000);
});
