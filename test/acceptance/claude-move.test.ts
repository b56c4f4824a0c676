/**
 * A process-runner session of the real Claude Code CLI moves to another host when its host dies
 * (issue 17), end to end: two daemons (`the-loop serve`, separate processes, separate data
 * directories and Claude config directories, the default sandbox and gateway) share the run's
 * PostgreSQL; the Anthropic API is the local mock.
 *
 * Host a runs the first turn (its transcript saved to the store), then dies (SIGKILL, its engine
 * too) in the middle of the second. Host b's reaper interrupts that turn (never run again) and
 * holds the session; a comment waits until a person resumes the session; then host b runs it,
 * restoring the transcript first, and the model's request carries the first turn's conversation.
 * The API key appears nowhere it could leak (the stored transcript, the logs, the output).
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { prepareClaudeHome } from '../fixtures/engine-homes/claude.js';
import { startAnthropicMock } from '../fixtures/mock-apis/anthropic.js';
import type { MockApi } from '../fixtures/mock-apis/types.js';
import { runCli } from '../helpers/cli.js';
import { type DaemonProcess, fixture, sendDelivery, startDaemonProcess } from '../helpers/daemon.js';
import { freshDatabase } from '../helpers/postgres.js';
import { realBinary } from './helpers.js';

const SECRET = 'test-webhook-secret-0123456789abcdef';
const API_KEY = `sk-ant-move-canary-${process.pid}-Zq81Lx`;
const WI = 'github:acme/widgets#15';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface TurnRow {
  seq: number;
  status: string;
  end_reason: string | null;
  host_id: string | null;
  epoch: number | null;
  pid: number | null;
  delivery_id: string | null;
}

/** Every file under `dir` whose name is `name` (the restored transcript, wherever the home is). */
function findFiles(dir: string, name: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...findFiles(path, name));
    else if (entry.name === name) out.push(path);
  }
  return out;
}

