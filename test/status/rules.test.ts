import { describe, expect, it } from 'vitest';
import type { RenderedStatus, StatusFacts } from '../../src/core/status-facts.js';
import { costOf } from '../../src/status/gather.js';
import { actLineOf, holdOf } from '../../src/status/release-rules.js';
import { checkWrite, commitStatusOf, isFinal } from '../../src/status/write-rules.js';

const WI = 'github:acme/widgets#15';
const session = { workItem: WI, hold: null, takeover: null, waiting: null };

describe('what releases a held session', () => {
  it('each hold says why and names the command, by work item', () => {
    expect(holdOf(session)).toBeUndefined();
    const budget = holdOf({
      ...session,
      hold: {
        kind: 'over-budget',
        reason: '2 of 2 turns (session)',
        dimension: 'turns',
        scope: 'session',
        used: 2,
        limit: 2,
        since: 'x',
      },
    });
    expect(budget?.reason).toBe('over budget: 2 of 2 turns (session)');
    expect(budget?.release).toContain(`the-loop sessions resume ${WI} --raise <amount>`);
    const breach = holdOf({
      ...session,
      hold: { kind: 'breach', reason: 'push to main', acts: [1], turnId: 3, since: 'x' },
    });
    expect(breach?.release).toContain(`the-loop acts --session ${WI}`);
    expect(breach?.release).toContain(`the-loop sessions resume ${WI}`);
    for (const kind of ['unaccounted', 'interrupted'] as const) {
      const hold =
        kind === 'interrupted'
          ? { kind, reason: 'host-a died', turnId: 2, hostId: 'host-a', since: 'x' }
          : { kind, reason: 'no usage', turnId: 2, since: 'x' };
      expect(holdOf({ ...session, hold } as Parameters<typeof holdOf>[0])?.release).toContain(
        'sessions resume',
      );
    }
  });

  it('a take over names who holds it and how it goes on; a waiting TUI says to answer it', () => {
    const taken = holdOf({
      ...session,
      takeover: { by: 'alice@box', since: 'x', principal: null } as never,
    });
    expect(taken).toMatchObject({ reason: 'taken over by alice@box' });
    expect(taken?.release).toContain(`sessions handback ${WI}`);
    const waiting = holdOf({ ...session, waiting: { since: 'x', message: 'Allow Bash?' } });
    expect(waiting?.reason).toBe('waiting for a person: Allow Bash?');
    expect(waiting?.release).toContain(`sessions attach ${WI}`);
  });
});

describe('an act as a tracking comment lists it', () => {
  it('a wire push: its ref and the commit it left; a deletion has no commit', () => {
    expect(
      actLineOf({
        kind: 'push',
        detail: { ref: 'refs/heads/fix', newOid: 'a'.repeat(40) },
        outcome: 'succeeded',
        rule: null,
        command: 'git-receive-pack',
      }),
    ).toStrictEqual({
      kind: 'push',
      target: 'refs/heads/fix',
      sha: 'a'.repeat(40),
      outcome: 'succeeded',
      rule: undefined,
    });
    expect(
      actLineOf({
        kind: 'branch-delete',
        detail: { ref: 'refs/heads/x', newOid: '0'.repeat(40) },
        outcome: 'succeeded',
        rule: null,
        command: '',
      }).sha,
    ).toBeUndefined();
  });

  it('a blocked act keeps its rule; odd details fall back to the command, bounded', () => {
    const blocked = actLineOf({
      kind: 'merge',
      detail: { pr: '7' },
      outcome: 'blocked',
      rule: 'merge.protected',
      command: 'gh pr merge 7',
    });
    expect(blocked).toMatchObject({ target: '#7', rule: 'merge.protected' });
    const odd = actLineOf({
      kind: 'publish',
      detail: 'not an object',
      outcome: 'unknown',
      rule: null,
      command: 'x'.repeat(1000),
    });
    expect(odd.target).toHaveLength(200);
    expect(
      actLineOf({
        kind: 'push',
        detail: { branches: [1, 2] },
        outcome: 'failed',
        rule: 'r',
        command: 'git push',
      }).target,
    ).toBe('git push');
  });
});

describe('the cost line: unknown, never $0', () => {
  const turn = {
    usage: {
      inputTokens: 100,
      outputTokens: 20,
      cacheReadTokens: 5,
      cacheCreationTokens: 0,
      reasoningTokens: 0,
    },
    meter: 'stream-json' as const,
    model: 'claude-x',
  };
  it('no ledger rows: unknown, and why', () => {
    expect(costOf(turn, undefined)).toStrictEqual({
      tokens: 125,
      usd: null,
      basis: 'nothing measured',
      unpricedRows: 0,
    });
    expect(costOf({ ...turn, usage: null, meter: 'none' }, undefined)).toMatchObject({
      tokens: null,
      usd: null,
      basis: 'unmetered',
    });
  });
  it('rows without a price: unknown, naming the model; priced rows: the figure and its bases', () => {
    expect(costOf(turn, { costUsd: null, rows: 2, unpricedRows: 2, bases: [] })).toMatchObject({
      usd: null,
      basis: 'no price for claude-x',
      unpricedRows: 2,
    });
    expect(
      costOf(turn, { costUsd: 0.0123, rows: 3, unpricedRows: 1, bases: ['engine-reported', 'list-price'] }),
    ).toStrictEqual({ tokens: 125, usd: 0.0123, basis: 'engine-reported, list-price', unpricedRows: 1 });
  });
});

describe('the check, written only when it changed', () => {
  const rendered = (
    status: RenderedStatus['check']['status'],
    conclusion: RenderedStatus['check']['conclusion'],
    summary = 's',
  ): RenderedStatus => ({
    body: 'b',
    check: { status, conclusion, title: 't', summary, description: 'd'.repeat(300) },
  });
  const running = { phase: 'running' } as StatusFacts;
  const finished = { phase: 'finished' } as StatusFacts;

  it('the same state twice is one write; a running summary alone is not worth one; the final one always is', () => {
    const first = checkWrite(rendered('in_progress', undefined), running, undefined);
    expect(first).toBeDefined();
    expect(checkWrite(rendered('in_progress', undefined, 'other'), running, first?.digest)).toBeUndefined();
    const done = checkWrite(rendered('completed', 'success'), finished, first?.digest);
    expect(done).toBeDefined();
    expect(checkWrite(rendered('completed', 'success', 'more'), finished, done?.digest)).toBeDefined();
  });

  it('a commit status: pending until completed, then by conclusion; its description within 140', () => {
    const cases: Array<[RenderedStatus['check']['status'], RenderedStatus['check']['conclusion'], string]> = [
      ['queued', undefined, 'pending'],
      ['in_progress', undefined, 'pending'],
      ['completed', 'success', 'success'],
      ['completed', 'neutral', 'success'],
      ['completed', 'failure', 'failure'],
      ['completed', 'timed_out', 'failure'],
      ['completed', 'cancelled', 'error'],
      ['completed', 'action_required', 'pending'],
    ];
    for (const [status, conclusion, state] of cases) {
      const s = commitStatusOf(rendered(status, conclusion), 'the-loop', 'https://x/sessions/1');
      expect(s.state, `${status}/${conclusion}`).toBe(state);
      expect(s.description.length).toBeLessThanOrEqual(140);
      expect(s.context).toBe('the-loop');
    }
    expect(isFinal('finished') && isFinal('rejected') && !isFinal('held')).toBe(true);
  });
});
