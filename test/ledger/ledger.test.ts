import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { TurnEvent, Usage } from '../../src/core/events.js';
import { Ledger, type LedgerEntry, type TurnContext } from '../../src/ledger/ledger.js';
import { type Payer, payerOf } from '../../src/ledger/payer.js';
import { pricesFromConfig, priceTable } from '../../src/ledger/pricing.js';
import type { TurnUsage } from '../../src/ledger/usage.js';
import { type Db, openDb } from '../../src/store/db.js';
import { SqliteLedgerStore } from '../../src/store/sqlite/ledger.js';

let dir: string;
let db: Db;
const NOW = new Date('2026-03-10T12:00:00.000Z');

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'the-loop-ledger-'));
  db = openDb(join(dir, 'state', 'registry.sqlite'));
});

afterEach(() => {
  if (db.open) db.close();
  rmSync(dir, { recursive: true, force: true });
});

const newLedger = (overrides = {}) =>
  new Ledger(new SqliteLedgerStore(db, { now: () => NOW }), priceTable(overrides));

const u = (input: number, output: number, cacheRead = 0, cacheCreation = 0, reasoning = 0): Usage => ({
  inputTokens: input,
  outputTokens: output,
  cacheReadTokens: cacheRead,
  cacheCreationTokens: cacheCreation,
  reasoningTokens: reasoning,
});

const API_PAYER: Payer = { kind: 'api-key', id: 'key:0123456789ab' };

const turn = (extra: Partial<TurnContext> = {}): TurnContext => ({
  sessionId: 'sess-1',
  workItem: 'github:octo/widgets#1',
  turnId: 7,
  engine: 'claude',
  runner: 'process',
  meter: 'transcript',
  endedAt: '2026-03-01T10:05:00.000Z',
  payer: API_PAYER,
  ...extra,
});

const turnUsage = (usage: Usage | null, model: string | null, costUsd: number | null): TurnUsage => ({
  usage,
  model,
  costUsd,
  nextBaseline: null,
  warnings: [],
});

const NO_USAGE = turnUsage(null, null, null);

const entry = (extra: Partial<LedgerEntry> = {}): LedgerEntry => ({
  meter: 'stream-json',
  sourceId: 'turn:1',
  at: '2026-03-01T10:00:00.000Z',
  sessionId: 'sess-1',
  workItem: 'github:octo/widgets#1',
  turnId: 1,
  engine: 'claude',
  runner: 'process',
  model: 'claude-sonnet-4-5',
  usage: u(1_000_000, 0),
  payer: API_PAYER,
  ...extra,
});

interface LedgerRow {
  meter: string;
  source_id: string;
  at: string;
  session_id: string | null;
  work_item: string | null;
  turn_id: number | null;
  engine: string | null;
  runner: string | null;
  model: string | null;
  input_tokens: number;
  output_tokens: number;
  cache_read_tokens: number;
  cache_creation_tokens: number;
  reasoning_tokens: number;
  cost_usd: number | null;
  cost_basis: string | null;
  price_key: string | null;
  payer_kind: string;
  payer_id: string | null;
  recorded_at: string;
}

const rows = (): LedgerRow[] => db.prepare('SELECT * FROM usage_ledger ORDER BY id').all() as LedgerRow[];
const drives = () =>
  db.prepare('SELECT at, session_id, work_item, turn_id, engine, runner, reason FROM unmetered_drives').all();

