/**
 * The port contract suites (test/store/contract/) against the SQLite store: a registry file in a
 * temporary directory, the stores built over it the way the composition root builds them
 * (main-base.ts, and main.ts for the inbox: no one function builds them all), a second connection to
 * the same file for another process, the file reopened for a restart.
 */
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { type Db, openDb } from '../../../src/store/db.js';
import { SqliteActStore } from '../../../src/store/sqlite/acts.js';
import { SqliteBudgets } from '../../../src/store/sqlite/budgets.js';
import { SqliteDriveAudit } from '../../../src/store/sqlite/drive-audit.js';
import { SqliteGithubStatus } from '../../../src/store/sqlite/github-status.js';
import { SqliteInbox } from '../../../src/store/sqlite/inbox.js';
import { SqliteLedgerStore } from '../../../src/store/sqlite/ledger.js';
import { SqliteScanCursors } from '../../../src/store/sqlite/scan-files.js';
import { SqliteSessionStore } from '../../../src/store/sqlite/sessions.js';
import { SqliteTokenStore } from '../../../src/store/sqlite/tokens.js';
import { actsContract } from '../contract/acts.contract.js';
import { budgetsContract } from '../contract/budgets.contract.js';
import { cursorsContract } from '../contract/cursors.contract.js';
import { drivesContract } from '../contract/drives.contract.js';
import {
  type Ports,
  type StoreFactory,
  type StoreHandle,
  type StoreOptions,
  useStore,
} from '../contract/factory.js';
import { delivery, finishedTurn, openSession, routed } from '../contract/fixtures.js';
import { githubStatusContract } from '../contract/github-status.contract.js';
import { inboxContract } from '../contract/inbox.contract.js';
import { ledgerContract } from '../contract/ledger.contract.js';
import { sessionsContract } from '../contract/sessions.contract.js';
import { tokensContract } from '../contract/tokens.contract.js';

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** Every SQLite store over one connection, as main-base.ts (and main.ts, the inbox) construct them. */
function portsOver(db: Db, { scrub, now }: StoreOptions): Ports {
  return {
    sessions: new SqliteSessionStore(db, { scrub }),
    inbox: new SqliteInbox(db, { scrub }),
    ledger: new SqliteLedgerStore(db),
    acts: new SqliteActStore(db, { scrub }),
    budgets: new SqliteBudgets(db),
    tokens: new SqliteTokenStore(db),
    cursors: new SqliteScanCursors(db),
    drives: new SqliteDriveAudit(db, { scrub }),
    githubStatus: new SqliteGithubStatus(db, { scrub, now }),
  };
}

/** The registry file of each handle (for the processes below). */
const paths = new WeakMap<StoreHandle, string>();
const pathOf = (store: StoreHandle): string => paths.get(store) ?? '';

function sqliteHandle(dir: string, options: StoreOptions): StoreHandle {
  const path = join(dir, 'the-loop.db');
  const connections = [openDb(path)];
  const closeAll = () => {
    for (const db of connections.splice(0)) if (db.open) db.close();
  };
  const handle: StoreHandle = {
    ...portsOver(connections[0] as Db, options),
    second: async () => {
      const db = openDb(path);
      connections.push(db);
      return portsOver(db, options);
    },
    reopen: async () => {
      closeAll();
      return sqliteHandle(dir, options);
    },
    dispose: async () => {
      closeAll();
      rmSync(dir, { recursive: true, force: true });
    },
    // The database file and its write-ahead log: every byte the registry holds.
    contents: async () => {
      const files = [path, `${path}-wal`, `${path}-shm`].filter((f) => existsSync(f));
      return Buffer.concat(files.map((f) => readFileSync(f))).toString('latin1');
    },
  };
  paths.set(handle, path);
  return handle;
}

/**
 * A registry with every migration applied, made once: each fresh store is a copy of it (migrating a
 * new file, an fsync per migration, was most of a test's time).
 */
