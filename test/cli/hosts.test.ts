/**
 * `the-loop hosts list`, through the built CLI against the run's PostgreSQL cluster: the hosts
 * registered with the store, their status, heartbeat age (the database's clock), leases over
 * capacity, labels, engines and address; a usage error on SQLite, which has no hosts.
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { PgHostStore } from '../../src/store/postgres/hosts.js';
import { openPg } from '../../src/store/postgres/migrate.js';
import { PgSessionStore } from '../../src/store/postgres/sessions.js';
import { makeProject, runCli } from '../helpers/cli.js';
import { freshDatabase } from '../helpers/postgres.js';

describe('the-loop hosts list', () => {
  const project = makeProject({});
  const sqliteConfig = join(project.dir, 'sqlite.yaml');
  const pgConfig = join(project.dir, 'pg.yaml');
  let database: Awaited<ReturnType<typeof freshDatabase>> | undefined;
  const cli = (config: string, ...args: string[]) =>
    runCli(['--config', config, '--data-dir', join(project.dir, '.the-loop'), ...args], {
      cwd: project.dir,
      env: { THE_LOOP_DATABASE_URL: database?.url },
    });

  beforeAll(async () => {
    database = await freshDatabase();
    writeFileSync(sqliteConfig, stringify({ usage: { watchClaude: false } }));
    writeFileSync(
      pgConfig,
      stringify({
        usage: { watchClaude: false },
        store: { kind: 'postgres', url: 'env:THE_LOOP_DATABASE_URL', host: 'host-a' },
      }),
    );
  }, 60_000);

  afterAll(async () => {
    await database?.drop();
    project.cleanup();
  });

  it('says none registered yet, then lists each host with its leases and offer', async () => {
    const empty = await cli(pgConfig, 'hosts', 'list');
    expect(empty.code, empty.stderr).toBe(0);
    expect(empty.stdout).toMatch(/no host has registered/);
    const db = await openPg(database?.url as string);
    try {
      const hosts = new PgHostStore(db);
      await hosts.register({
        id: 'build-01',
        labels: ['tmux'],
        engines: ['claude', 'codex'],
        capacity: 4,
        address: 'ci@build-01',
      });
      await hosts.register({ id: 'build-02', labels: [], engines: ['claude'], capacity: 2, address: null });
      await hosts.acquire('github:o/r#1', 'build-01', 1, 60);
      await hosts.acquire('github:o/r#2', 'build-01', 1, 60);
      await hosts.leave('build-02', 1);
    } finally {
      await db.close();
    }
    const text = await cli(pgConfig, 'hosts', 'list');
    expect(text.code, text.stderr).toBe(0);
    const lines = text.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/host\s+status\s+heartbeat\s+leases\s+labels\s+engines\s+address/);
    expect(lines.find((l) => l.startsWith('build-01'))).toMatch(
      /up\s+.* ago\s+2\/4\s+tmux\s+claude,codex\s+ci@build-01/,
    );
    expect(lines.find((l) => l.startsWith('build-02'))).toMatch(/down\s+.* ago\s+0\/2\s+-\s+claude\s+-/);
    const json = await cli(pgConfig, 'hosts', 'list', '--json');
    expect(json.code, json.stderr).toBe(0);
    const rows = JSON.parse(json.stdout) as Array<Record<string, unknown>>;
    expect(rows.map((r) => [r.id, r.status, r.leases, r.capacity, r.labels, r.engines, r.address])).toEqual([
      ['build-01', 'up', 2, 4, ['tmux'], ['claude', 'codex'], 'ci@build-01'],
      ['build-02', 'down', 0, 2, [], ['claude'], null],
    ]);
    expect(rows[0]?.heartbeatAgeSeconds).toEqual(expect.any(Number));
  });

  it('sessions attach on a session another host holds names that host and how to reach it', async () => {
    const db = await openPg(database?.url as string);
    try {
      const hosts = new PgHostStore(db);
      const far = await hosts.register({
        id: 'far-01',
        labels: ['tmux'],
        engines: ['claude'],
        capacity: 2,
        address: 'ops@far-01.internal',
      });
      await hosts.acquire('github:o/r#9', 'far-01', far, 60);
      await new PgSessionStore(db, { scrub: (t) => t }).create({
        workItem: 'github:o/r#9',
        slug: 'o-r-9',
        engine: 'claude',
        runner: 'tmux',
        tmuxTarget: 'loop-o-r-9',
        engineSessionId: null,
        cwd: project.dir,
        credentialKind: null,
        credentialEnv: null,
      });
    } finally {
      await db.close();
    }
    const r = await cli(pgConfig, 'sessions', 'attach', 'github:o/r#9');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('github:o/r#9 runs on host far-01, not this one (host-a)');
    expect(r.stderr).toContain('ssh ops@far-01.internal -t tmux attach -t =loop-o-r-9');
  });

  it("a command on a shared store never marks another host's running turn lost by this machine's process table", async () => {
    // A pid no process has now: the turn's owner as this machine sees it.
    const gone = spawnSync(process.execPath, ['-e', '0']).pid as number;
    const db = await openPg(database?.url as string);
    let turnId = 0;
    try {
      const sessions = new PgSessionStore(db, { scrub: (t) => t, ownerPid: gone });
      const s = await sessions.create({
        workItem: 'github:o/r#10',
        slug: 'o-r-10',
        engine: 'claude',
        runner: 'process',
        engineSessionId: null,
        cwd: project.dir,
        credentialKind: null,
        credentialEnv: null,
      });
      turnId = (await sessions.beginTurn(s.id, { promptDigest: 'd', promptBytes: 1, meter: 'none' })).id;
    } finally {
      await db.close();
    }
    // Commands that build the whole app (events retry) and reading ones (sessions list).
    await cli(pgConfig, 'events', 'retry', 'no-such-delivery');
    await cli(pgConfig, 'sessions', 'list');
    const check = await openPg(database?.url as string);
    try {
      const row = await check.row<{ status: string }>('SELECT status FROM turns WHERE id = $1', [turnId]);
      expect(row?.status).toBe('running');
    } finally {
      await check.close();
    }
  });

  it('the-loop run is refused on a shared store, naming the way through the hosts', async () => {
    const r = await cli(pgConfig, 'run', 'github:o/r#11', 'hello');
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/this config uses a store several hosts share/);
    expect(r.stderr).toContain('the-loop sessions send github:o/r#11');
  });

  it('is a usage error on SQLite', async () => {
    const r = await cli(sqliteConfig, 'hosts', 'list');
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/PostgreSQL store, and this config uses SQLite/);
  });
});
