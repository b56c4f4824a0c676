/**
 * `the-loop sessions move`, through the built CLI against the run's PostgreSQL cluster, with the
 * hosts and leases written by the test (no daemon: the end-to-end test with two daemons is
 * test/acceptance/sessions-move.test.ts). Bad input is a clear error that changes nothing; a move
 * asked without waiting marks the lease draining; waiting follows it until it lands or times out;
 * moving it to its holder calls it off; an ended lease is kept for the target.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { PgHostStore } from '../../src/store/postgres/hosts.js';
import { openPg } from '../../src/store/postgres/migrate.js';
import type { Pg } from '../../src/store/postgres/pg.js';
import { PgSessionStore } from '../../src/store/postgres/sessions.js';
import { makeProject, runCli } from '../helpers/cli.js';
import { freshDatabase } from '../helpers/postgres.js';

const sleep = (ms: number) => new Promise((go) => setTimeout(go, ms));
const host = (id: string) => ({ id, labels: [], engines: ['claude'], capacity: 2, address: null });

describe('the-loop sessions move', () => {
  const project = makeProject({});
  const sqliteConfig = join(project.dir, 'sqlite.yaml');
  const pgConfig = join(project.dir, 'pg.yaml');
  let database: Awaited<ReturnType<typeof freshDatabase>> | undefined;
  let db: Pg;
  let hosts: PgHostStore;
  const cli = (config: string, ...args: string[]) =>
    runCli(['--config', config, '--data-dir', join(project.dir, '.the-loop'), ...args], {
      cwd: project.dir,
      env: { THE_LOOP_DATABASE_URL: database?.url },
    });
  const move = (...args: string[]) => cli(pgConfig, 'sessions', 'move', ...args);
  /** Until `check` holds, polling (a command's output, a row). */
  async function until(what: string, check: () => boolean | Promise<boolean>): Promise<void> {
    for (let i = 0; !(await check()); i++) {
      if (i > 600) throw new Error(`timed out waiting for ${what}`);
      await sleep(50);
    }
  }

  beforeAll(async () => {
    database = await freshDatabase();
    writeFileSync(sqliteConfig, stringify({ usage: { watchClaude: false } }));
    writeFileSync(
      pgConfig,
      stringify({
        usage: { watchClaude: false },
        store: { kind: 'postgres', url: 'env:THE_LOOP_DATABASE_URL', host: 'cli-host', leaseSeconds: 600 },
      }),
    );
    db = await openPg(database.url);
    hosts = new PgHostStore(db);
    for (const id of ['host-a', 'host-b', 'host-c']) await hosts.register(host(id));
    await hosts.leave('host-c', 1);
  }, 60_000);

  afterAll(async () => {
    await db?.close();
    await database?.drop();
    project.cleanup();
  });

  it('on SQLite: a usage error (one host, nowhere to move)', async () => {
    const r = await cli(sqliteConfig, 'sessions', 'move', 'github:o/r#1', '--to', 'host-b');
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/this config uses SQLite/);
    expect(r.stderr).toMatch(/nowhere to move it/);
  });

  it('bad input: a malformed work item, an unknown or down host, no lease, already there; nothing changes', async () => {
    await hosts.acquire('github:o/r#1', 'host-a', 1, 600);
    const cases: Array<[string[], RegExp]> = [
      [['o/r#1', '--to', 'host-b'], /not a work item: "o\/r#1"[\s\S]*github:<owner>\/<repo>#<number>/],
      [['github:o/r#1; rm -rf /', '--to', 'host-b'], /not a work item/],
      [
        ['github:o/r#1', '--to', 'host-z'],
        /no host named "host-z"[\s\S]*Hosts: host-a \(up\), host-b \(up\), host-c \(down\)/,
      ],
      [['github:o/r#1', '--to', 'host-c'], /host-c is down: a work item moves only to a host that is up/],
      [['github:o/r#404', '--to', 'host-b'], /no host has held github:o\/r#404 yet[\s\S]*placement picks/],
      [['github:o/r#1', '--to', 'host-a'], /github:o\/r#1 is on host-a already \(epoch 1\)/],
      [['github:o/r#1'], /required option '--to <host>'/],
      [['github:o/r#1', '--to', 'host-b', '--timeout', '0'], /--timeout takes a whole number from 1/],
    ];
    for (const [args, message] of cases) {
      const r = await move(...args);
      expect(r.code, args.join(' ')).not.toBe(0);
      expect(r.stderr, args.join(' ')).toMatch(message);
    }
    expect(await hosts.lease('github:o/r#1')).toMatchObject({
      hostId: 'host-a',
      draining: false,
      movingTo: null,
    });
  });

  it('--no-wait --json: the lease drains for the target; to its holder again calls it off', async () => {
    await hosts.acquire('github:o/r#2', 'host-a', 1, 600);
    const r = await move('github:O/R#2', '--to', 'host-b', '--no-wait', '--json');
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({
      workItem: 'github:o/r#2',
      from: 'host-a',
      to: 'host-b',
      epoch: 2,
      state: 'draining',
    });
    expect(await hosts.lease('github:o/r#2')).toMatchObject({
      hostId: 'host-a',
      draining: true,
      movingTo: 'host-b',
    });
    const text = await move('github:o/r#2', '--to', 'host-b', '--no-wait');
    expect(text.stdout).toMatch(
      /is moving from host-a to host-b: host-a finishes its running turn.*\(epoch 2\)/,
    );
    const off = await move('github:o/r#2', '--to', 'host-a', '--json');
    expect(off.code, off.stderr).toBe(0);
    expect(JSON.parse(off.stdout)).toEqual({
      workItem: 'github:o/r#2',
      from: 'host-a',
      to: 'host-a',
      epoch: 1,
      state: 'cancelled',
      calledOff: 'host-b',
    });
    expect(await hosts.lease('github:o/r#2')).toMatchObject({
      hostId: 'host-a',
      draining: false,
      movingTo: null,
    });
  });

  it('waits while the turn runs, saying so, and prints the new epoch once the holder let go', async () => {
    await hosts.acquire('github:o/r#3', 'host-a', 1, 600);
    const sessions = new PgSessionStore(db, { scrub: (t) => t });
    const s = await sessions.create({
      workItem: 'github:o/r#3',
      slug: 'o-r-3',
      engine: 'claude',
      runner: 'process',
      engineSessionId: null,
      cwd: project.dir,
      credentialKind: null,
      credentialEnv: null,
    });
    const turn = await sessions.beginTurn(s.id, { promptDigest: 'd', promptBytes: 1, meter: 'none' });
    let said = '';
    const waiting = runCli(
      [
        '--config',
        pgConfig,
        '--data-dir',
        join(project.dir, '.the-loop'),
        'sessions',
        'move',
        'github:o/r#3',
        '--to',
        'host-b',
      ],
      {
        cwd: project.dir,
        env: { THE_LOOP_DATABASE_URL: database?.url },
        onStderr: (soFar) => {
          said = soFar;
        },
      },
    );
    await until('the wait to name the running turn', () =>
      said.includes('draining on host-a: turn 1 running…'),
    );
    expect((await hosts.lease('github:o/r#3'))?.draining).toBe(true);
    // host-a's turn ends and its keeper lets go: handed to host-b.
    await sessions.finishTurn(turn.id, {
      status: 'succeeded',
      endReason: 'result',
      endedAt: new Date().toISOString(),
      exitCode: 0,
      exitSignal: null,
      model: null,
      usage: null,
      costUsd: null,
      error: null,
    });
    expect(await hosts.release('github:o/r#3', 'host-a', 1)).toBe(true);
    const r = await waiting;
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain('draining on host-a: turn 1 running…');
    expect(r.stdout).toContain('github:o/r#3 moved from host-a to host-b (epoch 2).');
    expect(await hosts.lease('github:o/r#3')).toMatchObject({ hostId: 'host-b', epoch: 2, ended: false });
  });

  it('times out naming how to follow it, the move left asked', async () => {
    await hosts.acquire('github:o/r#4', 'host-a', 1, 600);
    const r = await move('github:o/r#4', '--to', 'host-b', '--timeout', '1');
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('draining on host-a: waiting for it to let go…');
    expect(r.stderr).toMatch(/github:o\/r#4 is still draining on host-a after 1 s/);
    expect(r.stderr).toMatch(/The move stays requested[\s\S]*hosts list[\s\S]*sessions show github:o\/r#4/);
    expect(await hosts.lease('github:o/r#4')).toMatchObject({ draining: true, movingTo: 'host-b' });
    // `hosts list` counts the leases being moved away.
    const list = await cli(pgConfig, 'hosts', 'list');
    expect(list.stdout.split('\n').find((l) => l.startsWith('host-a'))).toMatch(/\d+\/2 \(1 moving\)/);
    const json = JSON.parse((await cli(pgConfig, 'hosts', 'list', '--json')).stdout) as Array<{
      id: string;
      moving: number;
    }>;
    expect(json.map((h) => [h.id, h.moving])).toEqual([
      ['host-a', 1],
      ['host-b', 0],
      ['host-c', 0],
    ]);
  });

  it('an ended lease is kept for the target (it takes it at the next delivery), without waiting', async () => {
    await hosts.acquire('github:o/r#5', 'host-a', 1, 600);
    await hosts.release('github:o/r#5', 'host-a', 1);
    const r = await move('github:o/r#5', '--to', 'host-b');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(
      'github:o/r#5 is kept for host-b (the lease of host-a has ended): host-b takes it at its next delivery (epoch 2).',
    );
    expect(await hosts.reservations(['github:o/r#5'])).toEqual(new Map([['github:o/r#5', 'host-b']]));
  });
});
