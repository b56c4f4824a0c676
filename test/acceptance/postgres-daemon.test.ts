/**
 * The daemon on the PostgreSQL store, end to end (real HTTP, signed fixtures, the fake engine, the
 * run's private PostgreSQL): webhooks start and continue a session in order, once per delivery; the
 * database becoming unreachable mid-run answers webhooks 503 (nothing acknowledged that is not
 * stored) and a redelivery once it is back runs; unreachable at start is a clear error; the
 * database password appears nowhere (output, log).
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { fakeEngineConfig, freePort, runCli } from '../helpers/cli.js';
import { type DaemonProcess, fixture, sendDelivery, startDaemonProcess } from '../helpers/daemon.js';
import { freshDatabase, testCluster, testTrustCluster } from '../helpers/postgres.js';

const SECRET = 'test-webhook-secret-0123456789abcdef';

const WI = 'github:acme/widgets#15';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('the daemon on PostgreSQL', () => {
  let root: string;
  let daemon: DaemonProcess;
  let database: Awaited<ReturnType<typeof freshDatabase>>;
  let client: pg.Client;
  let admin: pg.Client;
  // The cluster's real password: it must appear nowhere (output, log).
  let PASSWORD: string;
  const env = () => ({
    THE_LOOP_CONFIG: join(root, 'config.yaml'),
    THE_LOOP_DATABASE_URL: database.url,
  });

  const delivery = async (id: string) =>
    (await client.query('SELECT status, route, turn_id FROM deliveries WHERE id = $1', [id])).rows[0] as
      | { status: string; route: string; turn_id: number | null }
      | undefined;
  async function settled(id: string, timeoutMs = 60_000) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const row = await delivery(id);
      if (row && ['done', 'failed', 'rejected', 'ignored'].includes(row.status)) return row;
      if (Date.now() > deadline) throw new Error(`delivery ${id} not settled: ${JSON.stringify(row)}`);
      await sleep(100);
    }
  }

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'the-loop-pg-daemon-'));
    const state = join(root, 'engine-state');
    const repo = join(root, 'widgets');
    mkdirSync(state);
    mkdirSync(repo);
    database = await freshDatabase();
    PASSWORD = decodeURIComponent(new URL(database.url).password);
    client = new pg.Client({ connectionString: database.url });
    // Its connection is cut with the daemon's below (and made anew): an error event, not a crash.
    client.on('error', () => {});
    await client.connect();
    admin = new pg.Client({ connectionString: `${testCluster()}postgres` });
    await admin.connect();
    const config = {
      ...fakeEngineConfig(state),
      dataDir: 'data',
      store: { kind: 'postgres', url: 'env:THE_LOOP_DATABASE_URL', host: 'host-a' },
      webhook: { secret: SECRET },
      routing: { triggers: { labels: ['the-loop'] } },
      repos: { 'acme/widgets': { path: repo } },
    };
    writeFileSync(join(root, 'config.yaml'), stringify(config));
    daemon = await startDaemonProcess({ cwd: root, env: env() });
  }, 60_000);

  afterAll(async () => {
    await daemon?.stop();
    await admin?.query(`ALTER DATABASE ${database.name} ALLOW_CONNECTIONS true`).catch(() => {});
    await client?.end();
    await admin?.end();
    await database?.drop();
    rmSync(root, { recursive: true, force: true });
  });

  it('starts a session on a trigger and continues it on a mention, in order, once per delivery', async () => {
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
      {
        id: comment.id,
      },
    );
    expect(again).toMatchObject({ status: 200, text: 'duplicate' });
    expect(await settled(labeled.id)).toMatchObject({ status: 'done', route: 'start' });
    expect(await settled(comment.id)).toMatchObject({ status: 'done', route: 'deliver' });
    const turns = await client.query(
      `SELECT t.seq, t.status, t.delivery_id FROM turns t JOIN sessions s ON s.id = t.session_id
        WHERE s.work_item = $1 ORDER BY t.id`,
      [WI],
    );
    expect(turns.rows.map((t) => [Number(t.seq), t.status, t.delivery_id])).toEqual([
      [1, 'succeeded', labeled.id],
      [2, 'succeeded', comment.id],
    ]);
    // The CLI reads the same store: the second turn resumed the first (the fake engine remembers).
    const logs = await runCli(['sessions', 'logs', WI], { cwd: root, env: env() });
    expect(logs.stdout).toMatch(/turn 2; I remember: GitHub issue github:acme\/widgets#15/);
  });

  it('answers 503 while the database refuses connections, stores nothing, and takes the redelivery after', async () => {
    await admin.query(`ALTER DATABASE ${database.name} ALLOW_CONNECTIONS false`);
    await admin.query(
      'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
      [database.name],
    );
    const payload = fixture('issue_comment.created') as { comment: { id: number; body: string } };
    payload.comment.id += 1;
    const refused = await sendDelivery(daemon.webhookUrl, SECRET, 'issue_comment', payload);
    expect(refused.status).toBe(503);
    expect(daemon.child.exitCode).toBeNull();
    await admin.query(`ALTER DATABASE ${database.name} ALLOW_CONNECTIONS true`);
    await client.end().catch(() => {});
    client = new pg.Client({ connectionString: database.url });
    client.on('error', () => {});
    await client.connect();
    expect(await delivery(refused.id)).toBeUndefined();
    // GitHub redelivers with the same id.
    const redelivered = await sendDelivery(daemon.webhookUrl, SECRET, 'issue_comment', payload, {
      id: refused.id,
    });
    expect(redelivered.status).toBe(202);
    expect(await settled(refused.id)).toMatchObject({ status: 'done', route: 'deliver' });
  });

  it('never writes the database password (output, log)', async () => {
    const log = readFileSync(join(root, 'data', 'the-loop.log'), 'utf8');
    expect(log.length).toBeGreaterThan(0);
    expect(log).not.toContain(PASSWORD);
    expect(daemon.output()).not.toContain(PASSWORD);
  });

  it('refuses a server that lets the store user in without a password (an engine could sign in too)', async () => {
    const trusted = new URL(`${testTrustCluster()}${database.name}`);
    trusted.password = PASSWORD;
    const r = await runCli(['serve', '--port', '0'], {
      cwd: root,
      env: { ...env(), THE_LOOP_DATABASE_URL: trusted.toString() },
      timeoutMs: 60_000,
    });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/lets loop_trust sign in without a password from this host: an engine/);
    expect(r.stderr).toMatch(/pg_hba\.conf/);
    expect(r.stderr + r.stdout).not.toContain(PASSWORD);
  });

  it('a database unreachable at start is a clear error, without the password', async () => {
    const port = await freePort();
    const r = await runCli(['sessions', 'list'], {
      cwd: root,
      env: { ...env(), THE_LOOP_DATABASE_URL: `postgres://loop:${PASSWORD}@127.0.0.1:${port}/nowhere` },
    });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(
      /cannot use the PostgreSQL store at postgres:\/\/loop:\*\*\*@127\.0\.0\.1:\d+\/nowhere/,
    );
    expect(r.stderr).toMatch(/ECONNREFUSED/);
    expect(r.stderr + r.stdout).not.toContain(PASSWORD);
  });
});
