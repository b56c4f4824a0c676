import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { formatTurnUsage, formatUsd } from '../../src/cli/format.js';
import { formatGroupCost } from '../../src/cli/usage.js';
import type { Usage } from '../../src/core/events.js';
import { Ledger, type LedgerEntry, type TurnContext } from '../../src/ledger/ledger.js';
import type { Payer } from '../../src/ledger/payer.js';
import { pricesFromConfig, priceTable } from '../../src/ledger/pricing.js';
import { GROUP_BY, type GroupBy, parseWhen, type ReportGroup } from '../../src/ledger/report.js';
import { type Db, openDb } from '../../src/store/db.js';
import { SqliteLedgerStore } from '../../src/store/sqlite/ledger.js';
import { usageReport } from '../../src/store/sqlite/ledger-report.js';
import { thrown } from '../helpers/check.js';

const u = (input: number, output: number): Usage => ({
  inputTokens: input,
  outputTokens: output,
  cacheReadTokens: 0,
  cacheCreationTokens: 0,
  reasoningTokens: 0,
});

const KEY_A: Payer = { kind: 'api-key', id: 'key:aaaaaaaaaaaa' };
const SUBSCRIPTION: Payer = { kind: 'subscription', id: null };
const SONNET = 'claude-sonnet-4-5';
const MYSTERY = 'mystery-model-9';

const entry = (e: Partial<LedgerEntry> & Pick<LedgerEntry, 'sourceId' | 'at'>): LedgerEntry => ({
  meter: 'transcript',
  sessionId: 's1',
  workItem: 'github:o/r#1',
  turnId: 1,
  engine: 'claude',
  runner: 'process',
  model: SONNET,
  usage: u(0, 0),
  payer: KEY_A,
  ...e,
});

const codex = {
  meter: 'codex-json',
  sessionId: 's2',
  workItem: 'github:o/r#2',
  engine: 'codex',
  runner: 'tmux',
} as const;

/**
 * Two days (2026-03-01, 2026-03-02), two engines, two models (one unpriced), two payers, plus rows
 * and unmetered drives just outside the window [2026-03-01, 2026-03-03).
 */
const FIXTURE: LedgerEntry[] = [
  // Day 1, claude, priced: 3 at list price + 1.5 engine-reported.
  entry({ sourceId: 'req_a1', at: '2026-03-01T10:00:00.000Z', usage: u(1_000_000, 0) }),
  entry({ sourceId: 'req_a2', at: '2026-03-01T11:00:00.000Z', usage: u(0, 100_000), engineCostUsd: 1.5 }),
  // Day 2, codex, unpriced model.
  entry({
    ...codex,
    sourceId: 'turn:2',
    at: '2026-03-02T09:00:00.000Z',
    turnId: 2,
    model: MYSTERY,
    usage: u(500, 50),
    payer: SUBSCRIPTION,
  }),
  entry({
    ...codex,
    sourceId: 'turn:3',
    at: '2026-03-02T12:00:00.000Z',
    turnId: 3,
    model: MYSTERY,
    usage: u(700, 70),
  }),
  // Outside the window: the last millisecond before it, and its (exclusive) end.
  entry({
    sourceId: 'req_before',
    at: '2026-02-28T23:59:59.999Z',
    turnId: 0,
    model: 'outside-model',
    usage: u(9, 9),
  }),
  entry({
    sourceId: 'req_after',
    at: '2026-03-03T00:00:00.000Z',
    turnId: 4,
    usage: u(9, 9),
    engineCostUsd: 100,
  }),
];

const SINCE = new Date('2026-03-01T00:00:00.000Z');
const UNTIL = new Date('2026-03-03T00:00:00.000Z');

let dir: string;
let db: Db;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'the-loop-report-'));
  db = openDb(join(dir, 'registry.sqlite'));
  // Flat prices of the config's kind: the report's arithmetic, not the dataset's tiers, is tested here.
  const ledger = new Ledger(
    new SqliteLedgerStore(db, { now: () => new Date('2026-03-10T00:00:00.000Z') }),
    priceTable(
      pricesFromConfig({
        'claude-sonnet-4-5': {
          input: 3,
          output: 15,
          cacheRead: 0.3,
          cacheWrite5m: 3.75,
          asOf: '2025-11',
          source: 'test',
        },
      }),
    ),
  );
  expect((await ledger.add(FIXTURE)).inserted).toBe(FIXTURE.length);
  const unmetered = (turnId: number, endedAt: string, reason: string, extra: Partial<TurnContext> = {}) =>
    ledger.recordTurn(
      {
        sessionId: 's3',
        workItem: 'github:o/r#3',
        turnId,
        engine: 'ollama',
        runner: 'tmux',
        meter: 'none',
        endedAt,
        payer: { kind: 'unknown', id: null },
        ...extra,
      },
      [],
      { usage: null, model: null, costUsd: null, nextBaseline: null, warnings: [] },
      reason,
    );
  await unmetered(50, '2026-03-02T15:00:00.000Z', 'engine has no meter');
  await unmetered(51, '2026-03-02T16:00:00.000Z', 'engine has no meter');
  await unmetered(51, '2026-03-02T16:30:00.000Z', 'engine has no meter'); // the same turn again: not counted
  await unmetered(52, '2026-03-01T08:00:00.000Z', 'no result event', { engine: 'claude', runner: 'process' });
  await unmetered(53, '2026-03-05T08:00:00.000Z', 'engine has no meter'); // outside the window
});

