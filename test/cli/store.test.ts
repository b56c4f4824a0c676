/**
 * `the-loop store copy` and `store migrate`, through the built CLI against the run's PostgreSQL
 * cluster: a SQLite registry of 1,000 sessions (with turns, acts and deliveries) and 100,000 ledger
 * rows moves into an empty PostgreSQL store, and `usage` and `sessions list` print the same before
 * and after the move. A second copy is refused (nothing twice); a row PostgreSQL would reject is
 * named and nothing is written unless told to leave it out; the database password is never printed.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import type { LedgerEntry, RowPrice } from '../../src/core/ports/ledger.js';
import { type Db, openDb } from '../../src/store/db.js';
import { SqliteActStore } from '../../src/store/sqlite/acts.js';
import { SqliteInbox } from '../../src/store/sqlite/inbox.js';
import { SqliteLedgerStore } from '../../src/store/sqlite/ledger.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sessions.js';
import { makeProject, runCli } from '../helpers/cli.js';
import { freshDatabase } from '../helpers/postgres.js';

const SESSIONS = 1000;
const LEDGER_ROWS = 100_000;
const scrub = (text: string) => text;

/** A registry like a team's after months on one machine. */
async function seed(db: Db): Promise<void> {
  const sessions = new SqliteSessionStore(db, { scrub });
  const ledger = new SqliteLedgerStore(db);
  const acts = new SqliteActStore(db, { scrub });
  const inbox = new SqliteInbox(db, { scrub });
  const ids: Array<{ id: string; workItem: string; turn: number }> = [];
  for (let n = 1; n <= SESSIONS; n++) {
    const workItem = `github:octo/repo-${n % 7}#${n}`;
    const s = await sessions.create({
      workItem,
      slug: `octo-repo-${n % 7}-${n}`,
      engine: n % 3 ? 'claude' : 'codex',
      runner: n % 5 ? 'process' : 'tmux',
      engineSessionId: null,
      cwd: '/srv/work',
      credentialKind: 'api-key',
      credentialEnv: 'ANTHROPIC_API_KEY',
      ...(n % 5 ? {} : { tmuxTarget: `loop-${n}` }),
    });
    const turn = await sessions.beginTurn(s.id, {
      promptDigest: `sha256:${n}`,
      promptBytes: n,
      meter: 'transcript',
    });
    if (n % 10 !== 0)
      await sessions.finishTurn(turn.id, {
        status: n % 13 ? 'succeeded' : 'failed',
        endReason: n % 13 ? 'result' : 'exit',
        endedAt: new Date(Date.parse('2026-11-01T00:00:00Z') + n * 60_000).toISOString(),
        exitCode: n % 13 ? 0 : 1,
        exitSignal: null,
        model: 'claude-sonnet-4-5',
        usage: {
          inputTokens: n,
          outputTokens: 2 * n,
          cacheReadTokens: 0,
          cacheCreationTokens: 0,
          reasoningTokens: 0,
        },
        costUsd: n / 1000,
        error: n % 13 ? null : 'engine exited 1',
      });
    // A daemon that crashed mid-turn: marked lost (as a reading command on the file does) before the move.
    else await sessions.markTurnLost(turn.id, 'its owner process is gone');
    if (n % 4 === 0) await sessions.close(s.id, 'work item closed');
    ids.push({ id: s.id, workItem, turn: turn.id });
  }
  const models = ['claude-sonnet-4-5', 'claude-opus-4-1', 'gpt-5', 'made-up-model'];
  const rows: LedgerEntry[] = [];
  for (let i = 0; i < LEDGER_ROWS; i++) {
    const owner = ids[i % SESSIONS] as (typeof ids)[number];
    rows.push({
      meter: 'transcript',
      sourceId: `msg-${i}`,
      at: new Date(Date.parse('2026-10-01T00:00:00Z') + i * 37_000).toISOString(),
      sessionId: i % 9 ? owner.id : null,
      workItem: i % 9 ? owner.workItem : null,
      turnId: i % 9 ? owner.turn : null,
      engine: 'claude',
      runner: 'process',
      model: models[i % models.length] as string,
      usage: {
        inputTokens: i % 997,
        outputTokens: i % 311,
        cacheReadTokens: i % 53,
        cacheCreationTokens: i % 7,
        reasoningTokens: 0,
      },
      payer: i % 2 ? { kind: 'api-key', id: 'ANTHROPIC_API_KEY' } : { kind: 'subscription', id: null },
    });
  }
  const price = (e: LedgerEntry): RowPrice =>
    e.model === 'made-up-model'
      ? { costUsd: null, basis: null, priceKey: null, outputUnit: null }
      : {
          costUsd: e.usage.outputTokens * 1e-5 + e.usage.inputTokens * 3e-6,
          basis: 'list-price',
          priceKey: e.model,
          outputUnit: 1e-5,
        };
  await ledger.add(rows, price);
  const first = ids[0] as (typeof ids)[number];
  await acts.save(
    {
      id: first.turn,
      seq: 1,
      sessionId: first.id,
      workItem: first.workItem,
      engine: 'claude',
      runner: 'process',
      at: '2026-11-01T00:00:00.000Z',
    },
    [
      {
        seq: 1,
        toolUseId: 't1',
        tool: 'Bash',
        kind: 'git-push',
        command: 'git push origin HEAD',
        detail: { ref: 'main' },
        outcome: 'succeeded',
        verdict: 'allow',
        rule: null,
        breach: false,
      },
    ],
    'command',
  );
  await inbox.accept({
    id: 'delivery-1',
    source: 'github',
    event: 'issue_comment',
    action: 'created',
    body: Buffer.from('{"comment":{"body":"fix it \u00e9"}}', 'utf8'),
    routed: { action: 'ignore', reason: 'not a trigger' },
  });
}

