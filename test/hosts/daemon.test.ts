/**
 * The daemon on a PostgreSQL store (a real `the-loop serve` process): it registers its host with
 * what it offers (labels, the engines whose binaries resolve, capacity, address), takes the lease of
 * a new work item placement gives it and runs its delivery, and leaves on shutdown (status down, its
 * leases ended).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { PgHostStore } from '../../src/store/postgres/hosts.js';
import { PgInbox } from '../../src/store/postgres/inbox.js';
import { openPg } from '../../src/store/postgres/migrate.js';
import type { Pg } from '../../src/store/postgres/pg.js';
import { fakeEngineConfig } from '../helpers/cli.js';
import { startDaemonProcess } from '../helpers/daemon.js';
import { freshDatabase } from '../helpers/postgres.js';

const WI = 'github:octo/widgets#7';
let root: string;
let database: Awaited<ReturnType<typeof freshDatabase>>;
let db: Pg;

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'the-loop-hosts-daemon-'));
  database = await freshDatabase();
  db = await openPg(database.url, { max: 3 });
  writeFileSync(
    join(root, 'config.yaml'),
    stringify({
      ...fakeEngineConfig(join(root, 'engine-state')),
      dataDir: 'data',
      webhook: { secret: 'test-webhook-secret-0123456789abcdef' },
      dispatch: { pollSeconds: 0.2 },
      store: { kind: 'postgres', url: 'env:THE_LOOP_DATABASE_URL', host: 'host-a', labels: ['gpu'] },
    }),
  );
}, 60_000);

afterAll(async () => {
  await db?.close();
  await database?.drop();
  rmSync(root, { recursive: true, force: true });
});

async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 20_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

it('registers, leases and runs a new work item, and leaves on shutdown', async () => {
  const hosts = new PgHostStore(db);
  const daemon = await startDaemonProcess({
    cwd: root,
    env: { THE_LOOP_CONFIG: join(root, 'config.yaml'), THE_LOOP_DATABASE_URL: database.url },
  });
  try {
    const [host] = await hosts.list();
    expect(host).toMatchObject({ id: 'host-a', status: 'up', capacity: 2, address: 'host-a' });
    expect(host?.engines).toContain('fake');
    expect(host?.labels).toContain('gpu');
    const inbox = new PgInbox(db, { scrub: (t) => t });
    await inbox.accept({
      id: 'd1',
      source: 'manual',
      event: 'manual',
      action: null,
      body: '{}',
      routed: {
        action: 'start',
        workItem: WI,
        repo: 'octo/widgets',
        prompt: 'hello',
        engine: 'fake',
        runner: 'process',
        repoPath: root,
        workspace: 'checkout',
        author: 'me',
        trigger: 'manual',
      },
    });
    const status = await until('the delivery to settle', async () => {
      const d = await inbox.get('d1');
      return d?.status === 'done' || d?.status === 'failed' ? d.status : undefined;
    });
    expect(status, daemon.output()).toBe('done');
    // Its session is active: the lease stays with this host.
    expect(await hosts.lease(WI)).toMatchObject({ hostId: 'host-a', epoch: 1, ended: false });
  } finally {
    expect(await daemon.stop()).toBe(0);
  }
  const [after] = await hosts.list();
  expect(after?.status).toBe('down');
  expect((await hosts.lease(WI))?.ended).toBe(true);
}, 60_000);
