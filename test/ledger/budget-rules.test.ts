import { describe, expect, it } from 'vitest';
import type { BudgetHold, SessionHold } from '../../src/core/ports/sessions.js';
import {
  type Budgets,
  type BudgetUsage,
  budgetHoldDecision,
  budgetQueries,
  checksBudget,
  formatAmount,
  hasCeiling,
  holdAfter,
  overBudget,
  parseRaise,
  sumRaises,
  wireBudgets,
  workItemHeldReason,
} from '../../src/ledger/budget-rules.js';

const NOW = new Date('2026-05-01T12:00:00.000Z');
const SESSION = { id: 'sess-1', workItem: 'github:octo/widgets#7' };
const NONE: Budgets = { session: {}, workItem: {} };

const hold = (extra: Partial<BudgetHold> = {}): BudgetHold => ({
  kind: 'over-budget',
  reason: 'turn ceiling reached: 2 turns of 2 turns (session)',
  dimension: 'turns',
  scope: 'session',
  used: 2,
  limit: 2,
  since: NOW.toISOString(),
  ...extra,
});
const breach: SessionHold = { kind: 'breach', reason: 'pushed to main', acts: [1], turnId: 3, since: 'x' };
const unaccounted: SessionHold = { kind: 'unaccounted', reason: 'no usage', turnId: 3, since: 'x' };

describe('budgetQueries: only the figures a ceiling uses are read', () => {
  const cases: Array<[string, Budgets, ReturnType<typeof budgetQueries>]> = [
    ['no ceiling at all', NONE, []],
    [
      'a session turn ceiling over all time',
      { session: { maxTurns: 3 }, workItem: {} },
      [{ scope: 'session', key: 'sess-1', turnsSince: '', spend: false }],
    ],
    [
      'a session turn ceiling in a 2 h window',
      { session: { maxTurns: 3, windowHours: 2 }, workItem: {} },
      [{ scope: 'session', key: 'sess-1', turnsSince: '2026-05-01T10:00:00.000Z', spend: false }],
    ],
    [
      'a work item token ceiling',
      { session: {}, workItem: { maxTokens: 1000 } },
      [{ scope: 'work-item', key: 'github:octo/widgets#7', turnsSince: undefined, spend: true }],
    ],
    [
      'dollars for the session, turns in a window for the work item',
      { session: { maxUsd: 5 }, workItem: { maxTurns: 9, windowHours: 24 } },
      [
        { scope: 'session', key: 'sess-1', turnsSince: undefined, spend: true },
        {
          scope: 'work-item',
          key: 'github:octo/widgets#7',
          turnsSince: '2026-04-30T12:00:00.000Z',
          spend: false,
        },
      ],
    ],
  ];
  it.each(cases)('%s', (_name, budgets, expected) => {
    expect(budgetQueries(SESSION, budgets, NOW)).toEqual(expected);
  });
});

describe('overBudget: the first ceiling reached, session before work item, turns before tokens before dollars', () => {
  const cases: Array<[string, Budgets, BudgetUsage, Record<string, number>, Partial<BudgetHold> | null]> = [
    ['no ceiling', NONE, { session: { turns: 99 } }, {}, null],
    ['under every ceiling', { session: { maxTurns: 3 }, workItem: {} }, { session: { turns: 2 } }, {}, null],
    [
      'at the session turn ceiling (reached counts)',
      { session: { maxTurns: 2 }, workItem: {} },
      { session: { turns: 2 } },
      {},
      {
        reason: 'turn ceiling reached: 2 turns of 2 turns (session)',
        dimension: 'turns',
        scope: 'session',
        used: 2,
        limit: 2,
      },
    ],
    [
      'a windowed session turn ceiling says its window',
      { session: { maxTurns: 2, windowHours: 24 }, workItem: {} },
      { session: { turns: 5 } },
      {},
      { reason: 'turn ceiling reached: 5 turns of 2 turns (session, last 24 h)', used: 5, limit: 2 },
    ],
    [
      'a windowed work item turn ceiling does not (as before)',
      { session: {}, workItem: { maxTurns: 2, windowHours: 24 } },
      { 'work-item': { turns: 2 } },
      {},
      { reason: 'turn ceiling reached: 2 turns of 2 turns (work-item)', scope: 'work-item' },
    ],
    [
      'a raise lifts the ceiling by its amount',
      { session: { maxTurns: 2 }, workItem: {} },
      { session: { turns: 3 } },
      { turns: 2 },
      null,
    ],
    [
      'a raise that is not enough: the raised ceiling is shown',
      { session: { maxTokens: 100 }, workItem: {} },
      { session: { tokens: 1_500 } },
      { tokens: 1_000 },
      {
        reason: 'token ceiling reached: 1,500 tokens of 1,100 tokens (session)',
        dimension: 'tokens',
        limit: 1_100,
      },
    ],
    [
      'turns before tokens before dollars',
      { session: { maxTurns: 1, maxTokens: 1, maxUsd: 0.01 }, workItem: {} },
      { session: { turns: 0, tokens: 5, usd: 3 } },
      {},
      { dimension: 'tokens' },
    ],
    [
      'dollars: estimated, two decimals',
      { session: { maxUsd: 2 }, workItem: {} },
      { session: { tokens: 0, usd: 2.5 } },
      {},
      {
        reason: 'estimated-cost ceiling reached: ~$2.50 estimated of ~$2.00 estimated (session)',
        dimension: 'usd',
      },
    ],
    [
      'the session before its work item',
      { session: { maxTokens: 10 }, workItem: { maxTurns: 1 } },
      { session: { tokens: 20 }, 'work-item': { turns: 5 } },
      {},
      { scope: 'session', dimension: 'tokens' },
    ],
    ['a figure not read counts as nothing used', { session: { maxUsd: 1 }, workItem: {} }, {}, {}, null],
  ];
  it.each(cases)('%s', (_name, budgets, usage, raise, expected) => {
    const found = overBudget(raise, budgets, usage, NOW);
    if (expected === null) expect(found).toBeNull();
    else expect(found).toMatchObject({ kind: 'over-budget', since: NOW.toISOString(), ...expected });
  });
});

