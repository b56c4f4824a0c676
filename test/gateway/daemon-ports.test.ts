/**
 * The daemon's side of the gateway: acts seen on the wire land in the acts table (their own
 * numbering, beside the command audit's), usage in the ledger (meter `wire`, once per response id,
 * partial rows marked), budgets refuse and hold at the wire, model routes and credentials come from
 * the config and the daemon's environment, and ending a session revokes its tokens.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { resolvePolicy } from '../../src/acts/policy.js';
import type { ActDetail, ActKind } from '../../src/acts/types.js';
import { mergeEngine } from '../../src/config/load.js';
import { configSchema } from '../../src/config/schema.js';
import { BUILTIN_PRESETS } from '../../src/engines/presets.js';
import { createGatewayPorts, type DaemonPortsDeps } from '../../src/gateway/daemon-ports.js';
import { revokingStore } from '../../src/gateway/revoking-store.js';
import { GatewayTokens } from '../../src/gateway/tokens.js';
import type { GatewaySession } from '../../src/gateway/types.js';
import { Ledger, NO_WIRE_YET } from '../../src/ledger/ledger.js';
import { priceTable } from '../../src/ledger/pricing.js';
import { createLogger, memorySink } from '../../src/log/logger.js';
import { type Db, openDb } from '../../src/store/db.js';
import { SqliteActStore } from '../../src/store/sqlite/acts.js';
import { SqliteBudgets } from '../../src/store/sqlite/budgets.js';
import { SqliteLedgerStore } from '../../src/store/sqlite/ledger.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sessions.js';
import { SqliteTokenStore } from '../../src/store/sqlite/tokens.js';

let dir: string;
let db: Db;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'the-loop-ports-'));
  db = openDb(join(dir, 'the-loop.db'));
});
afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

async function world(
  config: Record<string, unknown> = {},
  env: Record<string, string> = {},
  github?: DaemonPortsDeps['github'],
) {
  const scrub = (t: string) => t.replaceAll('SECRET', '[secret]');
  const store = new SqliteSessionStore(db, { scrub });
  const ledger = new Ledger(new SqliteLedgerStore(db), priceTable());
  const acts = new SqliteActStore<ActKind, ActDetail>(db, { scrub });
  const parsed = configSchema.parse(config);
  const ports = createGatewayPorts({
    store,
    ledger,
    acts,
    budgets: new SqliteBudgets(db),
    logger: createLogger({ level: 'error', sinks: [memorySink()] }),
    config: parsed,
    engines: { claude: mergeEngine('claude', BUILTIN_PRESETS.claude, undefined) },
    env,
    policyFor: () => resolvePolicy(undefined, undefined, 'main'),
    github,
  });
  const record = await store.create({
    workItem: 'github:acme/demo#1',
    slug: 'github-acme-demo-1',
    engine: 'claude',
    runner: 'process',
    engineSessionId: null,
    cwd: dir,
    credentialKind: 'api-key',
    credentialEnv: 'ANTHROPIC_API_KEY',
    payerId: 'key:0123456789ab',
  });
  const session: GatewaySession = {
    id: record.id,
    workItem: record.workItem,
    owner: 'acme',
    repo: 'demo',
    engine: 'claude',
    cwd: dir,
  };
  return { store, ledger, acts, ports, session };
}

const usage = (input: number, output: number) => ({
  inputTokens: input,
  outputTokens: output,
  cacheReadTokens: 0,
  cacheCreationTokens: 0,
  reasoningTokens: 0,
});

describe('acts seen on the wire', () => {
  it('are numbered apart from the command audit of the same turn, scrubbed, and attributed to the running turn', async () => {
    const { store, acts: actStore, ports, session } = await world();
    const turn = await store.beginTurn(session.id, { promptDigest: 'd', promptBytes: 1, meter: 'wire' });
    const act = {
      kind: 'git-push' as const,
      command: 'git-receive-pack refs/heads/main SECRET',
      detail: { via: 'git-receive-pack', ref: 'refs/heads/main', branches: ['main'] },
      outcome: 'blocked' as const,
      verdict: 'deny' as const,
      rule: 'git-push: deny-protected',
      reason: 'pushing to the protected branch main is not allowed',
    };
    await ports.recordAct(session, act);
    await ports.recordAct(session, {
      ...act,
      outcome: 'succeeded',
      verdict: 'allow',
      detail: { via: 'REST' },
    });
    // The command audit's own acts of the turn keep their numbers.
    await actStore.save(
      {
        id: turn.id,
        seq: turn.seq,
        sessionId: session.id,
        workItem: session.workItem,
        engine: 'claude',
        runner: 'process',
        at: 'now',
      },
      [
        {
          seq: 1,
          toolUseId: 't1',
          tool: 'Bash',
          kind: 'git-push',
          command: 'git push origin HEAD:heads/main',
          detail: {},
          outcome: 'failed',
          verdict: 'allow',
          rule: 'git-push: deny-protected',
          breach: false,
        },
      ],
      'command',
    );
    const acts = (await actStore.list({ turnId: turn.id })).reverse();
    expect(acts.map((a) => [a.source, a.kind, a.outcome, a.verdict, a.breach, a.tool])).toEqual([
      ['wire', 'git-push', 'blocked', 'deny', false, 'git-receive-pack'],
      ['wire', 'git-push', 'succeeded', 'allow', false, 'REST'],
      ['command', 'git-push', 'failed', 'allow', false, 'Bash'],
    ]);
    expect(acts[0]?.command).toBe('git-receive-pack refs/heads/main [secret]');
    expect(acts[0]?.detail.reason).toContain('protected branch main');
  });
});

describe('usage seen on the wire', () => {
  it('is one ledger row per response id, marked partial when cut, and settles the turn', async () => {
    const { store, ledger, ports, session } = await world();
    const turn = await store.beginTurn(session.id, { promptDigest: 'd', promptBytes: 1, meter: 'wire' });
    // The turn ended before its last response was recorded: a waiting drive, removed when it comes.
    await ledger.recordTurn(
      {
        sessionId: session.id,
        workItem: session.workItem,
        turnId: turn.id,
        engine: 'claude',
        runner: 'process',
        meter: 'wire',
        endedAt: new Date().toISOString(),
        payer: { kind: 'api-key', id: 'key:0123456789ab' },
      },
      [],
      { usage: null, model: null, costUsd: null, nextBaseline: null, warnings: [] },
      'x',
    );
    expect(db.prepare('SELECT reason FROM unmetered_drives').pluck().all()).toEqual([NO_WIRE_YET]);
    const at = new Date().toISOString();
    await ports.recordUsage(session, {
      api: 'anthropic',
      responseId: 'msg_1',
      model: 'claude-sonnet-4-5',
      usage: usage(10, 5),
      partial: false,
      at,
    });
    await ports.recordUsage(session, {
      api: 'anthropic',
      responseId: 'msg_1',
      model: 'claude-sonnet-4-5',
      usage: usage(10, 5),
      partial: false,
      at,
    });
    await ports.recordUsage(session, {
      api: 'anthropic',
      responseId: null,
      model: null,
      usage: usage(7, 1),
      partial: true,
      at,
    });
    const rows = db
      .prepare(
        'SELECT meter, source_id, turn_id, input_tokens, output_tokens, partial, payer_kind FROM usage_ledger ORDER BY id',
      )
      .all() as Array<Record<string, unknown>>;
    expect(
      rows.map((r) => [r.meter, r.turn_id, r.input_tokens, r.output_tokens, r.partial, r.payer_kind]),
    ).toEqual([
      ['wire', turn.id, 10, 5, 0, 'api-key'],
      ['wire', turn.id, 7, 1, 1, 'api-key'],
    ]);
    expect(rows[0]?.source_id).toBe('anthropic:msg_1');
    expect(db.prepare('SELECT COUNT(*) FROM unmetered_drives').pluck().get()).toBe(0);
  });
});

describe('budgets at the wire', () => {
  it('refuse the next request of a session at its token ceiling and hold it; turn ceilings are left to dispatch', async () => {
    const { store, ports, session } = await world({ budgets: { session: { maxTokens: 100, maxTurns: 1 } } });
    await store.beginTurn(session.id, { promptDigest: 'd', promptBytes: 1, meter: 'wire' });
    // One turn of one allowed is running: its requests are not refused for that.
    expect(await ports.overBudget(session)).toBeUndefined();
    const at = new Date().toISOString();
    await ports.recordUsage(session, {
      api: 'anthropic',
      responseId: 'msg_a',
      model: null,
      usage: usage(90, 20),
      partial: false,
      at,
    });
    const reason = await ports.overBudget(session);
    expect(reason).toMatch(/token ceiling reached: 110 tokens of 100 tokens/);
    expect((await store.get(session.id))?.hold).toMatchObject({ kind: 'over-budget', dimension: 'tokens' });
    // Raised by a person: requests go on.
    await store.setHold(session.id, null);
    await store.raiseBudget(session.id, { tokens: 1000 });
    expect(await ports.overBudget(session)).toBeUndefined();
  });
});

describe('model routes and credentials', () => {
  it("forward where the engine would have gone, with the daemon's key; a config upstream wins", async () => {
    const env = { ANTHROPIC_API_KEY: 'sk-real-key-00000000', ANTHROPIC_BASE_URL: 'http://127.0.0.1:9/base/' };
    const engineBase = await world({}, env);
    expect(engineBase.ports.modelRoute(engineBase.session)).toEqual({
      api: 'anthropic',
      upstream: 'http://127.0.0.1:9/base',
      credential: { value: 'sk-real-key-00000000', kind: 'api-key' },
    });
    await engineBase.store.close(engineBase.session.id, 'next');
    const configured = await world({ gateway: { upstreams: { anthropic: 'http://127.0.0.1:8' } } }, env);
    expect(configured.ports.modelRoute(configured.session)?.upstream).toBe('http://127.0.0.1:8');
    await configured.store.close(configured.session.id, 'next');
    const plain = await world({}, { GITHUB_TOKEN: 'ghp_x' });
    expect(plain.ports.modelRoute(plain.session)).toEqual({
      api: 'anthropic',
      upstream: 'https://api.anthropic.com',
      credential: undefined,
    });
    expect(plain.ports.github).toMatchObject({
      gitUrl: 'https://github.com',
      apiUrl: 'https://api.github.com',
    });
    expect(await plain.ports.github.tokenFor(plain.session)).toBe('ghp_x');
  });

  it("sends the GitHub client's credential for the session's repository when there is a client", async () => {
    const asked: string[] = [];
    const refused: string[] = [];
    const client = {
      tokenFor: async (repo: string) => {
        asked.push(repo);
        return `ghs_installation_token_for_${repo}`;
      },
      tokenRefused: (repo: string) => refused.push(repo),
    };
    const app = await world({}, { GITHUB_TOKEN: 'ghp_x' }, client);
    expect(await app.ports.github.tokenFor(app.session)).toBe('ghs_installation_token_for_acme/demo');
    expect(asked).toEqual(['acme/demo']);
    app.ports.github.tokenRefused?.(app.session);
    expect(refused).toEqual(['acme/demo']);
  });
});

describe('ending a session', () => {
  it('revokes its tokens however it ends', async () => {
    const { store, session } = await world();
    const tokens = new GatewayTokens(new SqliteTokenStore(db));
    const revoking = revokingStore(store, tokens, createLogger({ level: 'error', sinks: [memorySink()] }));
    const token = await tokens.mint(session.id);
    expect((await revoking.get(session.id))?.status).toBe('active');
    await revoking.markGone(session.id, 'lost', 'tmux session gone');
    expect(await tokens.sessionOf(token)).toBeUndefined();
    const other = await store.create({
      workItem: 'github:acme/demo#2',
      slug: 'github-acme-demo-2',
      engine: 'claude',
      runner: 'process',
      engineSessionId: null,
      cwd: dir,
      credentialKind: null,
      credentialEnv: null,
    });
    const second = await tokens.mint(other.id);
    await revoking.close(other.id, 'closed by hand');
    expect(await tokens.sessionOf(second)).toBeUndefined();
  });
});
