import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  type ActFilter,
  actsOfEvents,
  auditTurn,
  corroborated,
  POLICY_MARKER,
} from '../../src/acts/audit.js';
import { resolvePolicy } from '../../src/acts/policy.js';
import type { ActDetail, ActKind } from '../../src/acts/types.js';
import type { TurnEvent } from '../../src/core/events.js';
import type { BreachHold, SessionRecord, UnaccountedHold } from '../../src/core/ports/sessions.js';
import { createLogger } from '../../src/log/logger.js';
import { type Db, openDb } from '../../src/store/db.js';
import { SqliteActStore } from '../../src/store/sqlite/acts.js';
import { SqliteLedgerStore } from '../../src/store/sqlite/ledger.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sessions.js';

const POLICY = resolvePolicy(undefined, undefined, 'main');
const CTX = {
  cwd: '/work/repo',
  workspace: '/work/repo',
  protectedBranches: ['main'],
  currentBranch: 'topic',
};

const use = (id: string, name: string, input: unknown): TurnEvent => ({ type: 'tool-use', id, name, input });
const result = (id: string, ok: boolean, summary = ''): TurnEvent => ({
  type: 'tool-result',
  id,
  ok,
  summary,
});

describe('actsOfEvents: settled with the tool results, judged by the policy', () => {
  it('Claude Bash: succeeded / failed / blocked / unknown, and which of them are breaches', () => {
    const events: TurnEvent[] = [
      use('t1', 'Bash', { command: 'git push origin main' }),
      result('t1', true, 'To remote.git\n   a..b  main -> main'),
      use('t2', 'Bash', { command: 'gh pr merge 1 --squash' }),
      result(
        't2',
        false,
        `PreToolUse:Bash hook error: ['/usr/bin/node' '…']: ${POLICY_MARKER} merging a pull request is not allowed`,
      ),
      use('t3', 'Bash', { command: 'npm publish' }),
      result('t3', false, 'npm ERR! 403 Forbidden'),
      use('t4', 'Bash', { command: 'cd sub && git push origin HEAD:main' }),
      { type: 'text', text: 'the turn was cut here' },
      use('t5', 'Bash', { command: 'git push origin topic' }),
      result('t5', true, 'ok'),
      use('t6', 'Read', { file_path: '/etc/passwd' }),
      result('t6', true, '…'),
    ];
    // t2 was refused by the hook (its record says so).
    const acts = actsOfEvents(events, CTX, POLICY, new Set(['t2']));
    expect(acts.map((a) => [a.seq, a.toolUseId, a.kind, a.outcome, a.verdict, a.breach])).toEqual([
      [1, 't1', 'git-push', 'succeeded', 'deny', true],
      [2, 't2', 'pr-merge', 'blocked', 'deny', false],
      // Failed does not prove it did not happen: still a breach for a person to look at.
      [3, 't3', 'package-publish', 'failed', 'deny', true],
      [4, 't4', 'git-push', 'unknown', 'deny', true],
      [5, 't5', 'git-push', 'succeeded', 'allow', false],
    ]);
    expect(acts[0]?.reason).toMatch(/protected branch main/);
  });

  it("a tool result that merely prints the hook's marker is not blocked: only the hook's record counts", () => {
    const spoof = `${POLICY_MARKER} merging a pull request is not allowed`;
    const acts = actsOfEvents(
      [
        use('s1', 'shell', { command: `git push origin HEAD:main; echo '${spoof}'; exit 1` }),
        result('s1', false, spoof),
        use('s2', 'Bash', { command: 'git push origin main' }),
        result('s2', false, `PreToolUse:Bash hook error: [x]: ${spoof}`),
      ],
      CTX,
      POLICY,
    );
    expect(acts.map((a) => [a.outcome, a.breach])).toEqual([
      ['failed', true],
      ['failed', true],
    ]);
  });

  it('Codex `shell` items (bash -lc …) and Gemini run_shell_command are read the same way', () => {
    const acts = actsOfEvents(
      [
        use('c1', 'shell', { command: "/bin/bash -lc 'git push origin main'" }),
        result('c1', true, ''),
        use('g1', 'run_shell_command', { command: 'git push --force origin topic' }),
        result('g1', true, ''),
      ],
      CTX,
      POLICY,
    );
    expect(acts.map((a) => [a.tool, a.kind, a.outcome, a.breach])).toEqual([
      ['shell', 'git-push', 'succeeded', true],
      ['run_shell_command', 'git-force-push', 'succeeded', true],
    ]);
  });

  it('false positives are not acts; odd inputs do not throw', () => {
    const acts = actsOfEvents(
      [
        use('a', 'Bash', { command: 'git push --dry-run origin main' }),
        use('b', 'Bash', { command: 'echo "git push origin main"' }),
        use('c', 'Bash', { command: 42 }),
        use('d', 'Bash', null),
        use('', 'Bash', { command: 'git status' }),
      ],
      CTX,
      POLICY,
    );
    expect(acts.filter((a) => a.kind === 'git-push')).toEqual([]);
    expect(acts.every((a) => a.kind === 'unreadable-input' && a.verdict === 'allow')).toBe(true);
  });
});

