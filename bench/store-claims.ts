/**
 * Claim latency at the store level for bench/store.ts: an inbox filled with N queued deliveries over
 * M work items (`Inbox.acceptMany`, in batches), then `Inbox.applyClaims` passes (the dispatcher's one
 * write per pass), each claiming the head of every line (M claims); the claimed deliveries are then
 * finished (not timed) so the next pass claims the next head. Each round gets a store of its own: a
 * new SQLite file (`openDb`, the daemon's settings) or a new PostgreSQL database (`openPg`, migrated).
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import type { Claim, Inbox, NewDelivery } from '../src/core/ports/inbox.js';
import type { Cluster } from '../test/helpers/postgres.js';
import type { StoreKind } from './store-daemon.js';

export interface ClaimRun {
  /** Wall time of each applyClaims pass, ms. */
  passMs: number[];
  /** Each pass's time divided by its claims, once per claim, ms. */
  claimMs: number[];
  /** Claims asked that were not won (must be 0). */
  lost: number;
}

interface OpenInbox {
  inbox: Inbox;
  close(): Promise<void>;
}

const ACCEPT_BATCH = 500;

function deliveryOf(id: string, workItem: string): NewDelivery {
  return {
    id,
    source: 'github',
    event: 'issue_comment',
    action: 'created',
    body: JSON.stringify({ delivery: id, comment: { body: '@the-loop please look' } }),
    routed: {
      action: 'deliver',
      workItem,
      repo: 'acme/widgets',
      prompt: 'the prompt',
      engine: '',
      runner: '',
      repoPath: '/work/widgets',
      workspace: 'checkout',
      author: 'octocat',
      trigger: 'comment',
    },
  };
}

/** Fill the inbox, then claim line heads pass by pass until every delivery ran. */
export async function claimRound(inbox: Inbox, deliveries: number, items: number): Promise<ClaimRun> {
  const lines: string[][] = Array.from({ length: items }, () => []);
  const batch: NewDelivery[] = [];
  for (let i = 0; i < deliveries; i++) {
    const item = i % items;
    const id = `claim-${i}`;
    lines[item]?.push(id);
    batch.push(deliveryOf(id, `github:acme/widgets#${item + 1}`));
    if (batch.length === ACCEPT_BATCH || i === deliveries - 1) {
      await inbox.acceptMany(batch.splice(0));
    }
  }
  const run: ClaimRun = { passMs: [], claimMs: [], lost: 0 };
  for (let pass = 0; ; pass++) {
    const claims: Claim[] = [];
    lines.forEach((line, item) => {
      const id = line[pass];
      if (id !== undefined)
        claims.push({
          deliveryId: id,
          workItem: `github:acme/widgets#${item + 1}`,
          action: 'deliver',
          source: 'github',
        });
    });
    if (claims.length === 0) break;
    const started = performance.now();
    const won = await inbox.applyClaims({ claims, held: [], ignored: [] });
    const ms = performance.now() - started;
    run.passMs.push(ms);
    for (let k = 0; k < claims.length; k++) run.claimMs.push(ms / claims.length);
    run.lost += claims.length - won.length;
    for (const c of won) await inbox.finish(c.deliveryId, { status: 'done', turnId: null, error: null });
  }
  return run;
}

/** A new SQLite registry in `dir`, opened as the daemon opens it. */
export async function openSqliteInbox(dir: string, round: number): Promise<OpenInbox> {
  const { openDb } = await import('../src/store/db.js');
  const { SqliteInbox } = await import('../src/store/sqlite/inbox.js');
  const db = openDb(join(dir, `claims-${round}.db`));
  return {
    inbox: new SqliteInbox(db, {}),
    close: async () => {
      if (db.open) db.close();
    },
  };
}

async function admin<T>(cluster: Cluster, body: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: cluster.url('postgres') });
  await client.connect();
  try {
    return await body(client);
  } finally {
    await client.end();
  }
}

/** A new database of the cluster, named by the caller's purpose; `drop` removes it. */
export async function createDatabase(
  cluster: Cluster,
  purpose: string,
): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `bench_${purpose}_${randomBytes(4).toString('hex')}`;
  await admin(cluster, (c) => c.query(`CREATE DATABASE ${name}`));
  return {
    url: cluster.url(name),
    drop: () => admin(cluster, (c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => {}),
  };
}

/** A new PostgreSQL database, migrated, with the inbox over it. */
export async function openPgInbox(cluster: Cluster): Promise<OpenInbox> {
  const { openPg } = await import('../src/store/postgres/migrate.js');
  const { PgInbox } = await import('../src/store/postgres/inbox.js');
  const database = await createDatabase(cluster, 'claims');
  const db = await openPg(database.url, { max: 10 });
  return {
    inbox: new PgInbox(db, {}),
    close: async () => {
      await db.close();
      await database.drop();
    },
  };
}

/** One round of one store, on a store of its own. */
export async function claimRoundOf(
  kind: StoreKind,
  where: { dir: string; cluster: Cluster },
  round: number,
  size: { deliveries: number; items: number },
): Promise<ClaimRun> {
  const open = kind === 'sqlite' ? await openSqliteInbox(where.dir, round) : await openPgInbox(where.cluster);
  try {
    return await claimRound(open.inbox, size.deliveries, size.items);
  } finally {
    await open.close();
  }
}

/** The settings that decide what a commit costs, as each store runs them. */
export async function durabilitySettings(where: { dir: string; cluster: Cluster }): Promise<string> {
  const pgSettings = await admin(where.cluster, async (c) => {
    const names = ['fsync', 'synchronous_commit', 'full_page_writes', 'wal_sync_method', 'commit_delay'];
    const shown: string[] = [];
    for (const name of names) {
      const r = await c.query(`SHOW ${name}`);
      shown.push(`${name}=${String(Object.values(r.rows[0] ?? {})[0])}`);
    }
    return shown.join(' ');
  });
  const { openDb } = await import('../src/store/db.js');
  const db = openDb(join(where.dir, 'settings.db'));
  try {
    const sync = ['OFF', 'NORMAL', 'FULL', 'EXTRA'][Number(db.pragma('synchronous', { simple: true }))];
    const journal = String(db.pragma('journal_mode', { simple: true }));
    return `PostgreSQL: ${pgSettings}; SQLite (openDb, as the daemon): synchronous=${sync} journal_mode=${journal}`;
  } finally {
    db.close();
  }
}