describe('a Claude Code session moves to another host after its host dies', () => {
  let root: string;
  let mock: MockApi;
  let database: Awaited<ReturnType<typeof freshDatabase>>;
  let client: pg.Client;
  const daemons: Partial<Record<'a' | 'b', DaemonProcess>> = {};
  const env = (host: 'a' | 'b') => ({
    THE_LOOP_CONFIG: join(root, host, 'config.yaml'),
    THE_LOOP_DATABASE_URL: database.url,
    ANTHROPIC_API_KEY: API_KEY,
  });

  const turns = async () =>
    (
      await client.query<TurnRow>(
        `SELECT t.seq, t.status, t.end_reason, t.host_id, t.epoch, t.pid, t.delivery_id
           FROM turns t JOIN sessions s ON s.id = t.session_id WHERE s.work_item = $1 ORDER BY t.id`,
        [WI],
      )
    ).rows.map((r) => ({ ...r, seq: Number(r.seq), epoch: r.epoch === null ? null : Number(r.epoch) }));
  const deliveryStatus = async (id: string) =>
    (await client.query<{ status: string }>('SELECT status FROM deliveries WHERE id = $1', [id])).rows[0]
      ?.status;
  async function until<T>(
    what: string,
    probe: () => Promise<T | undefined>,
    timeoutMs = 120_000,
  ): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const value = await probe();
      if (value !== undefined) return value;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await sleep(100);
    }
  }
  const settled = (id: string) =>
    until(`delivery ${id} to settle`, async () => {
      const status = await deliveryStatus(id);
      return status && ['done', 'failed', 'rejected', 'ignored'].includes(status) ? status : undefined;
    });
  const comment = (id: number, body: string) => {
    const payload = fixture('issue_comment.created') as { comment: { id: number; body: string } };
    payload.comment.id += id;
    payload.comment.body = body;
    return payload;
  };

  function writeConfig(host: 'a' | 'b', repo: string) {
    const dir = join(root, host);
    mkdirSync(dir);
    const home = prepareClaudeHome(join(dir, 'engine'), mock.url);
    writeFileSync(
      join(dir, 'config.yaml'),
      stringify({
        dataDir: 'data',
        store: { kind: 'postgres', url: 'env:THE_LOOP_DATABASE_URL', host: `host-${host}`, leaseSeconds: 3 },
        webhook: { secret: SECRET },
        gateway: { port: 0 },
        console: { port: 0 },
        usage: { watchClaude: false },
        defaults: { engine: 'claude', backstopSeconds: 180, killGraceSeconds: 2 },
        dispatch: { pollSeconds: 0.5 },
        routing: { triggers: { labels: ['the-loop'] } },
        repos: { 'acme/widgets': { path: repo } },
        engines: { claude: { binary: realBinary('claude'), env: home.env } },
      }),
    );
  }

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'the-loop-claude-move-'));
    const repo = join(root, 'widgets');
    mkdirSync(repo);
    database = await freshDatabase();
    client = new pg.Client({ connectionString: database.url });
    await client.connect();
    mock = await startAnthropicMock({
      script: [
        { kind: 'text', text: 'Noted: PAPAYA-41.', usage: { input: 500, output: 10 } },
        // Host a dies while the model "thinks" about the second turn.
        { kind: 'text', text: 'Never sent.', delayMs: 600_000 },
        { kind: 'text', text: 'It was PAPAYA-41.', usage: { input: 900, output: 12 } },
      ],
    });
    writeConfig('a', repo);
    writeConfig('b', repo);
    daemons.a = await startDaemonProcess({ cwd: join(root, 'a'), env: env('a') });
  }, 120_000);

  afterAll(async () => {
    for (const t of (await turns().catch(() => [])) as TurnRow[]) {
      // The dead host's engine, had it outlived the test's kill: its own process group.
      if (t.pid && t.status === 'running') {
        try {
          process.kill(-t.pid, 'SIGKILL');
        } catch {}
      }
    }
    await daemons.b?.stop();
    await daemons.a?.stop();
    await mock?.close();
    await client?.end();
    await database?.drop();
    rmSync(root, { recursive: true, force: true });
  });

  it('runs the first turn on host a and saves its transcript to the store', async () => {
    const labeled = fixture('issues.labeled') as { issue: { body: string } };
    labeled.issue.body = 'Remember the word PAPAYA-41.';
    const first = await sendDelivery(daemons.a?.webhookUrl ?? '', SECRET, 'issues', labeled);
    expect(first.status).toBe(202);
    expect(await settled(first.id)).toBe('done');
    expect(await turns()).toMatchObject([{ seq: 1, status: 'succeeded', host_id: 'host-a' }]);
    const files = await client.query<{ name: string; host_id: string; body: Buffer }>(
      'SELECT name, host_id, body FROM session_files',
    );
    expect(files.rows).toHaveLength(1);
    expect(files.rows[0]?.name).toMatch(/^projects\/[A-Za-z0-9._-]+\/[0-9a-f-]{36}\.jsonl$/);
    expect(files.rows[0]?.host_id).toBe('host-a');
    expect(files.rows[0]?.body.toString()).toContain('Noted: PAPAYA-41.');
  }, 180_000);

  it('interrupts the turn host a was running when it died, and holds the session', async () => {
    daemons.b = await startDaemonProcess({ cwd: join(root, 'b'), env: env('b') });
    const second = await sendDelivery(
      daemons.b.webhookUrl,
      SECRET,
      'issue_comment',
      comment(1, '@the-loop now do step two'),
    );
    expect(second.status).toBe(202);
    // Host a holds the work item: its second turn runs there, and the model stalls.
    const running = await until('the second turn to run on host a', async () => {
      const t = (await turns())[1];
      return t?.status === 'running' && t.pid !== null && mock.modelTurns().length >= 2 ? t : undefined;
    });
    expect(running.host_id).toBe('host-a');
    // The host dies, its engine with it.
    daemons.a?.child.kill('SIGKILL');
    try {
      process.kill(-(running.pid as number), 'SIGKILL');
    } catch {}
    await until('the reaper to interrupt the turn', async () => {
      const t = (await turns())[1];
      return t?.status === 'failed' ? t : undefined;
    });
    expect((await turns())[1]).toMatchObject({ status: 'failed', end_reason: 'interrupted' });
    expect(await settled(second.id)).toBe('failed');
    const hold = (
      await client.query<{ hold: string }>('SELECT hold FROM sessions WHERE work_item = $1', [WI])
    ).rows[0]?.hold;
    expect(JSON.parse(hold ?? 'null')).toMatchObject({ kind: 'interrupted', hostId: 'host-a' });
  }, 180_000);

  it('runs the next delivery on host b only after a person resumes it, with the earlier conversation', async () => {
    const third = await sendDelivery(
      daemons.b?.webhookUrl ?? '',
      SECRET,
      'issue_comment',
      comment(2, '@the-loop What was the word?'),
    );
    expect(third.status).toBe(202);
    // Held: it waits (several of host b's polls), it does not run.
    await sleep(3000);
    expect(await deliveryStatus(third.id)).toBe('queued');
    expect(mock.modelTurns()).toHaveLength(2);

    const resumed = await runCli(['sessions', 'resume', WI], { cwd: join(root, 'b'), env: env('b') });
    expect(resumed.stderr).toBe('');
    expect(resumed.stdout).toMatch(/resumed .*after host host-a died during turn \d+.*not run again/);
    expect(await settled(third.id)).toBe('done');

    const all = await turns();
    expect(all.map((t) => [t.seq, t.status, t.host_id])).toEqual([
      [1, 'succeeded', 'host-a'],
      [2, 'failed', 'host-a'],
      [3, 'succeeded', 'host-b'],
    ]);
    expect(all[2]?.epoch).toBeGreaterThan(all[0]?.epoch ?? Number.POSITIVE_INFINITY);
    // The model saw the first turn: host b restored the transcript, and `--resume` found it.
    const requests = mock.modelTurns();
    expect(requests).toHaveLength(3);
    const body = JSON.stringify(requests[2]?.body);
    expect(body).toContain('Remember the word PAPAYA-41.');
    expect(body).toContain('Noted: PAPAYA-41.');
    expect(body).toContain('What was the word?');
    expect(requests[2]?.headers['x-claude-code-session-id']).toBe(
      requests[0]?.headers['x-claude-code-session-id'],
    );
    const engineId = String(requests[0]?.headers['x-claude-code-session-id']);
    expect(
      findFiles(join(root, 'b', 'data'), `${engineId}.jsonl`).length +
        findFiles(join(root, 'b', 'engine'), `${engineId}.jsonl`).length,
    ).toBeGreaterThan(0);
    const logB = readFileSync(join(root, 'b', 'data', 'the-loop.log'), 'utf8');
    expect(logB).toMatch(/restored the session's conversation saved by another host/);
  }, 240_000);

  it('never stores or prints the API key', async () => {
    const files = await client.query<{ body: Buffer }>('SELECT body FROM session_files');
    expect(files.rows.length).toBeGreaterThan(0);
    for (const f of files.rows) expect(f.body.toString()).not.toContain(API_KEY);
    for (const host of ['a', 'b'] as const) {
      expect(readFileSync(join(root, host, 'data', 'the-loop.log'), 'utf8')).not.toContain(API_KEY);
      expect(daemons[host]?.output()).not.toContain(API_KEY);
    }
  });
});