describe('store copy: a SQLite registry into PostgreSQL', () => {
  const project = makeProject({ usage: { watchClaude: false } });
  const registry = join(project.dir, '.the-loop', 'the-loop.db');
  let database: Awaited<ReturnType<typeof freshDatabase>>;
  let url: string;
  let PASSWORD: string;
  const sqliteConfig = join(project.dir, 'sqlite.yaml');
  const pgConfig = join(project.dir, 'postgres.yaml');
  const cli = (config: string, ...args: string[]) =>
    runCli(['--config', config, '--data-dir', join(project.dir, '.the-loop'), ...args], {
      cwd: project.dir,
      env: { THE_LOOP_DATABASE_URL: url },
      timeoutMs: 120_000,
    });
  const READS = [
    ['sessions', 'list', '--all'],
    ['sessions', 'list', '--all', '--json'],
    ['sessions', 'list', '--work-item', 'github:octo/repo-3#10'],
    ...['day', 'engine', 'model', 'work-item', 'payer', 'session'].flatMap((by) => [
      ['usage', '--since', '2026-09-01', '--until', '2026-12-01', '--by', by],
      ['usage', '--since', '2026-09-01', '--until', '2026-12-01', '--by', by, '--json'],
    ]),
    ['acts', '--json'],
    ['events', 'list', '--json'],
  ];

  beforeAll(async () => {
    database = await freshDatabase();
    // The cluster's real password: it must never be printed.
    url = database.url;
    PASSWORD = decodeURIComponent(new URL(url).password);
    const db = openDb(registry);
    await seed(db);
    db.close();
    writeFileSync(sqliteConfig, stringify({ usage: { watchClaude: false } }));
    writeFileSync(
      pgConfig,
      stringify({
        usage: { watchClaude: false },
        store: { kind: 'postgres', url: 'env:THE_LOOP_DATABASE_URL', host: 'host-a' },
      }),
    );
  }, 180_000);

  afterAll(async () => {
    await database?.drop();
    project.cleanup();
  });

  it('moves every row, and the reading commands print the same before and after', async () => {
    const before: string[] = [];
    for (const args of READS) {
      const r = await cli(sqliteConfig, ...args);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      before.push(r.stdout);
    }
    const copy = await cli(pgConfig, 'store', 'copy', '--from', registry, '--json');
    expect(copy.code, copy.stderr).toBe(0);
    const report = JSON.parse(copy.stdout) as {
      copied: boolean;
      tables: Array<{ table: string; rows: number }>;
    };
    expect(report.copied).toBe(true);
    const rows = Object.fromEntries(report.tables.map((t) => [t.table, t.rows]));
    expect(rows).toMatchObject({
      sessions: SESSIONS,
      turns: SESSIONS,
      usage_ledger: LEDGER_ROWS,
      acts: 1,
      deliveries: 1,
    });
    for (const [i, args] of READS.entries()) {
      const r = await cli(pgConfig, ...args);
      expect(r.stderr, args.join(' ')).toBe('');
      expect(r.stdout, args.join(' ')).toBe(before[i]);
    }
    expect(copy.stdout + copy.stderr).not.toContain(PASSWORD);
  });

  it('a second copy is refused, and nothing is copied twice', async () => {
    const again = await cli(pgConfig, 'store', 'copy', '--from', registry);
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(/not empty/);
    expect(again.stderr + again.stdout).not.toContain(PASSWORD);
    const list = await cli(pgConfig, 'sessions', 'list', '--all', '--json');
    expect((JSON.parse(list.stdout) as unknown[]).length).toBe(SESSIONS);
  });

  it('store migrate names the store without its password', async () => {
    const r = await cli(pgConfig, 'store', 'migrate');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(
      /^postgres store at postgres:\/\/loop:\*\*\*@127\.0\.0\.1:\d+\/t_\w+: schema version (\d+) \(this the-loop's latest: \1\)\n$/,
    );
    const json = await cli(sqliteConfig, 'store', 'migrate', '--json');
    expect(JSON.parse(json.stdout)).toMatchObject({ kind: 'sqlite', where: registry });
  });

  it('copy needs a PostgreSQL store, and an existing SQLite file', async () => {
    const onSqlite = await cli(sqliteConfig, 'store', 'copy');
    expect(onSqlite.code).toBe(2);
    expect(onSqlite.stderr).toMatch(/copies into a PostgreSQL store/);
    const missing = await cli(pgConfig, 'store', 'copy', '--from', join(project.dir, 'nope.db'));
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/no SQLite registry at/);
  });
});