afterEach(() => {
  if (db.open) db.close();
  rmSync(dir, { recursive: true, force: true });
});

const report = (by: GroupBy, since = SINCE, until = UNTIL) => usageReport(db, { since, until, by });
const summary = (g: ReportGroup) => ({
  key: g.key,
  rows: g.rows,
  turns: g.turns,
  input: g.usage.inputTokens,
  output: g.usage.outputTokens,
  cost: g.costUsd,
  unpriced: g.unpricedRows,
  bases: g.costBases,
});

describe('usageReport', () => {
  const day1 = { rows: 2, turns: 1, input: 1_000_000, output: 100_000, cost: 4.5, unpriced: 0 };
  const day2 = { rows: 2, turns: 2, input: 1200, output: 120, cost: null, unpriced: 2, bases: [] };
  const bothBases = ['engine-reported', 'list-price'];

  it.each<[GroupBy, ReturnType<typeof summary>[]]>([
    [
      'day',
      [
        { key: '2026-03-01', ...day1, bases: bothBases },
        { key: '2026-03-02', ...day2 },
      ],
    ],
    [
      'engine',
      [
        { key: 'claude', ...day1, bases: bothBases },
        { key: 'codex', ...day2 },
      ],
    ],
    [
      'model',
      [
        { key: SONNET, ...day1, bases: bothBases },
        { key: MYSTERY, ...day2 },
      ],
    ],
    [
      'work-item',
      [
        { key: 'github:o/r#1', ...day1, bases: bothBases },
        { key: 'github:o/r#2', ...day2 },
      ],
    ],
    [
      'session',
      [
        { key: 's1', ...day1, bases: bothBases },
        { key: 's2', ...day2 },
      ],
    ],
    [
      'payer',
      [
        // Mixed: two priced rows and one unpriced.
        {
          key: 'api-key key:aaaaaaaaaaaa',
          rows: 3,
          turns: 2,
          input: 1_000_700,
          output: 100_070,
          cost: 4.5,
          unpriced: 1,
          bases: bothBases,
        },
        {
          key: 'subscription',
          rows: 1,
          turns: 1,
          input: 500,
          output: 50,
          cost: null,
          unpriced: 1,
          bases: [],
        },
      ],
    ],
  ])('by %s', (by, expected) => {
    const r = report(by);
    expect(r.by).toBe(by);
    expect(r.groups.map(summary)).toEqual(
      expected.map((g) => ({ ...g, cost: g.cost === null ? null : expect.closeTo(g.cost, 10) })),
    );
  });

  it('every grouping adds up to the same total', () => {
    for (const by of GROUP_BY) {
      const r = report(by);
      expect(summary(r.total)).toEqual({
        key: 'total',
        rows: 4,
        turns: 3,
        input: 1_001_200,
        output: 100_120,
        cost: expect.closeTo(4.5, 10),
        unpriced: 2,
        bases: ['engine-reported', 'list-price'],
      });
      expect(r.groups.reduce((n, g) => n + g.rows, 0)).toBe(r.total.rows);
      expect(r.since).toBe(SINCE.toISOString());
      expect(r.until).toBe(UNTIL.toISOString());
    }
  });

  it('says what the totals leave out: unpriced rows and models, unmetered runs grouped with count and last', () => {
    expect(report('day').notIncluded).toEqual({
      unmetered: [
        {
          engine: 'ollama',
          runner: 'tmux',
          reason: 'engine has no meter',
          count: 2,
          last: '2026-03-02T16:00:00.000Z',
        },
        {
          engine: 'claude',
          runner: 'process',
          reason: 'no result event',
          count: 1,
          last: '2026-03-01T08:00:00.000Z',
        },
      ],
      unmeteredCount: 3,
      unpricedModels: [MYSTERY],
      unpricedRows: 2,
    });
  });

  it('the window excludes rows and drives outside it (since inclusive, until exclusive)', () => {
    const wide = report('model', new Date('2026-02-01T00:00:00Z'), new Date('2026-04-01T00:00:00Z'));
    expect(wide.total.rows).toBe(6);
    expect(wide.notIncluded.unpricedModels).toEqual([MYSTERY, 'outside-model']);
    expect(wide.notIncluded.unmeteredCount).toBe(4);

    const secondDay = report('day', new Date('2026-03-02T00:00:00Z'), UNTIL);
    expect(secondDay.groups.map((g) => g.key)).toEqual(['2026-03-02']);
    expect(secondDay.total.costUsd).toBeNull();
    expect(secondDay.notIncluded.unmetered.map((d) => d.reason)).toEqual(['engine has no meter']);

    const exactlyOne = report(
      'day',
      new Date('2026-03-01T10:00:00.000Z'),
      new Date('2026-03-01T11:00:00.000Z'),
    );
    expect(exactlyOne.total.rows).toBe(1);
    expect(exactlyOne.total.costUsd).toBeCloseTo(3, 10);
  });

  it('an empty window: no groups, zero rows, cost null (not 0), nothing left out', () => {
    const empty = report('engine', new Date('2030-01-01T00:00:00Z'), new Date('2030-01-02T00:00:00Z'));
    expect(empty.groups).toEqual([]);
    expect(empty.total).toMatchObject({ rows: 0, turns: 0, costUsd: null, unpricedRows: 0, costBases: [] });
    expect(empty.notIncluded).toEqual({
      unmetered: [],
      unmeteredCount: 0,
      unpricedModels: [],
      unpricedRows: 0,
    });
    expect(formatGroupCost(empty.total)).toBe('-');
  });

  it('rows without engine, model, work item, session or payer id get placeholder keys', async () => {
    const ledger = new Ledger(new SqliteLedgerStore(db), priceTable());
    const { warnings } = await ledger.add([
      {
        meter: 'otel',
        sourceId: 'imported-1',
        at: '2026-03-01T12:00:00.000Z',
        sessionId: null,
        workItem: null,
        turnId: null,
        engine: null,
        runner: null,
        model: null,
        usage: u(1, 1),
        payer: { kind: 'unknown', id: null },
      },
    ]);
    expect(warnings).toEqual(['the usage names no model: its cost is unknown']);
    const keys = (by: GroupBy) => report(by).groups.map((g) => g.key);
    expect(keys('engine')).toContain('(imported)');
    expect(keys('model')).toContain('(no model)');
    expect(keys('work-item')).toContain('(no work item)');
    expect(keys('session')).toContain('(no session)');
    expect(keys('payer')).toContain('unknown');
    expect(report('model').notIncluded.unpricedModels).toEqual([MYSTERY, '(no model)'].sort());
    // A row without a turn adds a row but no turn.
    expect(report('day').total).toMatchObject({ rows: 5, turns: 3 });
  });

  it('formats every group of a real report without $0.00, unknown where nothing was priced', () => {
    const byModel = report('model');
    expect(byModel.groups.map(formatGroupCost)).toEqual(['~$4.50', 'unknown']);
    expect(formatGroupCost(byModel.total)).toBe('~$4.50 + unknown');
    expect(report('payer').groups.map(formatGroupCost)).toEqual(['~$4.50 + unknown', 'unknown']);
  });
});

