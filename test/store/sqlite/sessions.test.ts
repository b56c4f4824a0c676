import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { TurnEvent, Usage } from '../../../src/core/events.js';
import type { NewSession, TurnEnd } from '../../../src/core/ports/sessions.js';
import { parseWorkItem, workItemSlug } from '../../../src/core/work-item.js';
import { type Db, openDb } from '../../../src/store/db.js';
import { MIGRATIONS } from '../../../src/store/migrations/index.js';
import { SqliteSessionStore } from '../../../src/store/sqlite/sessions.js';
import { rejected, thrown } from '../../helpers/check.js';

let dir: string;
let dbPath: string;
const open: Db[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'the-loop-registry-'));
  dbPath = join(dir, 'state', 'registry.sqlite');
});

afterEach(() => {
  for (const db of open.splice(0)) if (db.open) db.close();
  rmSync(dir, { recursive: true, force: true });
});

function openStore(options: { scrub?: (text: string) => string; ownerPid?: number; now?: () => Date } = {}): {
  db: Db;
  store: SqliteSessionStore;
} {
  const db = openDb(dbPath);
  open.push(db);
  return { db, store: new SqliteSessionStore(db, { scrub: options.scrub ?? ((t) => t), ...options }) };
}

const newSession = (workItem = 'github:octo/widgets#1', extra: Partial<NewSession> = {}): NewSession => ({
  workItem,
  // A slug is one work item's: each gets its own.
  slug: workItemSlug(parseWorkItem(workItem)),
  engine: 'claude',
  runner: 'process',
  engineSessionId: '11111111-2222-4333-8444-555555555555',
  cwd: '/work/widgets',
  credentialKind: 'api-key',
  credentialEnv: 'ANTHROPIC_API_KEY',
  ...extra,
});

const turnInput = { promptDigest: 'sha256:abc', promptBytes: 12, meter: 'stream-json' as const };

const usage = (input: number, output: number, cacheRead = 0, cacheCreation = 0, reasoning = 0): Usage => ({
  inputTokens: input,
  outputTokens: output,
  cacheReadTokens: cacheRead,
  cacheCreationTokens: cacheCreation,
  reasoningTokens: reasoning,
});

const end = (fields: Partial<TurnEnd> = {}): TurnEnd => ({
  status: 'succeeded',
  endReason: 'result',
  endedAt: '2026-01-01T00:00:05.000Z',
  exitCode: 0,
  exitSignal: null,
  model: 'claude-opus-4-8',
  usage: usage(3, 12, 0, 5120),
  costUsd: 0.032315,
  error: null,
  ...fields,
});

