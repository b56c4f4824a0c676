/**
 * One identity per work item in the registry: the slug a session takes (planSlug, pure), the
 * refusal of a slug another work item holds (on a real SQLite file), and migration 12 on a registry
 * created at version 11 with the rows the old rules allowed.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LoopError } from '../../src/core/errors.js';
import type { NewSession } from '../../src/core/ports/sessions.js';
import { parseWorkItem, workItemSlug } from '../../src/core/work-item.js';
import { planSlug } from '../../src/sessions/slug.js';
import { type Db, openDb } from '../../src/store/db.js';
import { MIGRATIONS } from '../../src/store/migrations/index.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sessions.js';
import { rejected, thrown } from '../helpers/check.js';

const slugOf = (text: string) => workItemSlug(parseWorkItem(text));
const A = 'github:octo/a-b#1';
const B = 'github:octo/a_b#1';

describe('planSlug (pure)', () => {
  it('a work item with no sessions takes its own slug, whatever the case it is named in', () => {
    expect(planSlug(A, [])).toBe(slugOf(A));
    expect(planSlug('github:Octo/A-B#1', [])).toBe(slugOf(A));
    expect(planSlug(B, [{ workItem: A, slug: slugOf(A) }])).toBe(slugOf(B));
  });

  it("keeps the latest session's slug (an old-style one too) while no other work item holds it", () => {
    const uses = [
      { workItem: A, slug: 'github-octo-a-b-1' },
      { workItem: A, slug: 'github-octo-a-b-1-0000000000' },
    ];
    expect(planSlug(A, uses)).toBe('github-octo-a-b-1');
    expect(planSlug('github:OCTO/A-B#1', uses)).toBe('github-octo-a-b-1');
  });

  it('an old slug two work items shared is given up: each takes its own', () => {
    const uses = [
      { workItem: B, slug: 'github-octo-a-b-1' },
      { workItem: A, slug: 'github-octo-a-b-1' },
    ];
    expect(planSlug(A, uses)).toBe(slugOf(A));
    expect(planSlug(B, uses)).toBe(slugOf(B));
    expect(slugOf(A)).not.toBe(slugOf(B));
  });

  it('its own slug held by another work item is refused, naming both', () => {
    const error = thrown(() => planSlug(A, [{ workItem: B, slug: slugOf(A) }]));
    expect(error).toBeInstanceOf(LoopError);
    expect(error.code).toBe('slug-collision');
    expect(error.message).toBe(
      `the slug ${slugOf(A)} of ${A} already belongs to ${B}: refusing to share its worktree, tmux session and state directory`,
    );
    expect(error.hint).toContain(B);
  });
});

let dir: string;
let db: Db;
let store: SqliteSessionStore;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'the-loop-identity-'));
  db = openDb(join(dir, 'registry.sqlite'));
  store = new SqliteSessionStore(db, { scrub: (t) => t });
});

afterEach(() => {
  if (db.open) db.close();
  rmSync(dir, { recursive: true, force: true });
});

const session = (workItem: string, slug: string): NewSession => ({
  workItem,
  slug,
  engine: 'claude',
  runner: 'process',
  engineSessionId: null,
  cwd: '/work',
  credentialKind: null,
  credentialEnv: null,
});

describe('the registry: one work item per slug', () => {
  it('stores and finds work items in their canonical case', async () => {
    const created = await store.create(
      session('github:Octo/A-B#1', await store.slugFor('github:Octo/A-B#1')),
    );
    expect(created).toMatchObject({ workItem: A, slug: slugOf(A) });
    expect((await store.findActive('github:OCTO/a-b#1'))?.id).toBe(created.id);
    expect((await store.list({ workItem: 'github:octo/A-B#1' })).map((s) => s.id)).toEqual([created.id]);
    // Another case is the same work item: one active session.
    expect((await rejected(() => store.create(session(A, slugOf(A))))).code).toBe('session-busy');
    expect(await store.findActive(B)).toBeUndefined();
  });

  it('a work item keeps its slug across sessions; a look-alike gets its own', async () => {
    const first = await store.create(session(A, await store.slugFor(A)));
    await store.close(first.id, 'done');
    expect(await store.slugFor('github:Octo/A-B#1')).toBe(first.slug);
    const other = await store.create(session(B, await store.slugFor(B)));
    expect(other.slug).not.toBe(first.slug);
    expect((await store.list({ status: 'active' })).map((s) => s.workItem)).toEqual([B]);
  });

  it('a forced collision is refused on create and on slugFor, and nothing is written', async () => {
    // A row that holds A's slug for another work item (a digest collision, or a forged row).
    const squatter = await store.create(session(B, slugOf(A)));
    const onCreate = await rejected(() => store.create(session(A, slugOf(A))));
    expect(onCreate.code).toBe('slug-collision');
    expect(onCreate.message).toContain(`already belongs to ${B}`);
    const onPlan = await rejected(() => store.slugFor(A));
    expect(onPlan.code).toBe('slug-collision');
    expect(onPlan.message).toContain(`the slug ${slugOf(A)} of ${A}`);
    expect((await store.list()).map((s) => s.id)).toEqual([squatter.id]);
  });
});

describe('migration 12 (work-item-identity) on a registry created at version 11', () => {
  const V11 = MIGRATIONS.filter((m) => m.version <= 11);
  const at = (s: number) => `2026-01-01T00:00:${String(s).padStart(2, '0')}.000Z`;

  /** What the old rules let a registry hold: case variants and shared slugs, active at once. */
  function registryAtV11(path: string): void {
    const old = openDb(path, V11);
    expect(old.prepare('SELECT MAX(version) AS v FROM schema_migrations').get()).toEqual({ v: 11 });
    const insert = old.prepare(
      `INSERT INTO sessions (id, work_item, slug, engine, runner, cwd, status, tmux_target, created_at, updated_at)
       VALUES (?, ?, ?, 'claude', 'tmux', ?, ?, ?, ?, ?)`,
    );
    const rows: [string, string, string, string, string, number][] = [
      // octo/a-b#1, then the same work item in other letter case: two active sessions, one slug.
      ['s-ab', 'github:octo/a-b#1', 'github-octo-a-b-1', '/wt/github-octo-a-b-1', 'active', 1],
      ['s-AB', 'github:Octo/A-B#1', 'github-octo-a-b-1', '/wt/github-octo-a-b-1', 'active', 2],
      // octo/a_b#1 on the same slug: it ran in a-b's worktree.
      ['s-a_b', 'github:octo/a_b#1', 'github-octo-a-b-1', '/wt/github-octo-a-b-1', 'active', 3],
      // An ordinary session (display case) and a closed one: they keep working / stay as they were.
      ['s-w', 'github:Acme/Widgets#15', 'github-acme-widgets-15', '/wt/github-acme-widgets-15', 'active', 4],
      ['s-old', 'github:acme/widgets#9', 'github-acme-widgets-9', '/wt/github-acme-widgets-9', 'closed', 5],
    ];
    for (const [id, workItem, slug, cwd, status, s] of rows)
      insert.run(id, workItem, slug, cwd, status, `loop-${slug}`, at(s), at(s));
    old
      .prepare(
        `INSERT INTO deliveries (id, source, event, received_at, body, status, route, work_item, updated_at)
         VALUES ('d-1', 'github', 'issues', ?, '{}', 'done', 'start', 'github:Acme/Widgets#15', ?)`,
      )
      .run(at(4), at(4));
    old
      .prepare(
        `INSERT INTO unmetered_drives (at, session_id, work_item, reason) VALUES (?, 's-w', 'github:Acme/Widgets#15', 'x')`,
      )
      .run(at(4));
    old
      .prepare(
        `INSERT INTO usage_ledger (meter, source_id, at, session_id, work_item, input_tokens, output_tokens,
           cache_read_tokens, cache_creation_tokens, reasoning_tokens, payer_kind, recorded_at)
         VALUES ('transcript', 'r-1', ?, 's-w', 'github:Acme/Widgets#15', 1, 2, 0, 0, 0, 'api-key', ?)`,
      )
      .run(at(4), at(4));
    old
      .prepare(
        `INSERT INTO gateway_tokens (hash, session_id, created_at) VALUES ('h-AB', 's-AB', ?), ('h-w', 's-w', ?)`,
      )
      .run(at(2), at(4));
    old.close();
  }

  it('keeps every row and slug, leaves one active session per identity, and lower-cases work items', () => {
    const path = join(dir, 'v11.sqlite');
    registryAtV11(path);
    const migrated = openDb(path);
    try {
      expect(migrated.prepare('SELECT name FROM schema_migrations WHERE version = 12').get()).toEqual({
        name: 'work-item-identity',
      });
      const rows = migrated
        .prepare(
          'SELECT id, work_item, slug, status, close_reason, tmux_target FROM sessions ORDER BY created_at',
        )
        .all() as {
        id: string;
        work_item: string;
        slug: string;
        status: string;
        close_reason: string | null;
      }[];
      expect(rows.map((r) => [r.id, r.work_item, r.slug, r.status])).toEqual([
        ['s-ab', 'github:octo/a-b#1', 'github-octo-a-b-1', 'active'],
        ['s-AB', 'github:octo/a-b#1', 'github-octo-a-b-1', 'closed'],
        ['s-a_b', 'github:octo/a_b#1', 'github-octo-a-b-1', 'closed'],
        ['s-w', 'github:acme/widgets#15', 'github-acme-widgets-15', 'active'],
        ['s-old', 'github:acme/widgets#9', 'github-acme-widgets-9', 'closed'],
      ]);
      const reason = (id: string) => rows.find((r) => r.id === id)?.close_reason;
      expect(reason('s-AB')).toBe(
        'closed when work items became case-insensitive: session s-ab of the same work item stays active',
      );
      expect(reason('s-a_b')).toBe(
        'closed when slugs became one per work item: it shared github-octo-a-b-1 with github:octo/a-b#1 (session s-ab), which stays active',
      );
      expect(reason('s-old')).toBeNull();
      // Other tables hold the canonical work item too; the closed session's token is revoked.
      for (const table of ['deliveries', 'unmetered_drives', 'usage_ledger'])
        expect(migrated.prepare(`SELECT DISTINCT work_item FROM ${table}`).all(), table).toEqual([
          { work_item: 'github:acme/widgets#15' },
        ]);
      const tokens = migrated.prepare('SELECT hash, revoked_at FROM gateway_tokens ORDER BY hash').all() as {
        hash: string;
        revoked_at: string | null;
      }[];
      expect(tokens.map((t) => [t.hash, t.revoked_at === null])).toEqual([
        ['h-AB', false],
        ['h-w', true],
      ]);
      expect(
        migrated.prepare("SELECT 1 FROM sqlite_master WHERE name = 'sessions_slug'").get(),
      ).toBeDefined();
    } finally {
      migrated.close();
    }
  });

  it('existing sessions keep working: found in any case, by their old slug, and new sessions do not collide', async () => {
    const path = join(dir, 'v11.sqlite');
    registryAtV11(path);
    const migrated = openDb(path);
    const s = new SqliteSessionStore(migrated, { scrub: (t) => t });
    try {
      // The active session of a work item is found by any spelling, with its old slug and tmux target.
      expect(await s.findActive('github:acme/widgets#15')).toMatchObject({
        id: 's-w',
        slug: 'github-acme-widgets-15',
        tmuxTarget: 'loop-github-acme-widgets-15',
      });
      expect((await s.findActive('github:Octo/A-B#1'))?.id).toBe('s-ab');
      // The closed work item gets its old slug back (its worktree and branch are still there)…
      expect(await s.slugFor('github:acme/widgets#9')).toBe('github-acme-widgets-9');
      // …but octo/a_b#1 gives up the slug it shared: its next session has one of its own.
      expect(await s.slugFor(B)).toBe(slugOf(B));
      const fresh = await s.create(session(B, await s.slugFor(B)));
      expect(fresh.slug).toBe(slugOf(B));
      expect((await s.list({ status: 'active' })).map((r) => [r.workItem, r.slug])).toEqual([
        [B, slugOf(B)],
        ['github:acme/widgets#15', 'github-acme-widgets-15'],
        [A, 'github-octo-a-b-1'],
      ]);
    } finally {
      migrated.close();
    }
  });
});