describe('Ledger.price', () => {
  it('keeps an engine-reported figure, computes list price when there is none', () => {
    const ledger = newLedger();
    expect(ledger.price({ usage: u(1_000_000, 0), model: 'claude-sonnet-4-5', engineCostUsd: 0.42 })).toEqual(
      {
        cost: 0.42,
        basis: 'engine-reported',
        priceKey: null,
      },
    );
    for (const engineCostUsd of [undefined, null]) {
      expect(ledger.price({ usage: u(1_000_000, 0), model: 'claude-sonnet-4-5', engineCostUsd })).toEqual({
        cost: 3,
        basis: 'list-price',
        priceKey: 'genai-prices@0.1.8:anthropic/claude-sonnet-4-5',
      });
    }
  });

  it('NaN, ±Infinity and negative engine figures are not a cost: list price is used instead', () => {
    const ledger = newLedger();
    for (const engineCostUsd of [
      Number.NaN,
      Number.POSITIVE_INFINITY,
      Number.NEGATIVE_INFINITY,
      -0.5,
      -1e-9,
    ]) {
      const priced = ledger.price({ usage: u(1_000_000, 0), model: 'claude-sonnet-4-5', engineCostUsd });
      expect(priced, String(engineCostUsd)).toEqual({
        cost: 3,
        basis: 'list-price',
        priceKey: 'genai-prices@0.1.8:anthropic/claude-sonnet-4-5',
      });
    }
    // …and with no list price either, the cost is unknown, not the bogus figure.
    const unknown = ledger.price({ usage: u(1, 1), model: 'mystery-1', engineCostUsd: -3 });
    expect(unknown.cost).toBeNull();
    expect(unknown.basis).toBeNull();
  });

  it('an unknown model or no model → cost null (not 0) with a warning', () => {
    const ledger = newLedger();
    const unknown = ledger.price({ usage: u(5, 5), model: 'mystery-model-9' });
    expect(unknown).toMatchObject({ cost: null, basis: null, priceKey: null });
    expect(unknown.warning).toContain('mystery-model-9');
    const none = ledger.price({ usage: u(5, 5), model: null });
    expect(none).toMatchObject({ cost: null, basis: null, priceKey: null });
    expect(none.warning).toMatch(/no model/);
  });

  it('uses config prices, with their date in the price key', () => {
    const ledger = new Ledger(
      new SqliteLedgerStore(db),
      priceTable(pricesFromConfig({ 'llama-3': { input: 1, output: 2, asOf: '2026-02-01', source: 'ops' } })),
    );
    expect(ledger.price({ usage: u(1_000_000, 1_000_000), model: 'llama-3' })).toEqual({
      cost: 3,
      basis: 'list-price',
      priceKey: 'llama-3@2026-02-01',
    });
  });
});

describe('Ledger.add', () => {
  it('stores every field, with the cost basis and payer, and is idempotent per (meter, source id)', async () => {
    const ledger = newLedger();
    const e = entry({ usage: u(1_000_000, 2, 3, 4, 5) });
    expect(await ledger.add([e])).toEqual({ inserted: 1, warnings: [] });
    expect(rows()).toEqual([
      {
        meter: 'stream-json',
        source_id: 'turn:1',
        at: '2026-03-01T10:00:00.000Z',
        session_id: 'sess-1',
        work_item: 'github:octo/widgets#1',
        turn_id: 1,
        engine: 'claude',
        runner: 'process',
        model: 'claude-sonnet-4-5',
        input_tokens: 1_000_000,
        output_tokens: 2,
        cache_read_tokens: 3,
        cache_creation_tokens: 4,
        reasoning_tokens: 5,
        cache_creation_1h_tokens: 0,
        cost_usd: expect.closeTo(3 + (7 * 15 + 3 * 0.3 + 4 * 3.75) / 1e6, 12),
        cost_basis: 'list-price',
        price_key: 'genai-prices@0.1.8:anthropic/claude-sonnet-4-5',
        payer_kind: 'api-key',
        payer_id: 'key:0123456789ab',
        recorded_at: NOW.toISOString(),
        partial: 0,
        id: expect.any(Number),
      },
    ]);
    // Again: nothing changes. A copy with a smaller output count changes nothing either.
    expect(await ledger.add([e])).toEqual({ inserted: 0, warnings: [] });
    expect((await ledger.add([{ ...e, usage: { ...e.usage, outputTokens: 0 } }])).inserted).toBe(0);
    expect(rows()).toHaveLength(1);
    expect(rows()[0]?.cost_basis).toBe('list-price');
    // A later copy with a larger output count (Claude Code's streamed copies carry placeholders)
    // corrects the output and its cost — and nothing else (the input stays the first record's).
    const before = rows()[0] as { input_tokens: number; output_tokens: number; cost_usd: number };
    expect(
      (
        await ledger.add([
          { ...e, usage: { ...e.usage, inputTokens: 999, outputTokens: before.output_tokens + 100 } },
        ])
      ).inserted,
    ).toBe(1);
    const after = rows()[0] as { input_tokens: number; output_tokens: number; cost_usd: number };
    expect(after.input_tokens).toBe(before.input_tokens);
    expect(after.output_tokens).toBe(before.output_tokens + 100);
    expect(after.cost_usd).toBeGreaterThan(before.cost_usd);
    expect(rows()).toHaveLength(1);
    // The same source id under another meter is another row.
    expect((await ledger.add([{ ...e, meter: 'otel' }])).inserted).toBe(1);
    expect(rows()).toHaveLength(2);
  });

  it('an unknown model is stored with cost NULL and basis NULL, never 0; warnings are deduplicated', async () => {
    const ledger = newLedger();
    const result = await ledger.add([
      entry({ sourceId: 'a', model: 'mystery-model-9' }),
      entry({ sourceId: 'b', model: 'mystery-model-9' }),
    ]);
    expect(result.inserted).toBe(2);
    expect(result.warnings).toHaveLength(1);
    expect(result.warnings[0]).toContain('mystery-model-9');
    const stored = db
      .prepare('SELECT COUNT(*) AS n FROM usage_ledger WHERE cost_usd IS NULL AND cost_basis IS NULL')
      .get() as { n: number };
    expect(stored.n).toBe(2);
    expect(db.prepare('SELECT COUNT(*) AS n FROM usage_ledger WHERE cost_usd = 0').get()).toEqual({ n: 0 });
  });

  it('a negative engine figure is never stored as a cost', async () => {
    await newLedger().add([
      entry({ engineCostUsd: -2 }),
      entry({ sourceId: 'x', model: 'mystery', engineCostUsd: -2 }),
    ]);
    expect(rows().map((r) => [r.cost_usd, r.cost_basis])).toEqual([
      [3, 'list-price'],
      [null, null],
    ]);
  });
});