let template: string | undefined;
function migratedTemplate(): string {
  if (template) return template;
  const dir = mkdtempSync(join(tmpdir(), 'the-loop-contract-template-'));
  dirs.push(dir);
  const path = join(dir, 'the-loop.db');
  // Closed cleanly: the write-ahead log is checkpointed into the file and removed.
  openDb(path).close();
  template = path;
  return path;
}

const sqlite: StoreFactory = {
  name: 'SQLite',
  open: async (options) => {
    const dir = mkdtempSync(join(tmpdir(), 'the-loop-contract-'));
    dirs.push(dir);
    copyFileSync(migratedTemplate(), join(dir, 'the-loop.db'));
    return sqliteHandle(dir, options);
  },
};

sessionsContract(sqlite);
inboxContract(sqlite);
ledgerContract(sqlite);
actsContract(sqlite);
budgetsContract(sqlite);
tokensContract(sqlite);
cursorsContract(sqlite);
drivesContract(sqlite);
githubStatusContract(sqlite);

/**
 * Two processes at once. The suites' two handles share this thread: better-sqlite3 runs each call
 * to its end before the next begins, so their transactions never interleave. Here each process is
 * its own (node with tsx, over src/), all start together and call the port in a loop, so the
 * transactions do interleave — what two daemons, or a daemon and a CLI command, do.
 */
