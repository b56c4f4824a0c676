/**
 * Two hosts sharing one fresh PostgreSQL database, for the fencing and recovery tests: each host a
 * pool of its own (own connections, nothing shared in memory), its real `PgHostStore` leases (short
 * ones, expiry waited for in real time), and a `Fence` kept by hand as a lease keeper would.
 */
import type { Fence, FenceRefusal, HostInfo } from '../../../src/core/ports/hosts.js';
import type { NewSession, TurnEnd } from '../../../src/core/ports/sessions.js';
import { PgHostStore } from '../../../src/store/postgres/hosts.js';
import { PgInbox } from '../../../src/store/postgres/inbox.js';
import { openPg } from '../../../src/store/postgres/migrate.js';
import type { Pg } from '../../../src/store/postgres/pg.js';
import { PgSessionStore } from '../../../src/store/postgres/sessions.js';
import { freshDatabase } from '../../helpers/postgres.js';

export const LEASE_SECONDS = 1;
export const sleep = (ms: number) => new Promise((go) => setTimeout(go, ms));

/** The epochs a host holds, set by hand (a lease keeper's work in the daemon). */
export class HandFence implements Fence {
  readonly epochs = new Map<string, number>();
  /** What the stores said they did not write (a keeper warns of each key once). */
  readonly refusals: FenceRefusal[] = [];
  constructor(readonly host: string) {}
  epochOf(workItem: string): number | undefined {
    return this.epochs.get(workItem);
  }
  refused(refusal: FenceRefusal): void {
    this.refusals.push(refusal);
  }
}

export interface Host {
  id: string;
  db: Pg;
  hosts: PgHostStore;
  fence: HandFence;
  sessions: PgSessionStore;
  inbox: PgInbox;
  incarnation: number;
  /** Take the lease of a work item (short), and note its epoch in the fence. */
  acquire(workItem: string): Promise<number>;
}

const info = (id: string): HostInfo => ({
  id,
  labels: ['tmux'],
  engines: ['claude'],
  capacity: 2,
  address: null,
});

export async function twoHosts(): Promise<{ a: Host; b: Host; url: string; close(): Promise<void> }> {
  const database = await freshDatabase();
  const open = async (id: string, ownerPid: number): Promise<Host> => {
    const db = await openPg(database.url, { max: 4 });
    const hosts = new PgHostStore(db);
    const fence = new HandFence(id);
    const incarnation = await hosts.register(info(id));
    return {
      id,
      db,
      hosts,
      fence,
      incarnation,
      sessions: new PgSessionStore(db, { scrub: (t) => t, fence, ownerPid }),
      inbox: new PgInbox(db, { scrub: (t) => t, fence }),
      async acquire(workItem) {
        const lease = await hosts.acquire(workItem, id, incarnation, LEASE_SECONDS);
        if (!lease) throw new Error(`${id} could not take ${workItem}`);
        fence.epochs.set(workItem, lease.epoch);
        return lease.epoch;
      },
    };
  };
  const a = await open('a', 900001);
  const b = await open('b', 900002);
  return {
    a,
    b,
    url: database.url,
    async close() {
      await a.db.close();
      await b.db.close();
      await database.drop();
    },
  };
}

export const newSession = (workItem: string, extra: Partial<NewSession> = {}): NewSession => ({
  workItem,
  slug: workItem.replace(/[^a-z0-9]+/g, '-'),
  engine: 'claude',
  runner: 'process',
  engineSessionId: null,
  cwd: '/work/widgets',
  credentialKind: null,
  credentialEnv: null,
  ...extra,
});

export const turnInput = (deliveryId?: string) => ({
  promptDigest: 'sha256:abc',
  promptBytes: 12,
  meter: 'stream-json' as const,
  ...(deliveryId === undefined ? {} : { deliveryId }),
});

export const turnEnd = (): TurnEnd => ({
  status: 'succeeded',
  endReason: 'result',
  endedAt: '2026-01-01T00:00:00.000Z',
  exitCode: 0,
  exitSignal: null,
  model: null,
  usage: null,
  costUsd: null,
  error: null,
});