describe('store copy: rows PostgreSQL would reject', () => {
  const project = makeProject({});
  const registry = join(project.dir, 'old.db');
  const config = join(project.dir, 'postgres.yaml');
  let database: Awaited<ReturnType<typeof freshDatabase>>;
  let badTurn = 0;

  beforeAll(async () => {
    database = await freshDatabase();
    const db = openDb(registry);
    const sessions = new SqliteSessionStore(db, { scrub });
    const good = await sessions.create({
      workItem: 'github:octo/a#1',
      slug: 'octo-a-1',
      engine: 'claude',
      runner: 'process',
      engineSessionId: null,
      cwd: '/w',
      credentialKind: null,
      credentialEnv: null,
    });
    const bad = await sessions.create({
      workItem: 'github:octo/a#2',
      slug: 'octo-a-2',
      engine: 'claude',
      runner: 'process',
      engineSessionId: null,
      cwd: '/w',
      credentialKind: null,
      credentialEnv: null,
    });
    // The bad session has a turn: it cannot be copied without its session either.
    const turn = await sessions.beginTurn(bad.id, {
      promptDigest: 'sha256:x',
      promptBytes: 1,
      meter: 'none',
    });
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
    // A NUL PostgreSQL's text cannot hold is kept as U+FFFD; a value its column's type cannot take
    // (SQLite keeps text in an INTEGER column) rejects the row.
    await sessions.close(good.id, 'reason with a \u0000 inside');
    await sessions.close(bad.id, 'done');
    db.prepare("UPDATE sessions SET engine_session_started = 'x' WHERE id = ?").run(bad.id);
    db.prepare('INSERT INTO scan_files (path, inode, size, offset, scanned_at) VALUES (?, 1, 2, 2, ?)').run(
      '/home/me/.claude/projects/a.jsonl',
      new Date().toISOString(),
    );
    badTurn = turn.id;
    db.close();
    writeFileSync(
      config,
      stringify({
        usage: { watchClaude: false },
        store: { kind: 'postgres', url: 'env:THE_LOOP_DATABASE_URL', host: 'host-b' },
      }),
    );
  });

  afterAll(async () => {
    await database?.drop();
    project.cleanup();
  });

  const cli = (...args: string[]) =>
    runCli(['--config', config, '--data-dir', join(project.dir, 'data'), ...args], {
      cwd: project.dir,
      env: { THE_LOOP_DATABASE_URL: database.url },
    });

  it('names them and writes nothing; --skip-rejected copies the rest', async () => {
    const refused = await cli('store', 'copy', '--from', registry);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/nothing copied: 2 row\(s\) PostgreSQL would reject/);
    expect(refused.stderr).toMatch(
      /sessions id=[0-9a-f-]+: engine_session_started holds "x", not a whole number/,
    );
    expect(refused.stderr).toContain(`turns id=${badTurn}: its session (`);
    const none = await cli('sessions', 'list', '--all', '--json');
    expect(JSON.parse(none.stdout)).toEqual([]);
    const rest = await cli('store', 'copy', '--from', registry, '--skip-rejected', '--json');
    expect(rest.code, rest.stderr).toBe(0);
    expect(JSON.parse(rest.stdout)).toMatchObject({ copied: true, rows: 2 });
    expect((JSON.parse(rest.stdout) as { rejected: unknown[] }).rejected).toHaveLength(2);
    const one = await cli('sessions', 'list', '--all', '--json');
    expect((JSON.parse(one.stdout) as Array<{ workItem: string }>).map((s) => s.workItem)).toEqual([
      'github:octo/a#1',
    ]);
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      const reason = await client.query('SELECT close_reason FROM sessions');
      expect(reason.rows).toEqual([{ close_reason: 'reason with a \uFFFD inside' }]);
      // The file's transcript cursors are this host's now.
      const cursors = await client.query('SELECT host, path FROM scan_files');
      expect(cursors.rows).toEqual([{ host: 'host-b', path: '/home/me/.claude/projects/a.jsonl' }]);
    } finally {
      await client.end();
    }
  });

  it('reads the file only: a registry of an older version, or one in use, is refused and left as it was', async () => {
    const old = join(project.dir, 'older.db');
    const db = openDb(old);
    const sessions = new SqliteSessionStore(db, { scrub });
    const s = await sessions.create({
      workItem: 'github:octo/b#1',
      slug: 'octo-b-1',
      engine: 'claude',
      runner: 'process',
      engineSessionId: null,
      cwd: '/w',
      credentialKind: null,
      credentialEnv: null,
    });
    await sessions.beginTurn(s.id, { promptDigest: 'sha256:x', promptBytes: 1, meter: 'none' });
    db.close();
    const before = readFileSync(old);
    const running = await cli('store', 'copy', '--from', old);
    expect(running.code).toBe(2);
    expect(running.stderr).toMatch(/1 running turn\(s\): nothing copied/);
    expect(running.stderr).toMatch(/Stop the daemon using it first/);
    const raw = new Database(old);
    raw
      .prepare('DELETE FROM schema_migrations WHERE version = (SELECT MAX(version) FROM schema_migrations)')
      .run();
    raw.close();
    const changed = readFileSync(old);
    const older = await cli('store', 'copy', '--from', old);
    expect(older.code).not.toBe(0);
    expect(older.stderr).toMatch(/has schema version \d+; this the-loop copies version \d+/);
    expect(older.stderr).toMatch(/the-loop store migrate/);
    expect(readFileSync(old).equals(changed)).toBe(true);
    expect(before.equals(changed)).toBe(false);
  });
});