describe('budgetHoldDecision: what a check does to the hold', () => {
  const over = hold();
  const earlier = hold({ since: '2026-04-01T00:00:00.000Z' });
  const cases: Array<[string, SessionHold | null, BudgetHold | null, ReturnType<typeof budgetHoldDecision>]> =
    [
      ['nothing held, nothing reached', null, null, { kind: 'none' }],
      ['nothing held, a ceiling reached: held', null, over, { kind: 'hold', hold: over }],
      [
        'held over budget, still over: the earlier hold stays',
        earlier,
        over,
        { kind: 'keep', hold: earlier },
      ],
      ['held over budget, no longer over: released', earlier, null, { kind: 'release' }],
      ['a breach stays whatever the budget says', breach, null, { kind: 'keep', hold: breach }],
      ['an unaccounted hold stays too', unaccounted, over, { kind: 'keep', hold: unaccounted }],
    ];
  it.each(cases)('%s', (_name, current, found, expected) => {
    expect(budgetHoldDecision(current, found)).toEqual(expected);
  });

  it('the hold after each decision', () => {
    expect(holdAfter({ kind: 'none' })).toBeNull();
    expect(holdAfter({ kind: 'release' })).toBeNull();
    expect(holdAfter({ kind: 'hold', hold: over })).toBe(over);
    expect(holdAfter({ kind: 'keep', hold: breach })).toBe(breach);
  });

  it('only an over-budget hold (or none) is checked against the ceilings', () => {
    expect([null, over, breach, unaccounted].map(checksBudget)).toEqual([true, true, false, false]);
  });
});

describe('work item ceilings', () => {
  it('a budget has a ceiling when any limit is set (a window alone is none)', () => {
    expect(hasCeiling({})).toBe(false);
    expect(hasCeiling({ windowHours: 3 })).toBe(false);
    expect(hasCeiling({ maxTurns: 1 })).toBe(true);
    expect(hasCeiling({ maxTokens: 1 })).toBe(true);
    expect(hasCeiling({ maxUsd: 1 })).toBe(true);
  });

  it('raises of all its sessions add up', () => {
    expect(sumRaises([])).toEqual({});
    expect(sumRaises([{ turns: 2 }, {}, { turns: 1, usd: 0.5 }, { usd: 1 }])).toEqual({ turns: 3, usd: 1.5 });
  });

  it('a reached work item ceiling tells where to raise it', () => {
    expect(workItemHeldReason(null)).toBeUndefined();
    expect(workItemHeldReason(hold({ reason: 'turn ceiling reached: 2 turns of 2 turns (work-item)' }))).toBe(
      'turn ceiling reached: 2 turns of 2 turns (work-item); raise budgets.workItem in the config to go on',
    );
  });
});

describe('wireBudgets: the gateway applies tokens and dollars only', () => {
  const cases: Array<[string, Budgets, Budgets | undefined]> = [
    ['none', NONE, undefined],
    [
      'turns only: nothing for the wire',
      { session: { maxTurns: 2, windowHours: 1 }, workItem: {} },
      undefined,
    ],
    [
      'tokens and dollars, turns dropped',
      { session: { maxTurns: 2, maxTokens: 10 }, workItem: { maxUsd: 3 } },
      {
        session: { maxTokens: 10, maxUsd: undefined },
        workItem: { maxTokens: undefined, maxUsd: 3 },
      },
    ],
  ];
  it.each(cases)('%s', (_name, budgets, expected) => {
    expect(wireBudgets(budgets)).toEqual(expected);
  });
});

describe('amounts', () => {
  it('formats each dimension in its unit', () => {
    expect(formatAmount('turns', 1234)).toBe('1,234 turns');
    expect(formatAmount('tokens', 5)).toBe('5 tokens');
    expect(formatAmount('usd', 1.005)).toMatch(/^~\$1\.0\d estimated$/);
  });

  const raises: Array<[string, 'turns' | 'tokens' | 'usd', number]> = [
    ['3', 'turns', 3],
    ['$2.50', 'usd', 2.5],
    [' 10 ', 'tokens', 10],
    ['2.5', 'turns', Number.NaN],
    ['0', 'usd', Number.NaN],
    ['-1', 'tokens', Number.NaN],
    ['1e13', 'tokens', Number.NaN],
    ['lots', 'usd', Number.NaN],
  ];
  it.each(raises)('--raise %s (%s) → %s', (text, dimension, expected) => {
    expect(parseRaise(text, dimension)).toEqual(expected);
  });
});