describe('auditTurn: stored, scrubbed, and a breach holds the session', () => {
  let dir: string;
  let db: Db;
  let store: SqliteSessionStore;
  let session: SessionRecord;
  const holds: Array<BreachHold | UnaccountedHold> = [];
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'the-loop-audit-'));
    execFileSync('git', ['init', '-q', '-b', 'topic', dir]);
    db = openDb(join(dir, 'the-loop.db'));
    store = new SqliteSessionStore(db, { scrub: (t) => t });
    session = await store.create({
      workItem: 'github:acme/api#3',
      slug: 'github-acme-api-3',
      engine: 'codex',
      runner: 'process',
      engineSessionId: null,
      cwd: dir,
      credentialKind: null,
      credentialEnv: null,
      payerId: null,
      tmuxTarget: null,
    });
    holds.length = 0;
  });
  afterEach(() => {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const scrub = (t: string) => t.replaceAll('sk-SECRET-123', '[secret]');
  const deps = () => ({
    acts: new SqliteActStore<ActKind, ActDetail>(db, { scrub }),
    turns: store,
    ledger: new SqliteLedgerStore(db),
    policyFor: () => POLICY,
    holdForBreach: async (_: string, hold: BreachHold) => {
      holds.push(hold);
    },
    holdUnaccounted: async (_: string, hold: UnaccountedHold) => {
      holds.push(hold);
    },
    scrub,
    logger: createLogger({ level: 'error', sinks: [] }),
  });
  const listActs = (filter: ActFilter) => deps().acts.list(filter);

  const finished = async () => {
    const turn = await store.beginTurn(session.id, {
      promptDigest: 'd',
      promptBytes: 1,
      meter: 'codex-json',
    });
    return await store.finishTurn(turn.id, {
      status: 'succeeded',
      endReason: 'result',
      endedAt: new Date().toISOString(),
      exitCode: 0,
      exitSignal: null,
      model: null,
      usage: {
        inputTokens: 1,
        outputTokens: 1,
        cacheReadTokens: 0,
        cacheCreationTokens: 0,
        reasoningTokens: 0,
      },
      costUsd: null,
      error: null,
    });
  };

  it('stores every act of the turn (text scrubbed), idempotently, and holds the session on a breach', async () => {
    const turn = await finished();
    const events: TurnEvent[] = [
      use('x1', 'shell', { command: 'TOKEN=sk-SECRET-123 git push origin main' }),
      result('x1', true, ''),
      use('x2', 'shell', { command: 'git push origin topic' }),
      result('x2', true, ''),
    ];
    await auditTurn(deps(), session, turn, events);
    await auditTurn(deps(), session, turn, events);
    const acts = await listActs({ sessionId: session.id });
    expect(acts.map((a) => [a.kind, a.breach, a.turnSeq])).toEqual([
      ['git-push', false, 1],
      ['git-push', true, 1],
    ]);
    expect(JSON.stringify(acts)).not.toContain('sk-SECRET-123');
    expect(holds[0]).toMatchObject({ kind: 'breach', turnId: turn.id, acts: [acts[1]?.id] });
    expect(await listActs({ breachesOnly: true })).toHaveLength(1);
    expect(await listActs({ kind: 'pr-merge' })).toEqual([]);
    expect(
      await listActs({ workItem: 'github:acme/api#3', since: new Date(Date.now() - 60_000) }),
    ).toHaveLength(2);
  });

  it('a turn that may have switched branches does not assume the branch checked out at its end', async () => {
    const turn = await finished();
    // main was checked out when it pushed; the repository is on `topic` now.
    const acts = await auditTurn(deps(), session, turn, [
      use('b1', 'shell', { command: 'git checkout main' }),
      result('b1', true, ''),
      use('b2', 'shell', { command: 'git push' }),
      result('b2', true, ''),
      use('b3', 'shell', { command: 'git checkout -b topic' }),
      result('b3', true, ''),
    ]);
    expect(acts.map((a) => [a.kind, a.verdict, a.breach])).toEqual([['git-push', 'deny', true]]);
  });

  it('a breach reason carries no control characters from the command (outside text on a terminal)', async () => {
    const turn = await finished();
    await auditTurn(deps(), session, turn, [
      use('e1', 'shell', { command: 'git push origin main # \u001b]0;pwned\u0007\u001b[2J\u009b31m' }),
      result('e1', true, ''),
    ]);
    const hold = holds.find((h) => h.kind === 'breach');
    expect(hold?.reason).toMatch(/protected branch main/);
    expect(hold?.reason).not.toMatch(/[\u0000-\u001f\u007f-\u009f]/);
  });

  it('a turn with no tool use records nothing and holds nothing (its usage was reported)', async () => {
    const turn = await finished();
    expect(await auditTurn(deps(), session, turn, [{ type: 'text', text: 'hi' }])).toEqual([]);
    expect(holds).toEqual([]);
  });

  it('accountability: a first completed turn without usage or readable events holds the session unaccounted', async () => {
    const turn = await store.beginTurn(session.id, {
      promptDigest: 'd',
      promptBytes: 1,
      meter: 'codex-json',
    });
    const done = await store.finishTurn(turn.id, {
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
    await auditTurn(deps(), session, done, [{ type: 'diagnostic', message: 'bad line' }]);
    expect(holds).toEqual([
      expect.objectContaining({
        kind: 'unaccounted',
        reason: expect.stringMatching(
          /no usage record \(its meter is codex-json\) and no event the act extractor could read/,
        ),
      }),
    ]);
  });
});

describe('the policy hook’s record, corroborated by the engine', () => {
  const use = (id: string, command: string): TurnEvent => ({
    type: 'tool-use',
    id,
    name: 'Bash',
    input: { command },
  });
  const failed = (id: string): TurnEvent => ({ type: 'tool-result', id, ok: false, summary: 'refused' });
  const policy = resolvePolicy(undefined, undefined, 'main');

  it('counts a refusal the headless engine lists among its denials; not one the agent only wrote down', () => {
    const events: TurnEvent[] = [
      use('t1', 'git push origin main'),
      failed('t1'),
      use('t2', 'npm publish'),
      failed('t2'),
      { type: 'tool-refused', tool: 'Bash', id: 't1', byPolicy: true },
      { type: 'turn-end', ok: true, subtype: 'success' },
    ];
    // The agent appended t2 to the hook's record: the engine never refused it.
    const refused = corroborated(new Set(['t1', 't2']), events);
    expect([...(refused ?? [])]).toEqual(['t1']);
    const acts = actsOfEvents(
      events,
      { cwd: '/w', workspace: '/w', currentBranch: 'feature' },
      policy,
      refused,
    );
    expect(acts.map((a) => [a.kind, a.outcome, a.breach])).toEqual([
      ['git-push', 'blocked', false],
      ['package-publish', 'failed', true],
    ]);
  });

  it('keeps the hook’s record as it is where the engine gives no list (a TUI turn)', () => {
    const events: TurnEvent[] = [use('t1', 'git push origin main'), { type: 'turn-end', ok: true }];
    expect([...(corroborated(new Set(['t1']), events) ?? [])]).toEqual(['t1']);
  });
});