describe('rows priced later (the price data learned their model)', () => {
  const blind = () =>
    new Ledger(new SqliteLedgerStore(db, { now: () => NOW }), priceTable({}, { lookup: () => undefined }));
  const opus = entry({ model: 'claude-opus-4-8', sourceId: 'turn:9', usage: u(1000, 100) });

  it('repriceUnknown prices what the table knows now, cost, basis and key together, once', async () => {
    await blind().add([opus, entry({ model: 'made-up-model', sourceId: 'turn:10' })]);
    expect(rows().map((r) => [r.cost_usd, r.cost_basis, r.price_key])).toEqual([
      [null, null, null],
      [null, null, null],
    ]);
    expect(await newLedger().repriceUnknown()).toBe(1);
    const [priced, unknown] = rows();
    // 1,000 in at $5/M and 100 out at $25/M.
    expect(priced?.cost_usd).toBeCloseTo(0.0075, 12);
    expect([priced?.cost_basis, priced?.price_key]).toEqual([
      'list-price',
      'genai-prices@0.1.8:anthropic/claude-opus-4-8',
    ]);
    expect([unknown?.cost_usd, unknown?.cost_basis]).toEqual([null, null]);
    expect(await newLedger().repriceUnknown()).toBe(0);
  });

  it('the same row recorded again with a price takes it, with its basis and key', async () => {
    await blind().add([opus]);
    expect((await newLedger().add([opus])).inserted).toBe(1);
    expect(rows().map((r) => [r.cost_basis, r.price_key])).toEqual([
      ['list-price', 'genai-prices@0.1.8:anthropic/claude-opus-4-8'],
    ]);
    expect(rows()[0]?.cost_usd).toBeCloseTo(0.0075, 12);
  });
});