describe('parseWhen', () => {
  const now = new Date('2026-03-10T12:00:00.000Z');

  it.each([
    ['7d', '2026-03-03T12:00:00.000Z'],
    ['24h', '2026-03-09T12:00:00.000Z'],
    ['30m', '2026-03-10T11:30:00.000Z'],
    ['2w', '2026-02-24T12:00:00.000Z'],
    ['0d', '2026-03-10T12:00:00.000Z'],
    [' 7d ', '2026-03-03T12:00:00.000Z'],
    ['2026-11-30', '2026-11-30T00:00:00.000Z'],
    ['2026-11-30T12:34:56Z', '2026-11-30T12:34:56.000Z'],
    ['2026-11-30T12:34:56.789Z', '2026-11-30T12:34:56.789Z'],
    ['2026-11-30T12:00:00+02:00', '2026-11-30T10:00:00.000Z'],
    ['2024-02-29', '2024-02-29T00:00:00.000Z'],
  ])('%j → %s', (text, iso) => {
    expect(parseWhen(text, now, '--since').toISOString()).toBe(iso);
  });

  it('a local date-time without a zone is local time', () => {
    expect(parseWhen('2026-11-30T12:00', now, '--since').getTime()).toBe(
      new Date(2026, 10, 30, 12, 0).getTime(),
    );
  });

  it.each([
    '7x',
    '',
    '   ',
    'yesterday',
    '9999999d',
    '2026-13-45',
    '2026-02-30',
    '2025-02-29',
    '2026-04-31',
    '-7d',
    '7',
    'd',
    '7d; DROP TABLE usage_ledger',
    '2026-11-30T25:00',
    '2026/11/30',
    '1e3d',
  ])('%j → a usage error naming the option', (text) => {
    const error = thrown(() => parseWhen(text, now, '--until'));
    expect(error.code).toBe('usage');
    expect(error.message).toContain('--until');
    expect(error.message).toContain(JSON.stringify(text));
  });
});

