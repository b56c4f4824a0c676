/**
 * `the-loop sessions move`, end to end: two daemons (`the-loop serve`, the fake engine) on one
 * PostgreSQL database. A work item's session runs its first turn on host-a; `sessions move … --to
 * host-b` is asked while that turn runs (the fake engine holds it while a file exists); host-a
 * finishes the turn (it is not cut off), lets go, and the command returns naming the new epoch; the
 * next delivery's turn runs on host-b under that epoch. Bad input (an unknown host, a malformed
 * work item, a host that is down) is refused and changes nothing.
 *
 * Both hosts' fake engines keep their conversations in one directory (as hosts that share their
 * data directory would): the moved session's turn on host-b resumes the conversation.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { fakeEngineConfig, runCli } from '../helpers/cli.js';
import { type DaemonProcess, fixture, sendDelivery, startDaemonProcess } from '../helpers/daemon.js';
import { freshDatabase } from '../helpers/postgres.js';

const SECRET = 'move-webhook-secret-0123456789abcdef';
const WI = 'github:acme/widgets#15';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Host {
  id: string;
  dir: string;
  /** While this file exists, the host's engine turns wait before answering. */
  hold: string;
  daemon: DaemonProcess;
}

describe('sessions move between two daemons on one PostgreSQL', () => {
  let root: string;
  let database: Awaited<ReturnType<typeof freshDatabase>>;
  let client: pg.Client;
  const hosts: Host[] = [];
  const host = (id: string) => hosts.find((h) => h.id === id) as Host;
  const envOf = (h: Pick<Host, 'dir'>) => ({
    THE_LOOP_CONFIG: join(h.dir, 'config.yaml'),
    THE_LOOP_DATABASE_URL: database.url,
  });
  const cli = (args: string[], on = 'host-a', onStderr?: (soFar: string) => void) =>
    runCli(args, { cwd: host(on).dir, env: envOf(host(on)), ...(onStderr ? { onStderr } : {}) });

  async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 60_000): Promise<T> {
    const deadline = Date.now() + ms;
    for (;;) {
      const found = await probe();
      if (found !== undefined) return found;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await sleep(100);
    }
  }
  const turns = async () =>
    (
      await client.query(
        `SELECT t.seq, t.status, t.host_id, t.epoch, t.delivery_id, t.pid FROM turns t
           JOIN sessions s ON s.id = t.session_id WHERE s.work_item = $1 ORDER BY t.seq`,
        [WI],
      )
    ).rows.map((r) => ({ ...r, seq: Number(r.seq), epoch: Number(r.epoch) })) as Array<{
      seq: number;
      status: string;
      host_id: string;
      epoch: number;
      delivery_id: string;
      pid: number | null;
    }>;
  const lease = async () => {
    const row = (
      await client.query(
        'SELECT host_id, epoch, draining, moving_to, ended FROM leases WHERE work_item = $1',
        [WI],
      )
    ).rows[0] as
      | { host_id: string; epoch: string; draining: boolean; moving_to: string | null; ended: boolean }
      | undefined;
    return row && { ...row, epoch: Number(row.epoch) };
  };
  const settled = (id: string) =>
    until(`delivery ${id} to settle`, async () => {
      const row = (await client.query('SELECT status FROM deliveries WHERE id = $1', [id])).rows[0] as
        | { status: string }
        | undefined;
      return row && ['done', 'failed', 'rejected', 'ignored'].includes(row.status) ? row.status : undefined;
    });

  async function startHost(id: string): Promise<Host> {
    const dir = join(root, id);
    mkdirSync(dir, { recursive: true });
    const hold = join(dir, 'hold');
    const config = {
      ...fakeEngineConfig(join(root, 'engine-state'), {
        env: { FAKE_ENGINE_STATE: join(root, 'engine-state'), FAKE_ENGINE_HOLD_FILE: hold },
      }),
      dataDir: 'data',
      store: {
        kind: 'postgres',
        url: 'env:THE_LOOP_DATABASE_URL',
        host: id,
        leaseSeconds: 4,
        heartbeatSeconds: 0.5,
      },
      webhook: { secret: SECRET },
      routing: { triggers: { labels: ['the-loop'] } },
      // One repository path in both configs (the same config everywhere, as in a real fleet).
      repos: { 'acme/widgets': { path: join(root, 'widgets') } },
      dispatch: { concurrency: 2, pollSeconds: 0.5 },
    };
    writeFileSync(join(dir, 'config.yaml'), stringify(config));
    const daemon = await startDaemonProcess({ cwd: dir, env: envOf({ dir }), timeoutMs: 60_000 });
    return { id, dir, hold, daemon };
  }

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'the-loop-move-'));
    mkdirSync(join(root, 'widgets'));
    mkdirSync(join(root, 'engine-state'));
    database = await freshDatabase();
    client = new pg.Client({ connectionString: database.url });
    await client.connect();
    // Started one after the other: each start migrates (under a lock) and registers.
    hosts.push(await startHost('host-a'));
    hosts.push(await startHost('host-b'));
  }, 120_000);

  afterAll(async () => {
    for (const h of hosts) rmSync(h.hold, { force: true });
    await Promise.all(hosts.map((h) => h.daemon.stop()));
    await client?.end();
    await database?.drop();
    rmSync(root, { recursive: true, force: true });
  });

  it('moves a session while its turn runs: the turn ends on host-a, the next runs on host-b', async () => {
    // Placement: both hosts idle, host-a first by id.
    writeFileSync(host('host-a').hold, '');
    const labeled = await sendDelivery(
      host('host-b').daemon.webhookUrl,
      SECRET,
      'issues',
      fixture('issues.labeled'),
    );
    expect(labeled.status).toBe(202);
    const running = await until('turn 1 running', async () => {
      const t = (await turns())[0];
      return t?.status === 'running' ? t : undefined;
    });
    expect(running).toMatchObject({ seq: 1, host_id: 'host-a', epoch: 1 });

    let said = '';
    const moving = cli(['sessions', 'move', WI, '--to', 'host-b'], 'host-a', (soFar) => {
      said = soFar;
    });
    await until('the wait to name the running turn', async () =>
      said.includes('draining on host-a: turn 1 running…') ? true : undefined,
    );
    expect((await lease())?.draining).toBe(true);
    // A comment arriving meanwhile waits: host-a claims nothing new for a draining work item.
    const comment = await sendDelivery(
      host('host-a').daemon.webhookUrl,
      SECRET,
      'issue_comment',
      fixture('issue_comment.created'),
    );
    expect(comment.status).toBe(202);
    await sleep(1500);
    expect((await turns()).map((t) => [t.seq, t.status, t.host_id])).toEqual([[1, 'running', 'host-a']]);
    expect(await lease()).toMatchObject({ host_id: 'host-a', draining: true, moving_to: 'host-b' });

    // The turn ends where it ran (not cut off); then host-a lets go and host-b holds the lease.
    rmSync(host('host-a').hold);
    const moved = await moving;
    expect(moved.code, moved.stderr).toBe(0);
    expect(moved.stderr).toContain('draining on host-a: turn 1 running…');
    expect(moved.stdout).toContain(`${WI} moved from host-a to host-b (epoch 2).`);
    expect(await settled(labeled.id)).toBe('done');

    // The comment's turn runs on host-b, under the new epoch, resuming the conversation.
    expect(await settled(comment.id)).toBe('done');
    expect((await turns()).map((t) => [t.seq, t.status, t.host_id, t.epoch, t.delivery_id])).toEqual([
      [1, 'succeeded', 'host-a', 1, labeled.id],
      [2, 'succeeded', 'host-b', 2, comment.id],
    ]);
    expect(await lease()).toMatchObject({ host_id: 'host-b', epoch: 2, draining: false, moving_to: null });
    const logs = await cli(['sessions', 'logs', WI, '--turn', '2'], 'host-b');
    expect(logs.stdout).toMatch(/turn 2; I remember: GitHub issue github:acme\/widgets#15/);
  });

  it('refuses an unknown host, a malformed work item and a host that is down, changing nothing', async () => {
    const before = await lease();
    const unknown = await cli(['sessions', 'move', WI, '--to', 'host-z']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/no host named "host-z" shares this store/);
    expect(unknown.stderr).toMatch(/Hosts: host-a \(up\), host-b \(up\)/);
    const malformed = await cli(['sessions', 'move', 'acme/widgets#15', '--to', 'host-a']);
    expect(malformed.code).toBe(2);
    expect(malformed.stderr).toMatch(/not a work item: "acme\/widgets#15"/);
    // host-a stops (SIGTERM: it leaves, marked down).
    const a = host('host-a');
    await a.daemon.stop();
    const down = await cli(['sessions', 'move', WI, '--to', 'host-a'], 'host-b');
    expect(down.code).toBe(2);
    expect(down.stderr).toMatch(/host-a is down: a work item moves only to a host that is up/);
    expect(await lease()).toEqual(before);
  });

  it('a move whose host dies mid-turn: the reaper ends the lease, kept for the target, which runs the next turn once resumed', async () => {
    hosts.splice(hosts.indexOf(host('host-a')), 1, await startHost('host-a'));
    const b = host('host-b');
    writeFileSync(b.hold, '');
    const payload = fixture('issue_comment.created') as { comment: { id: number } };
    payload.comment.id += 1;
    const third = await sendDelivery(host('host-a').daemon.webhookUrl, SECRET, 'issue_comment', payload);
    expect(third.status).toBe(202);
    const running = await until('turn 3 running on host-b', async () => {
      const t = (await turns())[2];
      return t?.status === 'running' && t.pid ? { ...t, pid: t.pid } : undefined;
    });
    expect(running).toMatchObject({ seq: 3, host_id: 'host-b', epoch: 2 });

    let said = '';
    const moving = cli(['sessions', 'move', WI, '--to', 'host-a', '--timeout', '120'], 'host-a', (soFar) => {
      said = soFar;
    });
    await until('the wait to name the running turn', async () =>
      said.includes('draining on host-b: turn 3 running…') ? true : undefined,
    );
    // host-b dies mid-turn: its daemon first (it must not see its engine end and let go), then the
    // engine it left behind.
    const exited = new Promise((resolve) => b.daemon.child.once('exit', resolve));
    b.daemon.child.kill('SIGKILL');
    await exited;
    for (const target of [-running.pid, running.pid])
      try {
        process.kill(target, 'SIGKILL');
      } catch {
        // Already gone.
      }
    rmSync(b.hold);

    const moved = await moving;
    expect(moved.code, moved.stderr).toBe(0);
    expect(moved.stderr).toContain('draining on host-b: turn 3 running…');
    // Reaped, the lease is kept for host-a (or host-a took it already, when a poll came after).
    expect(moved.stdout).toMatch(
      /github:acme\/widgets#15 (is kept for host-a \(the lease of host-b has ended\): host-a takes it at its next delivery|moved from host-b to host-a) \(epoch 3\)\./,
    );
    expect(await settled(third.id)).toBe('failed');
    // Its turn interrupted, the session is held (store.onHostLoss: hold) until a person resumes it.
    const resumed = await cli(['sessions', 'resume', WI]);
    expect(resumed.code, resumed.stderr).toBe(0);
    payload.comment.id += 1;
    const fourth = await sendDelivery(host('host-a').daemon.webhookUrl, SECRET, 'issue_comment', payload);
    expect(await settled(fourth.id)).toBe('done');
    expect((await turns()).slice(2).map((t) => [t.seq, t.status, t.host_id, t.epoch])).toEqual([
      [3, 'failed', 'host-b', 2],
      [4, 'succeeded', 'host-a', 3],
    ]);
    expect(await lease()).toMatchObject({ host_id: 'host-a', epoch: 3, moving_to: null, ended: false });
  });
});