describe('openDb and migrations', () => {
  it('creates the file (and its directory), applies migration 1 once; reopening is idempotent', async () => {
    const first = openDb(dbPath);
    open.push(first);
    expect(existsSync(dbPath)).toBe(true);
    const rows = () => first.prepare('SELECT version, name FROM schema_migrations ORDER BY version').all();
    const all = MIGRATIONS.map((m) => ({ version: m.version, name: m.name }));
    expect(rows()).toEqual(all);
    await first.close();
    const again = openDb(dbPath);
    open.push(again);
    expect(again.prepare('SELECT version, name FROM schema_migrations').all()).toEqual(all);
    const tables = (
      again.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all() as {
        name: string;
      }[]
    )
      .map((t) => t.name)
      .filter((n) => !n.startsWith('sqlite_'));
    expect(tables).toEqual([
      'acts',
      'connector_audit',
      'deliveries',
      'gateway_tokens',
      'github_status',
      'scan_files',
      'schema_migrations',
      'sessions',
      'turn_events',
      'turns',
      'unmetered_drives',
      'usage_hours',
      'usage_hours_dirty',
      'usage_hours_mark',
      'usage_ledger',
    ]);
    expect(again.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(again.pragma('foreign_keys', { simple: true })).toBe(1);
  });

  it('data survives a reopen', async () => {
    const { db, store } = openStore();
    const session = await store.create(newSession());
    db.close();
    const { store: reopened } = openStore();
    expect(await reopened.get(session.id)).toEqual(session);
  });

  it('a registry with a newer schema version than known → LoopError store-failed, and the file is left alone', () => {
    const db = openDb(dbPath);
    db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(
      99,
      'future',
      'x',
    );
    db.close();
    const error = thrown(() => openDb(dbPath));
    expect(error.code).toBe('store-failed');
    expect(error.message).toContain('99');
    expect(error.hint).toBeDefined();
    const check = openDb(dbPath, [...MIGRATIONS, { version: 99, name: 'future', sql: '' }]);
    open.push(check);
    expect(check.prepare('SELECT MAX(version) AS v FROM schema_migrations').get()).toEqual({ v: 99 });
  });

  it('a failing migration is rolled back and reported as store-failed', () => {
    const broken = [
      ...MIGRATIONS,
      { version: 99, name: 'broken', sql: 'CREATE TABLE extra (x); THIS IS NOT SQL;' },
    ];
    const error = thrown(() => openDb(dbPath, broken));
    expect(error.code).toBe('store-failed');
    const db = openDb(dbPath);
    open.push(db);
    expect(db.prepare('SELECT version FROM schema_migrations').all()).toEqual(
      MIGRATIONS.map((m) => ({ version: m.version })),
    );
    expect(db.prepare("SELECT name FROM sqlite_master WHERE name = 'extra'").all()).toEqual([]);
  });

  it('a path that cannot be a database → store-failed', () => {
    // The directory itself is not a database file.
    expect(thrown(() => openDb(dir)).code).toBe('store-failed');
  });
});

describe('sessions', () => {
  it('create / get / findActive / list / close', async () => {
    const times = ['2026-01-01T00:00:00.000Z', '2026-01-01T00:00:01.000Z', '2026-01-01T00:00:02.000Z'];
    let i = 0;
    const { store } = openStore({ now: () => new Date(times[Math.min(i++, times.length - 1)] as string) });
    const a = await store.create(newSession('github:octo/widgets#1'));
    expect(a).toMatchObject({
      workItem: 'github:octo/widgets#1',
      slug: workItemSlug(parseWorkItem('github:octo/widgets#1')),
      engine: 'claude',
      runner: 'process',
      engineSessionId: '11111111-2222-4333-8444-555555555555',
      engineSessionStarted: false,
      cwd: '/work/widgets',
      status: 'active',
      usageBaseline: null,
      credentialKind: 'api-key',
      credentialEnv: 'ANTHROPIC_API_KEY',
      createdAt: times[0],
      closedAt: null,
      closeReason: null,
    });
    expect(a.id).toMatch(/^[0-9a-f-]{36}$/);
    const b = await store.create(
      newSession('github:octo/widgets#2', {
        engineSessionId: null,
        credentialKind: null,
        credentialEnv: null,
      }),
    );
    expect(b.engineSessionId).toBeNull();
    expect(b.credentialKind).toBeNull();

    expect((await store.findActive('github:octo/widgets#1'))?.id).toBe(a.id);
    expect(await store.findActive('github:octo/widgets#3')).toBeUndefined();
    expect(await store.get('no-such-id')).toBeUndefined();
    // Newest first.
    expect((await store.list()).map((s) => s.id)).toEqual([b.id, a.id]);
    expect((await store.list({ workItem: 'github:octo/widgets#2' })).map((s) => s.id)).toEqual([b.id]);
    expect((await store.list({ limit: 1 })).map((s) => s.id)).toEqual([b.id]);

    const closed = await store.close(a.id, 'issue closed');
    expect(closed).toMatchObject({ status: 'closed', closeReason: 'issue closed' });
    expect(closed.closedAt).not.toBeNull();
    expect(await store.findActive('github:octo/widgets#1')).toBeUndefined();
    expect((await store.list({ status: 'active' })).map((s) => s.id)).toEqual([b.id]);
    expect((await store.list({ status: 'closed' })).map((s) => s.id)).toEqual([a.id]);
  });

  it('closing twice keeps the first close; closing an unknown session → session-missing', async () => {
    const { store } = openStore();
    const s = await store.create(newSession());
    const first = await store.close(s.id, 'first');
    expect(await store.close(s.id, 'second')).toEqual(first);
    expect((await rejected(() => store.close('nope', 'x'))).code).toBe('session-missing');
  });

  it('a second active session for the same work item → session-busy; after close a new one is allowed', async () => {
    const { store } = openStore();
    const first = await store.create(newSession());
    const error = await rejected(() => store.create(newSession()));
    expect(error.code).toBe('session-busy');
    expect(error.message).toContain('github:octo/widgets#1');
    // A different work item is independent.
    await store.create(newSession('github:octo/widgets#2'));
    await store.close(first.id, 'done');
    const second = await store.create(newSession());
    expect(second.id).not.toBe(first.id);
    expect((await store.findActive('github:octo/widgets#1'))?.id).toBe(second.id);
    expect(await store.list({ workItem: 'github:octo/widgets#1' })).toHaveLength(2);
  });

  it('the one-active rule holds across two connections to the same file', async () => {
    const { store: one } = openStore();
    const { store: two } = openStore();
    await one.create(newSession());
    expect((await rejected(() => two.create(newSession()))).code).toBe('session-busy');
  });

  it('markEngineSessionStarted records the confirmed id', async () => {
    const { store } = openStore();
    const s = await store.create(newSession('github:o/r#5', { engine: 'codex', engineSessionId: null }));
    await store.markEngineSessionStarted(s.id, '01a236ca-48e3-7de1-9e0c-9990f37e11eb');
    expect(await store.get(s.id)).toMatchObject({
      engineSessionId: '01a236ca-48e3-7de1-9e0c-9990f37e11eb',
      engineSessionStarted: true,
    });
    expect((await rejected(() => store.markEngineSessionStarted('nope', 'x'))).code).toBe('session-missing');
  });

  it('setUsageBaseline round-trips a Usage; setCredential updates kind and variable', async () => {
    const { store } = openStore();
    const s = await store.create(newSession());
    const baseline = usage(1548, 53, 1152, 0, 12);
    await store.setUsageBaseline(s.id, baseline);
    expect((await store.get(s.id))?.usageBaseline).toEqual(baseline);
    await store.setCredential(s.id, 'subscription', 'CLAUDE_CODE_OAUTH_TOKEN');
    expect(await store.get(s.id)).toMatchObject({
      credentialKind: 'subscription',
      credentialEnv: 'CLAUDE_CODE_OAUTH_TOKEN',
    });
    await store.setCredential(s.id, null, null);
    expect(await store.get(s.id)).toMatchObject({ credentialKind: null, credentialEnv: null });
    expect((await rejected(() => store.setUsageBaseline('nope', baseline))).code).toBe('session-missing');
  });
});

describe('turns', () => {
  it('beginTurn numbers turns 1, 2, 3 per session and records the owner pid', async () => {
    const { store } = openStore({ ownerPid: 4242 });
    const a = await store.create(newSession('github:o/r#1'));
    const b = await store.create(newSession('github:o/r#2'));
    const seqs: number[] = [];
    for (let n = 0; n < 3; n++) {
      const turn = await store.beginTurn(a.id, turnInput);
      expect(turn).toMatchObject({
        sessionId: a.id,
        status: 'running',
        endReason: null,
        promptDigest: 'sha256:abc',
        promptBytes: 12,
        meter: 'stream-json',
        usage: null,
        costUsd: null,
      });
      seqs.push(turn.seq);
      await store.finishTurn(turn.id, end());
    }
    expect(seqs).toEqual([1, 2, 3]);
    // Numbering is per session.
    expect((await store.beginTurn(b.id, turnInput)).seq).toBe(1);
    expect((await store.turns(a.id)).map((t) => t.seq)).toEqual([1, 2, 3]);
  });

  it('beginTurn while a turn is running → session-busy (one turn at a time)', async () => {
    const { store } = openStore();
    const s = await store.create(newSession());
    const running = await store.beginTurn(s.id, turnInput);
    const error = await rejected(() => store.beginTurn(s.id, turnInput));
    expect(error.code).toBe('session-busy');
    expect(error.message).toContain(String(running.id));
    expect(await store.turns(s.id)).toHaveLength(1);
    await store.finishTurn(running.id, end());
    expect((await store.beginTurn(s.id, turnInput)).seq).toBe(2);
  });

  it('beginTurn on a closed session → session-closed; on an unknown one → session-missing', async () => {
    const { store } = openStore();
    const s = await store.create(newSession());
    await store.close(s.id, 'done');
    expect((await rejected(() => store.beginTurn(s.id, turnInput))).code).toBe('session-closed');
    expect((await rejected(() => store.beginTurn('nope', turnInput))).code).toBe('session-missing');
    expect(await store.turns(s.id)).toEqual([]);
  });

  it('appendEvent / events round-trip every event kind, in order, numbered from 1', async () => {
    const { store } = openStore();
    const s = await store.create(newSession());
    const turn = await store.beginTurn(s.id, turnInput);
    const events: TurnEvent[] = [
      { type: 'session', engineSessionId: 'abc', model: 'm' },
      { type: 'text', text: 'héllo 😀\nline two' },
      { type: 'tool-use', id: 't1', name: 'Bash', input: { command: 'echo "hi"', nested: [1, { a: null }] } },
      { type: 'tool-result', id: 't1', ok: false, summary: 'exit 1' },
      { type: 'usage', usage: usage(1, 2, 3, 4, 5), model: 'm', costUsd: 0.5 },
      { type: 'error', message: 'boom' },
      { type: 'diagnostic', message: 'not JSON: x' },
      { type: 'turn-end', ok: true, subtype: 'success' },
    ];
    for (const event of events) await store.appendEvent(turn.id, event);
    const stored = await store.events(turn.id);
    expect(stored.map((e) => e.event)).toEqual(events);
    expect(stored.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(stored.every((e) => e.turnId === turn.id)).toBe(true);
    expect(await store.events(turn.id + 1000)).toEqual([]);
  });

  it('event numbering continues from the stored maximum in a new store instance', async () => {
    const { store } = openStore();
    const s = await store.create(newSession());
    const turn = await store.beginTurn(s.id, turnInput);
    await store.appendEvent(turn.id, { type: 'text', text: 'a' });
    await store.appendEvent(turn.id, { type: 'text', text: 'b' });
    const { store: other } = openStore();
    await other.appendEvent(turn.id, { type: 'text', text: 'c' });
    expect((await other.events(turn.id)).map((e) => [e.seq, (e.event as { text: string }).text])).toEqual([
      [1, 'a'],
      [2, 'b'],
      [3, 'c'],
    ]);
  });

  it('finishTurn stores the end, usage and engine-reported cost', async () => {
    const { store } = openStore();
    const s = await store.create(newSession());
    const turn = await store.beginTurn(s.id, turnInput);
    await store.setTurnPid(turn.id, 31337);
    const finished = await store.finishTurn(turn.id, end());
    expect(finished).toMatchObject({
      status: 'succeeded',
      endReason: 'result',
      endedAt: '2026-01-01T00:00:05.000Z',
      exitCode: 0,
      exitSignal: null,
      pid: 31337,
      model: 'claude-opus-4-8',
      usage: usage(3, 12, 0, 5120),
      costUsd: 0.032315,
      costBasis: 'engine-reported',
      error: null,
    });
    expect(await store.turns(s.id)).toEqual([finished]);
  });

  it('usage null is stored as NULLs (not zeros) and reads back null; cost null has no basis', async () => {
    const { db, store } = openStore();
    const s = await store.create(newSession());
    const turn = await store.beginTurn(s.id, { ...turnInput, meter: 'none' });
    const finished = await store.finishTurn(
      turn.id,
      end({ status: 'succeeded', endReason: 'exit', usage: null, costUsd: null, model: null }),
    );
    expect(finished.usage).toBeNull();
    expect(finished.costUsd).toBeNull();
    expect(finished.costBasis).toBeNull();
    expect(finished.meter).toBe('none');
    const row = db
      .prepare(
        `SELECT input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, reasoning_tokens,
                cost_usd, cost_basis, typeof(input_tokens) AS t FROM turns WHERE id = ?`,
      )
      .get(turn.id);
    expect(row).toEqual({
      input_tokens: null,
      output_tokens: null,
      cache_read_tokens: null,
      cache_creation_tokens: null,
      reasoning_tokens: null,
      cost_usd: null,
      cost_basis: null,
      t: 'null',
    });
  });

  it('a metered turn of zero tokens and zero cost stays zero (not null)', async () => {
    const { store } = openStore();
    const s = await store.create(newSession());
    const turn = await store.beginTurn(s.id, turnInput);
    const finished = await store.finishTurn(
      turn.id,
      end({ status: 'failed', usage: usage(0, 0), costUsd: 0, error: 'API Error' }),
    );
    expect(finished.usage).toEqual(usage(0, 0));
    expect(finished.costUsd).toBe(0);
    expect(finished.costBasis).toBe('engine-reported');
    expect(finished.status).toBe('failed');
  });
});

describe('scrubbing before storage', () => {
  const CANARY = 'sk-ant-canary-9f8e7d6c5b4a';
  const scrub = (text: string) => text.split(CANARY).join('[redacted]');

  it('events and errors pass through scrub; the canary is nowhere in the database files', async () => {
    const { db, store } = openStore({ scrub });
    // A marker stored unscrubbed proves the byte search below can see stored text.
    const s = await store.create(newSession('github:octo/widgets#1', { cwd: '/work/visible-marker-1234' }));
    const turn = await store.beginTurn(s.id, turnInput);
    await store.appendEvent(turn.id, { type: 'text', text: `my key is ${CANARY}` });
    await store.appendEvent(turn.id, {
      type: 'tool-use',
      id: 't',
      name: 'Bash',
      input: { command: `echo ${CANARY}` },
    });
    await store.appendEvent(turn.id, { type: 'tool-result', id: 't', ok: true, summary: CANARY });
    await store.appendEvent(turn.id, { type: 'error', message: `401 for key ${CANARY}` });
    const finished = await store.finishTurn(
      turn.id,
      end({ status: 'failed', error: `Invalid API key ${CANARY}` }),
    );

    expect(finished.error).toBe('Invalid API key [redacted]');
    const stored = (await store.events(turn.id)).map((e) => e.event);
    expect(stored[0]).toEqual({ type: 'text', text: 'my key is [redacted]' });
    expect(stored[1]).toEqual({
      type: 'tool-use',
      id: 't',
      name: 'Bash',
      input: { command: 'echo [redacted]' },
    });
    expect(stored[2]).toEqual({ type: 'tool-result', id: 't', ok: true, summary: '[redacted]' });
    expect(JSON.stringify(stored)).not.toContain(CANARY);

    db.close();
    const files = [dbPath, `${dbPath}-wal`, `${dbPath}-shm`].filter((f) => existsSync(f));
    const bytes = Buffer.concat(files.map((f) => readFileSync(f)));
    expect(bytes.includes(Buffer.from('visible-marker-1234'))).toBe(true);
    expect(bytes.includes(Buffer.from('[redacted]'))).toBe(true);
    expect(bytes.includes(Buffer.from(CANARY))).toBe(false);
  });
});

describe('recoverLostTurns', () => {
  it('marks only running turns whose owner is dead as failed/lost', async () => {
    const { store: alive } = openStore({ ownerPid: 1001, now: () => new Date('2026-01-01T00:00:00.000Z') });
    const { store: dead } = openStore({ ownerPid: 2002, now: () => new Date('2026-01-01T00:00:00.000Z') });
    const s1 = await alive.create(newSession('github:o/r#1'));
    const s2 = await dead.create(newSession('github:o/r#2'));
    const s3 = await dead.create(newSession('github:o/r#3'));
    const runningAlive = await alive.beginTurn(s1.id, turnInput);
    const runningDead = await dead.beginTurn(s2.id, turnInput);
    const finishedDead = await dead.beginTurn(s3.id, turnInput);
    await dead.finishTurn(finishedDead.id, end());

    const asked: number[] = [];
    const isAlive = (pid: number) => {
      asked.push(pid);
      return pid === 1001;
    };
    const { store: recovering } = openStore({ now: () => new Date('2026-01-02T00:00:00.000Z') });
    expect(await recovering.recoverLostTurns(isAlive)).toBe(1);
    expect(asked.sort()).toEqual([1001, 2002]);

    expect((await recovering.turns(s1.id))[0]).toMatchObject({
      id: runningAlive.id,
      status: 'running',
      endReason: null,
    });
    expect((await recovering.turns(s2.id))[0]).toMatchObject({
      id: runningDead.id,
      status: 'failed',
      endReason: 'lost',
      endedAt: '2026-01-02T00:00:00.000Z',
      usage: null,
    });
    expect((await recovering.turns(s2.id))[0]?.error).toContain('ended without recording its end');
    // A finished turn is never touched.
    expect((await recovering.turns(s3.id))[0]).toMatchObject({ status: 'succeeded', endReason: 'result' });
    // Running it again finds nothing more; the lost session can take a new turn.
    expect(await recovering.recoverLostTurns(isAlive)).toBe(0);
    expect((await recovering.beginTurn(s2.id, turnInput)).seq).toBe(2);
  });

  it('anyTurnOrphaned: only a running turn whose owner is gone makes a reader recover', async () => {
    const { store: daemon } = openStore({ ownerPid: 1001 });
    const { store: reader } = openStore({});
    const isAlive = (pid: number) => pid === 1001;
    expect(await reader.anyTurnOrphaned(isAlive)).toBe(false);
    const s1 = await daemon.create(newSession('github:o/r#1'));
    const s2 = await daemon.create(newSession('github:o/r#2'));
    const t1 = await daemon.beginTurn(s1.id, turnInput);
    await daemon.beginTurn(s2.id, turnInput);
    // Two turns of a live daemon: nothing to recover.
    expect(await reader.anyTurnOrphaned(isAlive)).toBe(false);
    // The daemon died: both are orphans (and recovery would mark them).
    expect(await reader.anyTurnOrphaned(() => false)).toBe(true);
    await daemon.finishTurn(t1.id, end());
    expect(await reader.anyTurnOrphaned(() => false)).toBe(true);
    expect(await reader.recoverLostTurns(() => false)).toBe(1);
    expect(await reader.anyTurnOrphaned(() => false)).toBe(false);
  });
});

describe('migration 4 (session-lost-ended) on a registry created at version 3', () => {
  const V3 = MIGRATIONS.filter((m) => m.version <= 3);

  /** A version-3 registry with one session, one turn and one event, closed again. */
  function registryAtV3(): { sessions: unknown[]; turns: unknown[]; events: unknown[] } {
    const db = openDb(dbPath, V3);
    expect(db.prepare('SELECT MAX(version) AS v FROM schema_migrations').get()).toEqual({ v: 3 });
    // Version 3 cannot hold a lost session: this is what migration 4 changes.
    expect(() =>
      db
        .prepare(
          `INSERT INTO sessions (id, work_item, slug, engine, runner, cwd, status, created_at, updated_at)
           VALUES ('x', 'w', 's', 'claude', 'tmux', '/', 'lost', 'a', 'a')`,
        )
        .run(),
    ).toThrow(/CHECK constraint/);
    db.prepare(
      `INSERT INTO sessions (id, work_item, slug, engine, runner, engine_session_id, engine_session_started, cwd,
         status, usage_baseline, credential_kind, credential_env, created_at, updated_at, closed_at, close_reason,
         tmux_target)
       VALUES ('s-active', 'github:o/r#1', 'github-o-r-1', 'claude', 'tmux', 'es-1', 1, '/work/r', 'active',
         '{"inputTokens":1}', 'api-key', 'ANTHROPIC_API_KEY', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:01.000Z',
         NULL, NULL, 'loop-github-o-r-1'),
              ('s-closed', 'github:o/r#2', 'github-o-r-2', 'codex', 'process', NULL, 0, '/work/r2', 'closed',
         NULL, NULL, NULL, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:02.000Z', '2026-01-01T00:00:02.000Z',
         'issue closed', NULL)`,
    ).run();
    db.prepare(
      `INSERT INTO turns (session_id, seq, prompt_digest, prompt_bytes, status, started_at, meter, owner_pid,
         delivery_id, input_tokens, cost_usd)
       VALUES ('s-active', 1, 'sha256:abc', 12, 'running', '2026-01-01T00:00:03.000Z', 'stream-json', 2002, 'd-1', 5, 0.25)`,
    ).run();
    db.prepare(
      `INSERT INTO turn_events (turn_id, seq, at, type, data)
       VALUES (1, 1, '2026-01-01T00:00:04.000Z', 'text', '{"type":"text","text":"hi"}')`,
    ).run();
    const snapshot = {
      sessions: db.prepare('SELECT * FROM sessions ORDER BY id').all(),
      turns: db.prepare('SELECT * FROM turns ORDER BY id').all(),
      events: db.prepare('SELECT * FROM turn_events ORDER BY turn_id, seq').all(),
    };
    db.close();
    return snapshot;
  }

  it('keeps every row, reaches version 4 with foreign keys on, and now accepts lost/ended', async () => {
    const before = registryAtV3();
    expect(before.sessions).toHaveLength(2);

    const db = openDb(dbPath);
    open.push(db);
    // Version 4 and every later one.
    expect(db.prepare('SELECT MAX(version) AS v FROM schema_migrations').get()).toEqual({
      v: Math.max(...MIGRATIONS.map((m) => m.version)),
    });
    expect(db.prepare('SELECT name FROM schema_migrations WHERE version = 4').get()).toEqual({
      name: 'session-lost-ended',
    });
    // Rows intact, value for value.
    // (Later migrations add columns: the v3 ones are compared, the new ones start empty.)
    const sessions = db.prepare('SELECT * FROM sessions ORDER BY id').all() as Record<string, unknown>[];
    expect(sessions).toMatchObject(before.sessions);
    for (const row of sessions)
      expect([row.payer_id, row.hold, row.budget_raise]).toEqual([null, null, null]);
    // Later migrations add columns (guard, warnings): every column the rows had keeps its value.
    expect(db.prepare('SELECT * FROM turns ORDER BY id').all()).toMatchObject(before.turns);
    expect(db.prepare('SELECT * FROM turn_events ORDER BY turn_id, seq').all()).toEqual(before.events);
    // Enforcement is back on after the rebuild, and the keys still point at the rebuilt table.
    expect(db.pragma('foreign_keys', { simple: true })).toBe(1);
    expect(db.pragma('foreign_key_check')).toEqual([]);
    expect(() =>
      db
        .prepare(
          `INSERT INTO turns (session_id, seq, prompt_digest, prompt_bytes, status, started_at, meter)
           VALUES ('no-such-session', 1, 'd', 1, 'running', 'a', 'none')`,
        )
        .run(),
    ).toThrow(/FOREIGN KEY/);
    expect(() => db.prepare("DELETE FROM sessions WHERE id = 's-active'").run()).toThrow(/FOREIGN KEY/);
    // The old temporary table name is gone.
    expect(db.prepare("SELECT name FROM sqlite_master WHERE name = 'sessions_v4'").all()).toEqual([]);

    const store = new SqliteSessionStore(db, { scrub: (t) => t });
    expect(await store.get('s-active')).toMatchObject({
      workItem: 'github:o/r#1',
      status: 'active',
      engineSessionStarted: true,
      usageBaseline: { inputTokens: 1 },
      tmuxTarget: 'loop-github-o-r-1',
    });
    expect((await store.turns('s-active'))[0]).toMatchObject({
      status: 'running',
      deliveryId: 'd-1',
      costUsd: 0.25,
    });
    expect((await store.events(1)).map((e) => e.event)).toEqual([{ type: 'text', text: 'hi' }]);

    // The partial unique index survived the rebuild: one active session per work item.
    expect((await rejected(() => store.create(newSession('github:o/r#1')))).code).toBe('session-busy');
    expect((await store.markGone('s-active', 'lost', 'tmux session gone')).status).toBe('lost');
    const next = await store.create(newSession('github:o/r#1'));
    expect((await rejected(() => store.create(newSession('github:o/r#1')))).code).toBe('session-busy');
    expect((await store.markGone(next.id, 'ended', 'SessionEnd')).status).toBe('ended');
    expect((await store.list({ workItem: 'github:o/r#1' })).map((s) => s.status).sort()).toEqual([
      'ended',
      'lost',
    ]);
    expect(db.pragma('foreign_key_check')).toEqual([]);
  });

  it('a version-3 registry with a dangling turn is refused and left at version 3 (foreign_key_check)', () => {
    registryAtV3();
    const v3 = openDb(dbPath, V3);
    v3.pragma('foreign_keys = OFF');
    v3.prepare(
      `INSERT INTO turns (session_id, seq, prompt_digest, prompt_bytes, status, started_at, meter)
       VALUES ('vanished', 1, 'd', 1, 'failed', 'a', 'none')`,
    ).run();
    v3.close();

    const error = thrown(() => openDb(dbPath));
    expect(error.code).toBe('store-failed');
    expect(error.message).toMatch(/migration 4 \(session-lost-ended\) would break 1 foreign key/);

    // Rolled back whole: still version 3, the old sessions table, and enforcement on again.
    const db = openDb(dbPath, V3);
    open.push(db);
    expect(db.prepare('SELECT MAX(version) AS v FROM schema_migrations').get()).toEqual({ v: 3 });
    expect(db.prepare("SELECT name FROM sqlite_master WHERE name = 'sessions_v4'").all()).toEqual([]);
    expect(db.prepare('SELECT COUNT(*) AS n FROM sessions').get()).toEqual({ n: 2 });
    expect(() => db.prepare("UPDATE sessions SET status = 'lost' WHERE id = 's-active'").run()).toThrow(
      /CHECK constraint/,
    );
  });

  it('foreign keys stay on after migrating a fresh file through a table-rebuilding migration', () => {
    const db = openDb(dbPath);
    open.push(db);
    expect(db.pragma('foreign_keys', { simple: true })).toBe(1);
    expect(() =>
      db
        .prepare("INSERT INTO turn_events (turn_id, seq, at, type, data) VALUES (999, 1, 'a', 't', '{}')")
        .run(),
    ).toThrow(/FOREIGN KEY/);
  });
});

describe('markGone', () => {
  for (const status of ['lost', 'ended'] as const) {
    it(`active → ${status}, with when and why; it sticks; a new session may start; no turn on the old one`, async () => {
      const times = ['2026-01-01T00:00:00.000Z', '2026-01-01T00:00:07.000Z', '2026-01-01T00:00:09.000Z'];
      let i = 0;
      const { store } = openStore({ now: () => new Date(times[Math.min(i++, times.length - 1)] as string) });
      const s = await store.create(newSession('github:o/r#1', { runner: 'tmux' }));
      const gone = await store.markGone(s.id, status, 'tmux session loop-github-o-r-1 is gone');
      expect(gone).toMatchObject({
        id: s.id,
        status,
        closedAt: times[1],
        closeReason: 'tmux session loop-github-o-r-1 is gone',
        updatedAt: times[1],
      });
      expect(await store.get(s.id)).toEqual(gone);

      // Neither a second markGone nor a close changes a session that is no longer active.
      expect(await store.markGone(s.id, status === 'lost' ? 'ended' : 'lost', 'again')).toEqual(gone);
      expect(await store.close(s.id, 'closed later')).toEqual(gone);

      expect(await store.findActive('github:o/r#1')).toBeUndefined();
      expect((await store.list({ status })).map((x) => x.id)).toEqual([s.id]);

      const error = await rejected(() => store.beginTurn(s.id, turnInput));
      expect(error.code).toBe('session-closed');
      expect(error.message).toContain(status);
      expect(error.message).toContain(s.id);
      expect(await store.turns(s.id)).toEqual([]);

      const fresh = await store.create(newSession('github:o/r#1', { runner: 'tmux' }));
      expect((await store.findActive('github:o/r#1'))?.id).toBe(fresh.id);
      expect((await store.beginTurn(fresh.id, turnInput)).seq).toBe(1);
    });
  }

  it('a closed session is not turned into a lost one; an unknown id → session-missing', async () => {
    const { store } = openStore();
    const s = await store.create(newSession());
    const closed = await store.close(s.id, 'issue closed');
    expect(await store.markGone(s.id, 'lost', 'x')).toEqual(closed);
    expect((await rejected(() => store.markGone('nope', 'lost', 'x'))).code).toBe('session-missing');
  });

  it('beginTurn on a closed session names "closed"', async () => {
    const { store } = openStore();
    const s = await store.create(newSession());
    await store.close(s.id, 'done');
    expect((await rejected(() => store.beginTurn(s.id, turnInput))).message).toContain('closed');
  });
});

describe('recoverLostTurns with skipRunners', () => {
  it('leaves a tmux turn whose owner died running, and marks a process turn lost', async () => {
    const { store: dead } = openStore({ ownerPid: 2002 });
    const tmux = await dead.create(newSession('github:o/r#1', { runner: 'tmux' }));
    const proc = await dead.create(newSession('github:o/r#2', { runner: 'process' }));
    const tmuxTurn = await dead.beginTurn(tmux.id, turnInput);
    const procTurn = await dead.beginTurn(proc.id, turnInput);

    const { store } = openStore();
    const lost: number[] = [];
    expect(
      await store.recoverLostTurns(
        () => false,
        (t) => lost.push(t.id),
        { skipRunners: ['tmux'] },
      ),
    ).toBe(1);
    expect(lost).toEqual([procTurn.id]);
    expect((await store.turns(tmux.id))[0]).toMatchObject({
      id: tmuxTurn.id,
      status: 'running',
      endReason: null,
    });
    expect((await store.turns(proc.id))[0]).toMatchObject({
      id: procTurn.id,
      status: 'failed',
      endReason: 'lost',
    });
    // Without the skip list the tmux turn is lost too.
    expect(await store.recoverLostTurns(() => false)).toBe(1);
    expect((await store.turns(tmux.id))[0]).toMatchObject({ status: 'failed', endReason: 'lost' });
  });
});

describe('orphan turns and adoption', () => {
  it('orphanTurns: only running turns with a dead owner, of sessions on the given runners; it changes nothing', async () => {
    const { store: dead } = openStore({ ownerPid: 2002 });
    const { store: alive } = openStore({ ownerPid: 1001 });
    const { store: mine } = openStore(); // owner: this very pid (an earlier life of it)
    const a = await dead.create(newSession('github:o/r#1', { runner: 'tmux' }));
    const b = await alive.create(newSession('github:o/r#2', { runner: 'tmux' }));
    const c = await dead.create(newSession('github:o/r#3', { runner: 'tmux' }));
    const d = await dead.create(newSession('github:o/r#4', { runner: 'process' }));
    const e = await mine.create(newSession('github:o/r#5', { runner: 'tmux' }));
    const orphan = await dead.beginTurn(a.id, turnInput);
    await alive.beginTurn(b.id, turnInput);
    await dead.finishTurn((await dead.beginTurn(c.id, turnInput)).id, end());
    await dead.beginTurn(d.id, turnInput);
    const ownOrphan = await mine.beginTurn(e.id, turnInput);

    const { store } = openStore();
    const isAlive = (pid: number) => pid === 1001;
    const found = await store.orphanTurns(isAlive, ['tmux']);
    expect(found.map((t) => t.id)).toEqual([orphan.id, ownOrphan.id]);
    expect(found[0]).toMatchObject({ sessionId: a.id, status: 'running' });
    expect((await store.orphanTurns(isAlive, ['process'])).map((t) => t.sessionId)).toEqual([d.id]);
    expect(await store.orphanTurns(isAlive, [])).toEqual([]);
    // Looking changes nothing.
    expect((await store.turns(a.id))[0]?.status).toBe('running');
  });

  it('markTurnLost: failed / lost / error, only for a running turn', async () => {
    const { store } = openStore({ now: () => new Date('2026-01-03T00:00:00.000Z') });
    const s = await store.create(newSession());
    const turn = await store.beginTurn(s.id, turnInput);
    await store.markTurnLost(turn.id, 'could not be adopted: tmux session gone');
    const lost = (await store.turns(s.id))[0];
    expect(lost).toMatchObject({
      status: 'failed',
      endReason: 'lost',
      endedAt: '2026-01-03T00:00:00.000Z',
      error: 'could not be adopted: tmux session gone',
      usage: null,
    });
    // What it used was not measured: it is an unmetered run in the ledger, once.
    await store.markTurnLost(turn.id, 'again');
    const { db } = openStore();
    expect(db.prepare('SELECT turn_id, engine, runner, reason FROM unmetered_drives').all()).toEqual([
      {
        turn_id: turn.id,
        engine: s.engine,
        runner: s.runner,
        reason: 'lost: could not be adopted: tmux session gone',
      },
    ]);
    // A finished turn keeps its end.
    const next = await store.beginTurn(s.id, turnInput);
    const finished = await store.finishTurn(next.id, end());
    await store.markTurnLost(next.id, 'late');
    expect((await store.turns(s.id))[1]).toEqual(finished);
    expect((await store.turns(s.id))[0]).toEqual(lost);
  });

  it('adoptTurn makes this process the owner of a running turn, and leaves a finished one alone', async () => {
    const { db, store: dead } = openStore({ ownerPid: 2002 });
    const s1 = await dead.create(newSession('github:o/r#1'));
    const s2 = await dead.create(newSession('github:o/r#2'));
    const running = await dead.beginTurn(s1.id, turnInput);
    const finished = await dead.beginTurn(s2.id, turnInput);
    await dead.finishTurn(finished.id, end());
    const ownerOf = (id: number) =>
      (db.prepare('SELECT owner_pid FROM turns WHERE id = ?').get(id) as { owner_pid: number }).owner_pid;
    expect(ownerOf(running.id)).toBe(2002);

    const { store } = openStore();
    await store.adoptTurn(running.id);
    await store.adoptTurn(finished.id);
    expect(ownerOf(running.id)).toBe(process.pid);
    expect(ownerOf(finished.id)).toBe(2002);
    expect((await store.turns(s1.id))[0]?.status).toBe('running');
  });

  it('clearEvents removes one turn’s events and numbering restarts at 1', async () => {
    const { store } = openStore();
    const s1 = await store.create(newSession('github:o/r#1'));
    const s2 = await store.create(newSession('github:o/r#2'));
    const t1 = await store.beginTurn(s1.id, turnInput);
    const t2 = await store.beginTurn(s2.id, turnInput);
    for (const text of ['a', 'b', 'c']) await store.appendEvent(t1.id, { type: 'text', text });
    await store.appendEvent(t2.id, { type: 'text', text: 'other' });

    await store.clearEvents(t1.id);
    expect(await store.events(t1.id)).toEqual([]);
    expect((await store.events(t2.id)).map((e) => e.seq)).toEqual([1]);

    // The same store instance numbered t1's events already: its cached counter is reset too.
    await store.appendEvent(t1.id, { type: 'text', text: 'replayed' });
    expect((await store.events(t1.id)).map((e) => [e.seq, (e.event as { text: string }).text])).toEqual([
      [1, 'replayed'],
    ]);
    await store.appendEvent(t2.id, { type: 'text', text: 'other 2' });
    expect((await store.events(t2.id)).map((e) => e.seq)).toEqual([1, 2]);
  });
});