describe('formatUsd and formatGroupCost', () => {
  const amounts: number[] = [];
  for (let exponent = -9; exponent <= 3; exponent += 1) {
    for (let mantissa = 1; mantissa < 10; mantissa += 0.37) amounts.push(mantissa * 10 ** exponent);
  }
  amounts.push(
    Number.MIN_VALUE,
    1e-12,
    0.00001,
    0.0001,
    0.00009999,
    0.004,
    0.005,
    0.00499999,
    0.0099,
    0.00995,
    0.009999,
    0.0099999999,
    0.01,
    0.010001,
    0.099999,
    0.5,
    0.99995,
    0.999999,
    1,
    1.004,
    1.005,
    12.345,
    1234.5678,
  );

  it('no positive amount is ever shown as $0.00', () => {
    expect(amounts.length).toBeGreaterThan(250);
    for (const usd of amounts) {
      expect(usd).toBeGreaterThan(0);
      const shown = [
        formatUsd(usd),
        formatGroupCost({ rows: 1, costUsd: usd, unpricedRows: 0 }),
        formatGroupCost({ rows: 3, costUsd: usd, unpricedRows: 2 }),
      ];
      for (const text of shown) {
        expect(text, String(usd)).not.toContain('$0.00');
        // An estimate (~) — or, below a millionth of a dollar, a bound that still says "not zero".
        expect(text, String(usd)).toMatch(/^(~|<0\.0001¢)/);
        expect(text, String(usd)).not.toMatch(/^~0(\.0+)?¢/);
      }
    }
  });

  it('examples', () => {
    expect(formatUsd(0)).toBe('~0¢');
    expect(formatUsd(0.0021)).toBe('~0.21¢');
    expect(formatUsd(0.00005)).toBe('~0.0050¢');
    expect(formatUsd(0.01)).toBe('~$0.0100');
    expect(formatUsd(0.5)).toBe('~$0.5000');
    expect(formatUsd(4.5)).toBe('~$4.50');
  });

  it('a turn that reported no tokens is "no usage", never 0 tokens at ~0¢', () => {
    const zero = {
      inputTokens: 0,
      outputTokens: 0,
      cacheReadTokens: 0,
      cacheCreationTokens: 0,
      reasoningTokens: 0,
    };
    expect(formatTurnUsage({ usage: zero, costUsd: 0, meter: 'stream-json' })).toBe('no usage');
    expect(formatTurnUsage({ usage: zero, costUsd: null, meter: 'stream-json' })).toBe('no usage');
    expect(formatTurnUsage({ usage: null, costUsd: null, meter: 'none' })).toBe(
      'unmetered · cost unknown (unmetered engine)',
    );
    expect(
      formatTurnUsage({ usage: { ...zero, inputTokens: 5 }, costUsd: 0.0021, meter: 'stream-json' }),
    ).toBe('5 tokens (5 in, 0 out) · ~0.21¢ (engine-reported estimate)');
  });

  it('unknown, mixed and empty groups', () => {
    expect(formatGroupCost({ rows: 1, costUsd: 0, unpricedRows: 0 })).toBe('~0¢');
    expect(formatGroupCost({ rows: 2, costUsd: null, unpricedRows: 2 })).toBe('unknown');
    expect(formatGroupCost({ rows: 3, costUsd: 0.25, unpricedRows: 1 })).toBe('~$0.2500 + unknown');
    expect(formatGroupCost({ rows: 3, costUsd: 0, unpricedRows: 1 })).toBe('~0¢ + unknown');
    expect(formatGroupCost({ rows: 0, costUsd: null, unpricedRows: 0 })).toBe('-');
    expect(formatGroupCost({ rows: 0, costUsd: 5, unpricedRows: 0 })).toBe('-');
  });
});