describe('Ledger.recordTurn', () => {
  const transcriptEvents: TurnEvent[] = [
    { type: 'session', engineSessionId: 'e-1' },
    {
      type: 'usage',
      usage: u(1_000_000, 0),
      model: 'claude-sonnet-4-5-20250929',
      sourceId: 'req_01',
      at: '2026-03-01T10:00:00.000Z',
    },
    { type: 'text', text: 'working' },
    {
      type: 'usage',
      usage: u(10, 20),
      model: 'claude-sonnet-4-5-20250929',
      sourceId: 'req_02',
      at: '2026-03-01T10:01:00.000Z',
      costUsd: 0.0123,
    },
    { type: 'usage', usage: u(1, 1), model: 'claude-haiku-4-5' },
    { type: 'turn-end', ok: true },
  ];

  it('transcript meter: one row per usage event, keyed by its source id', async () => {
    const ledger = newLedger();
    const result = await ledger.recordTurn(turn(), transcriptEvents, NO_USAGE, 'unused');
    expect(result).toEqual({ inserted: 3, warnings: [], unmetered: false });
    expect(
      rows().map((r) => [
        r.meter,
        r.source_id,
        r.at,
        r.model,
        r.turn_id,
        r.cost_basis,
        r.payer_kind,
        r.payer_id,
      ]),
    ).toEqual([
      [
        'transcript',
        'req_01',
        '2026-03-01T10:00:00.000Z',
        'claude-sonnet-4-5-20250929',
        7,
        'list-price',
        'api-key',
        'key:0123456789ab',
      ],
      [
        'transcript',
        'req_02',
        '2026-03-01T10:01:00.000Z',
        'claude-sonnet-4-5-20250929',
        7,
        'engine-reported',
        'api-key',
        'key:0123456789ab',
      ],
      // No source id: keyed by turn and position; no time: the turn's end.
      [
        'transcript',
        'turn:7:3',
        '2026-03-01T10:05:00.000Z',
        'claude-haiku-4-5',
        7,
        'list-price',
        'api-key',
        'key:0123456789ab',
      ],
    ]);
    // One request of a million input tokens: every token at the long-context tier (over 200k), $6.
    expect(rows().map((r) => r.cost_usd)).toEqual([6, 0.0123, expect.closeTo(6e-6, 12)]);
    expect(drives()).toEqual([]);
  });

  it('transcript meter: recording the same events again inserts nothing; a new request only adds itself', async () => {
    const ledger = newLedger();
    await ledger.recordTurn(turn(), transcriptEvents, NO_USAGE, 'unused');
    expect(await ledger.recordTurn(turn(), transcriptEvents, NO_USAGE, 'unused')).toEqual({
      inserted: 0,
      warnings: [],
      unmetered: false,
    });
    expect(rows()).toHaveLength(3);
    const more: TurnEvent[] = [
      ...transcriptEvents.slice(0, 4),
      { type: 'usage', usage: u(2, 2), model: 'claude-sonnet-4-5', sourceId: 'req_03' },
    ];
    expect((await ledger.recordTurn(turn(), more, NO_USAGE, 'unused')).inserted).toBe(1);
    expect(rows().map((r) => r.source_id)).toEqual(['req_01', 'req_02', 'turn:7:3', 'req_03']);
  });

  it("transcript meter: a request's later events (the rest of a placeholder output) add into its row", async () => {
    const ledger = newLedger();
    const events: TurnEvent[] = [
      {
        type: 'usage',
        usage: u(100, 1),
        model: 'claude-sonnet-4-5',
        sourceId: 'msg_9',
        at: '2026-03-01T10:00:00.000Z',
      },
      { type: 'text', text: 'streaming' },
      {
        type: 'usage',
        usage: u(0, 47),
        model: 'claude-sonnet-4-5',
        sourceId: 'msg_9',
        at: '2026-03-01T10:00:02.000Z',
      },
    ];
    expect((await ledger.recordTurn(turn(), events, NO_USAGE, 'unused')).inserted).toBe(1);
    expect(rows().map((r) => [r.source_id, r.input_tokens, r.output_tokens, r.at])).toEqual([
      ['msg_9', 100, 48, '2026-03-01T10:00:00.000Z'],
    ]);
    // Priced for all 48 output tokens (sonnet: $3 in, $15 out per million).
    expect(rows()[0]?.cost_usd).toBeCloseTo((100 * 3 + 48 * 15) / 1e6, 12);
  });

  it('transcript meter: a correction that arrives in a later turn sets the total, not the difference', async () => {
    const ledger = newLedger();
    await ledger.recordTurn(
      turn(),
      [
        {
          type: 'usage',
          usage: u(100, 1),
          model: 'claude-sonnet-4-5',
          sourceId: 'msg_late',
          at: '2026-03-01T10:00:00.000Z',
        },
      ],
      NO_USAGE,
      'unused',
    );
    await ledger.recordTurn(
      turn({ turnId: 8 }),
      [
        {
          type: 'usage',
          usage: u(0, 47),
          model: 'claude-sonnet-4-5',
          sourceId: 'msg_late',
          at: '2026-03-01T10:00:02.000Z',
          outputTotal: 48,
        },
      ],
      NO_USAGE,
      'unused',
    );
    expect(rows().map((r) => [r.source_id, r.input_tokens, r.output_tokens, r.turn_id])).toEqual([
      ['msg_late', 100, 48, 7],
    ]);
  });

  it('result meter: one row turn:<id> from the turn usage, engine-reported cost kept', async () => {
    const ledger = newLedger();
    const context = turn({ meter: 'stream-json', turnId: 12, endedAt: '2026-03-02T08:00:00.000Z' });
    // Result meters ignore per-event figures: the turn usage is the figure.
    const result = await ledger.recordTurn(
      context,
      transcriptEvents,
      turnUsage(u(3, 12, 0, 5120), 'claude-sonnet-4-5', 0.032315),
      'unused',
    );
    expect(result).toEqual({ inserted: 1, warnings: [], unmetered: false });
    expect(rows()).toEqual([
      expect.objectContaining({
        meter: 'stream-json',
        source_id: 'turn:12',
        at: '2026-03-02T08:00:00.000Z',
        turn_id: 12,
        model: 'claude-sonnet-4-5',
        input_tokens: 3,
        output_tokens: 12,
        cache_creation_tokens: 5120,
        cost_usd: 0.032315,
        cost_basis: 'engine-reported',
        price_key: null,
      }),
    ]);
    expect(
      (await ledger.recordTurn(context, [], turnUsage(u(3, 12), 'claude-sonnet-4-5', 0.5), 'unused'))
        .inserted,
    ).toBe(0);
    expect(rows()).toHaveLength(1);
  });

  it('result meter without an engine figure: list price', async () => {
    await newLedger().recordTurn(
      turn({ meter: 'codex-json', engine: 'codex' }),
      [],
      turnUsage(u(1_000_000, 100_000, 0, 0, 100_000), 'gpt-5-codex', null),
      'unused',
    );
    const [row] = rows();
    expect(row?.cost_basis).toBe('list-price');
    expect(row?.price_key).toBe('genai-prices@0.1.8:openai/gpt-5');
    // 1.25 + (0.1 + 0.1) × 10
    expect(row?.cost_usd).toBeCloseTo(3.25, 10);
  });

  it('an unknown model: cost NULL, basis NULL, and a warning naming the model', async () => {
    const result = await newLedger().recordTurn(
      turn({ meter: 'gemini-json', engine: 'gemini' }),
      [],
      turnUsage(u(100, 10), 'gemini-9-ultra', null),
      'unused',
    );
    expect(result.inserted).toBe(1);
    expect(result.unmetered).toBe(false);
    expect(result.warnings).toHaveLength(1);
    expect(result.warnings[0]).toContain('gemini-9-ultra');
    expect(rows()[0]).toMatchObject({ cost_usd: null, cost_basis: null, price_key: null, input_tokens: 100 });
  });

  it("meter 'none' → one unmetered drive with the reason, once per turn id, and no ledger row", async () => {
    const ledger = newLedger();
    const context = turn({ meter: 'none', engine: 'ollama', runner: 'tmux', turnId: 21 });
    const usage = turnUsage(u(5, 5), 'claude-sonnet-4-5', 1);
    expect(await ledger.recordTurn(context, transcriptEvents, usage, 'ollama has no meter')).toEqual({
      inserted: 0,
      warnings: [],
      unmetered: true,
    });
    await ledger.recordTurn(context, transcriptEvents, usage, 'ollama has no meter');
    expect(drives()).toEqual([
      {
        at: '2026-03-01T10:05:00.000Z',
        session_id: 'sess-1',
        work_item: 'github:octo/widgets#1',
        turn_id: 21,
        engine: 'ollama',
        runner: 'tmux',
        reason: 'ollama has no meter',
      },
    ]);
    expect(rows()).toEqual([]);
  });

  it('a metered turn that reported no usage is an unmetered drive too', async () => {
    const ledger = newLedger();
    expect(
      await ledger.recordTurn(turn({ meter: 'stream-json', turnId: 31 }), [], NO_USAGE, 'no result event'),
    ).toEqual({
      inserted: 0,
      warnings: [],
      unmetered: true,
    });
    const noUsageEvents: TurnEvent[] = [{ type: 'text', text: 'hi' }];
    expect(
      (await ledger.recordTurn(turn({ turnId: 32 }), noUsageEvents, NO_USAGE, 'no transcript')).unmetered,
    ).toBe(true);
    expect(drives()).toEqual([
      expect.objectContaining({ turn_id: 31, reason: 'no result event' }),
      expect.objectContaining({ turn_id: 32, reason: 'no transcript' }),
    ]);
    expect(rows()).toEqual([]);
  });

  it('rows carry the payer of the turn, and the registry never holds the API key itself', async () => {
    const canary = 'sk-ant-api03-LEDGERCANARY-0123456789abcdef-zz';
    const salt = Buffer.alloc(32, 7);
    const payer = payerOf({ env: 'ANTHROPIC_API_KEY', kind: 'api-key' }, { ANTHROPIC_API_KEY: canary }, salt);
    const ledger = newLedger();
    await ledger.recordTurn(turn({ payer }), transcriptEvents, NO_USAGE, 'unused');
    await ledger.recordTurn(
      turn({ meter: 'stream-json', turnId: 8, payer: { kind: 'cloud', id: 'bedrock' } }),
      [],
      turnUsage(u(1, 1), 'claude-sonnet-4-5', null),
      'unused',
    );
    await ledger.recordTurn(
      turn({ meter: 'stream-json', turnId: 9, payer: { kind: 'subscription', id: null } }),
      [],
      turnUsage(u(1, 1), 'claude-sonnet-4-5', null),
      'unused',
    );
    expect(rows().map((r) => [r.turn_id, r.payer_kind, r.payer_id])).toEqual([
      [7, 'api-key', payer.id],
      [7, 'api-key', payer.id],
      [7, 'api-key', payer.id],
      [8, 'cloud', 'bedrock'],
      [9, 'subscription', null],
    ]);
    db.close();
    for (const file of readdirSync(join(dir, 'state'))) {
      expect(readFileSync(join(dir, 'state', file)).includes(canary), file).toBe(false);
      expect(readFileSync(join(dir, 'state', file)).includes('LEDGERCANARY'), file).toBe(false);
    }
  });
});