describe('SQLite: two processes at once', () => {
  const root = fileURLToPath(new URL('../../../', import.meta.url));
  const src = (path: string) => pathToFileURL(join(root, 'src', path)).href;
  const CHILD = `
    import { openDb } from '${src('store/db.ts')}';
    import { SqliteActStore } from '${src('store/sqlite/acts.ts')}';
    import { SqliteInbox } from '${src('store/sqlite/inbox.ts')}';
    import { SqliteSessionStore } from '${src('store/sqlite/sessions.ts')}';
    const [path, op, arg, n] = process.argv.slice(2);
    const db = openDb(path);
    const scrub = (t) => t;
    const sessions = new SqliteSessionStore(db, { scrub });
    const acts = new SqliteActStore(db, { scrub });
    const inbox = new SqliteInbox(db, { scrub });
    const wire = { toolUseId: null, tool: 'git', kind: 'git-push', command: 'git push', detail: {},
      outcome: 'succeeded', verdict: 'allow', rule: null, breach: false };
    const ops = {
      wire: async () => { await acts.saveWire(JSON.parse(arg), wire); return true; },
      raise: async () => { await sessions.raiseBudget(arg, { turns: 1 }); return true; },
      turn: async () => {
        const turn = await sessions.beginTurn(arg, { promptDigest: 'd', promptBytes: 1, meter: 'none' });
        await sessions.finishTurn(turn.id, { status: 'succeeded', endReason: 'exit', endedAt: new Date().toISOString(),
          exitCode: 0, exitSignal: null, model: null, usage: null, costUsd: null, error: null });
        return true;
      },
      claim: async (i) => {
        const claim = { deliveryId: 'd-' + i, workItem: 'github:octo/widgets#' + i, action: 'deliver', source: 'github' };
        return (await inbox.applyClaims({ claims: [claim], held: [], ignored: [] })).length === 1;
      },
    };
    process.stdout.write('ready\\n');
    await new Promise((go) => process.stdin.once('data', go));
    let ok = 0;
    const errors = {};
    for (let i = 0; i < Number(n); i++) {
      try { if (await ops[op](i)) ok += 1; }
      catch (e) { errors[e.code ?? String(e)] = (errors[e.code ?? String(e)] ?? 0) + 1; }
    }
    db.close();
    process.stdout.write(JSON.stringify({ ok, errors }) + '\\n');
  `;

  /** Runs `op` `n` times in each of two processes, started together; what each did. */
  async function inTwoProcesses(
    store: StoreHandle,
    op: 'wire' | 'raise' | 'turn' | 'claim',
    arg: string,
    n: number,
  ): Promise<Array<{ ok: number; errors: Record<string, number> }>> {
    const dir = mkdtempSync(join(tmpdir(), 'the-loop-processes-'));
    dirs.push(dir);
    writeFileSync(join(dir, 'child.mts'), CHILD);
    const children = [1, 2].map(() =>
      spawn(
        process.execPath,
        ['--import', 'tsx', join(dir, 'child.mts'), pathOf(store), op, arg, String(n)],
        {
          cwd: root,
          stdio: ['pipe', 'pipe', 'inherit'],
        },
      ),
    );
    const lines = children.map((child) => createInterface({ input: child.stdout })[Symbol.asyncIterator]());
    for (const line of lines) expect((await line.next()).value).toBe('ready');
    for (const child of children) child.stdin.end('go\n');
    return Promise.all(lines.map(async (line) => JSON.parse((await line.next()).value as string)));
  }

  const succeeded = (results: Array<{ ok: number }>) => results.reduce((n, r) => n + r.ok, 0);
  const { store } = useStore(sqlite);

  it('two processes claiming the same deliveries at once: each is claimed once', async () => {
    const n = 100;
    const deliveries = Array.from({ length: n }, (_, i) =>
      delivery(`d-${i}`, routed('deliver', `github:octo/widgets#${i}`)),
    );
    await store().inbox.acceptMany(deliveries);
    const results = await inTwoProcesses(store(), 'claim', '', n);
    expect(results.map((r) => r.errors)).toEqual([{}, {}]);
    expect(succeeded(results)).toBe(n);
    const running = await store().inbox.list({ status: 'running', limit: n });
    expect(running).toHaveLength(n);
    expect(running.every((d) => d.attempts === 1)).toBe(true);
  });

  it('two processes beginning turns of one session at once: never two running, numbered without a gap', async () => {
    const session = await openSession(store());
    const results = await inTwoProcesses(store(), 'turn', session.id, 50);
    const begun = succeeded(results);
    const turns = await store().sessions.turns(session.id);
    expect(turns.map((t) => t.seq)).toEqual(Array.from({ length: begun }, (_, i) => i + 1));
    expect(turns.every((t) => t.status === 'succeeded')).toBe(true);
    // The ones refused were refused as busy, not as a failure of the store.
    for (const r of results)
      expect(Object.keys(r.errors).filter((code) => code !== 'session-busy')).toEqual([]);
  });

  // Was a bug (saveWire numbered a wire act in a deferred transaction: SQLITE_BUSY at once when the
  // other process wrote in between); the transaction is IMMEDIATE now.
  it('two processes recording wire acts of one turn at once: every act is kept, numbered 1..n', async () => {
    const session = await openSession(store());
    const turn = await finishedTurn(store(), session);
    const actTurn = {
      id: turn.id,
      seq: turn.seq,
      sessionId: session.id,
      workItem: session.workItem,
      engine: 'claude',
      runner: 'process',
      at: new Date().toISOString(),
    };
    const results = await inTwoProcesses(store(), 'wire', JSON.stringify(actTurn), 100);
    expect(results.map((r) => r.errors)).toEqual([{}, {}]);
    const seqs = (await store().acts.list({ turnId: turn.id })).map((a) => a.seq).sort((a, b) => a - b);
    expect(seqs).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
  });

  // Was a bug (raiseBudget read and wrote outside a transaction: of 900 raises by three processes, 593
  // were kept); the read and the write are one IMMEDIATE transaction now.
  it("two processes raising one session's ceilings at once: every raise is added", async () => {
    const session = await openSession(store());
    const results = await inTwoProcesses(store(), 'raise', session.id, 100);
    expect(results.map((r) => r.errors)).toEqual([{}, {}]);
    expect((await store().sessions.get(session.id))?.budgetRaise).toEqual({ turns: 200 });
  });
});