describe('hostile input', () => {
  const hostile = [
    'evil\u0000nul\u001b[31mred\u0007\r\nnext-line\u009b2J',
    'x'.repeat(10_240),
    "claude'); DROP TABLE usage_ledger; --",
    'm" OR "1"="1',
    '%_*?[]\\',
  ];

  it('model names and reasons are stored and reported back verbatim (bound parameters, not SQL)', async () => {
    const ledger = newLedger();
    const result = await ledger.add(
      hostile.map((model, i) =>
        entry({ sourceId: `hostile-${i}`, model, workItem: model, sessionId: model }),
      ),
    );
    expect(result.inserted).toBe(hostile.length);
    // Each unpriced model is named in a warning, verbatim.
    for (const model of hostile) expect(result.warnings.some((w) => w.includes(model))).toBe(true);
    await ledger.recordTurn(
      turn({ meter: 'none', turnId: 99, engine: hostile[2] ?? '' }),
      [],
      NO_USAGE,
      hostile[0] ?? '',
    );

    const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as {
      name: string;
    }[];
    expect(tables.map((t) => t.name)).toEqual(expect.arrayContaining(['usage_ledger', 'unmetered_drives']));
    expect(rows().map((r) => r.model)).toEqual(hostile);

    const window = { since: new Date('2026-01-01T00:00:00Z'), until: new Date('2027-01-01T00:00:00Z') };
    for (const by of ['model', 'work-item', 'session'] as const) {
      const report = await ledger.store.report({ ...window, by });
      expect(report.groups.map((g) => g.key).sort()).toEqual([...hostile].sort());
      expect(report.groups.every((g) => g.rows === 1 && g.costUsd === null)).toBe(true);
    }
    const report = await ledger.store.report({ ...window, by: 'model' });
    expect(report.notIncluded.unpricedModels.sort()).toEqual([...hostile].sort());
    expect(report.notIncluded.unmetered).toEqual([
      {
        engine: hostile[2],
        runner: 'process',
        reason: hostile[0],
        count: 1,
        last: '2026-03-01T10:05:00.000Z',
      },
    ]);
  });
});
