import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Usage } from '../../src/core/events.js';
import { mapTranscriptLine } from '../../src/engines/transcripts/claude-transcript-records.js';
import { createUsageMeter } from '../../src/gateway/models/usage.js';
import { matchesWhole } from '../../src/ledger/genai-prices.js';
import { Ledger, type LedgerEntry } from '../../src/ledger/ledger.js';
import { listPriceCost, type ModelPrice, priceTable } from '../../src/ledger/pricing.js';
import { recordOf } from '../../src/ledger/scan-file.js';
import { type Db, openDb } from '../../src/store/db.js';
import { SqliteLedgerStore } from '../../src/store/sqlite/ledger.js';
import { usage } from '../helpers/usage.js';

// Issue 16's models (Anthropic's three of today, a current Codex model, a current Gemini model), the
// 1-hour cache writes of Claude's transcripts and responses, and ids the dataset would price as
// another model by a prefix that stops inside a version number.

type Lib = typeof import('@pydantic/genai-prices');
const lib = createRequire(import.meta.url)('@pydantic/genai-prices') as Lib;
const AT = '2026-11-20T10:00:00.000Z';

/** The library's own price of one request (its kinds nest: input includes the cache, 1h is part of writes). */
function theirs(model: string, u: Usage): number {
  const r = lib.calcPrice(
    {
      input_tokens: u.inputTokens + u.cacheReadTokens + u.cacheCreationTokens,
      cache_read_tokens: u.cacheReadTokens,
      cache_write_tokens: u.cacheCreationTokens,
      ...(u.cacheCreation1hTokens ? { cache_write_1h_tokens: u.cacheCreation1hTokens } : {}),
      output_tokens: u.outputTokens + u.reasoningTokens,
    },
    model,
    { timestamp: new Date(AT) },
  );
  if (!r) throw new Error(`the library does not price ${model}`);
  return r.total_price;
}

describe("issue 16's models, priced as the library's calcPrice prices them", () => {
  const table = priceTable();
  const cases: Array<[string, Partial<Usage>]> = [
    [
      'claude-opus-4-8',
      { inputTokens: 1200, outputTokens: 300, cacheReadTokens: 40_000, cacheCreationTokens: 2000 },
    ],
    [
      'claude-opus-4-8',
      { inputTokens: 10, outputTokens: 50, cacheCreationTokens: 30_000, cacheCreation1hTokens: 20_000 },
    ],
    ['claude-sonnet-4-5-20250929', { inputTokens: 800, outputTokens: 900, cacheCreationTokens: 5000 }],
    // Over 200k input (cache included): the long-context rates, the 1-hour writes' too.
    [
      'claude-sonnet-4-5',
      {
        inputTokens: 150_000,
        outputTokens: 4000,
        cacheCreationTokens: 70_000,
        cacheCreation1hTokens: 70_000,
      },
    ],
    [
      'claude-haiku-4-5-20251001',
      { inputTokens: 3000, outputTokens: 700, cacheCreation1hTokens: 9000, cacheCreationTokens: 9000 },
    ],
    ['gpt-5.5', { inputTokens: 9000, outputTokens: 700, cacheReadTokens: 30_000, reasoningTokens: 300 }],
    [
      'gemini-3-pro-preview',
      { inputTokens: 12_000, outputTokens: 800, cacheReadTokens: 4000, reasoningTokens: 200 },
    ],
  ];
  it.each(cases)('%s %o', (model, partial) => {
    const u = usage(partial);
    const rate = table.lookup(model, AT);
    expect(rate?.key).toMatch(/^genai-prices@0\.1\.8:(anthropic|openai|google)\//);
    const key = model.replace(/-\d{8}$/, '');
    expect(rate?.cost(u)).toBeCloseTo(theirs(key, u), 12);
  });

  it('a 1-hour cache write costs what the dataset says, not the 5-minute price', () => {
    const rate = table.lookup('claude-opus-4-8', AT);
    // 1,000,000 cache writes: 6.25 at 5 minutes, 10 at one hour (dataset 0.1.8); half and half.
    expect(rate?.cost(usage({ cacheCreationTokens: 1_000_000 }))).toBeCloseTo(6.25, 10);
    expect(
      rate?.cost(usage({ cacheCreationTokens: 1_000_000, cacheCreation1hTokens: 1_000_000 })),
    ).toBeCloseTo(10, 10);
    expect(rate?.cost(usage({ cacheCreationTokens: 1_000_000, cacheCreation1hTokens: 500_000 }))).toBeCloseTo(
      8.125,
      10,
    );
    // A 1-hour count larger than the writes it is part of is held to them.
    expect(rate?.cost(usage({ cacheCreationTokens: 10, cacheCreation1hTokens: 1_000_000 }))).toBeCloseTo(
      10 * 10e-6,
      12,
    );
  });

  it('a config price prices 1-hour writes at its cacheWrite1h', () => {
    const price: ModelPrice = {
      input: 3,
      output: 15,
      cacheRead: 0.3,
      cacheWrite5m: 3.75,
      cacheWrite1h: 6,
      asOf: '2026-11',
      source: 'test',
    };
    expect(
      listPriceCost(usage({ cacheCreationTokens: 4_000_000, cacheCreation1hTokens: 1_000_000 }), price),
    ).toBeCloseTo(3 * 3.75 + 6, 10);
  });
});

describe('an id that matches a dataset entry only by a prefix ending inside a version number', () => {
  const table = priceTable();
  it.each([
    ['claude-opus-4-10', 'claude-opus-4-1'],
    ['claude-sonnet-5-1', 'claude-sonnet-5'],
    ['claude-sonnet-5-1-20270101', 'claude-sonnet-5'],
    ['claude-opus-4-10-thinking', 'claude-opus-4-1'],
  ])('%s is unknown (the dataset alone would price it as %s)', (id, wouldBe) => {
    expect(lib.calcPrice({ input_tokens: 1, output_tokens: 1 }, id.replace(/-\d{8}$/, ''))?.model.id).toBe(
      wouldBe,
    );
    expect(table.lookup(id, AT)).toBeUndefined();
  });

  it.each([
    ['claude-opus-4-1', 'anthropic/claude-opus-4-1'],
    ['claude-opus-4-1-20250805', 'anthropic/claude-opus-4-1'],
    ['claude-sonnet-5', 'anthropic/claude-sonnet-5'],
    ['claude-3-5-sonnet-latest', 'anthropic/claude-3-5-sonnet'],
    ['gpt-4-0613', 'openai/gpt-4'],
    ['gpt-4o-2024-08-06', 'openai/gpt-4o'],
    ['o3-mini-2025-01-31', 'openai/o3-mini'],
    ['gpt-5-codex', 'openai/gpt-5'],
    ['gpt-5.1-codex', 'openai/gpt-5.1'],
    ['gemini-2.5-flash-lite', 'google/gemini-2.5-flash-lite'],
  ])('%s is still priced (%s)', (id, entry) => {
    expect(table.lookup(id, AT)?.key).toBe(`genai-prices@0.1.8:${entry}`);
  });

  it('matchesWhole reads every form of the dataset’s match rules', () => {
    expect(matchesWhole({ starts_with: 'claude-opus-4-1' }, 'claude-opus-4-1')).toBe(true);
    expect(matchesWhole({ starts_with: 'claude-opus-4-1' }, 'claude-opus-4-10')).toBe(false);
    expect(matchesWhole({ starts_with: 'gpt-5' }, 'gpt-5.9')).toBe(false);
    expect(matchesWhole({ starts_with: 'gpt-5' }, 'gpt-5-mini')).toBe(true);
    expect(matchesWhole({ starts_with: 'gpt-4' }, 'gpt-4-0613')).toBe(true);
    expect(matchesWhole({ starts_with: 'claude-opus' }, 'claude-opus-4-10')).toBe(true);
    const either = { or: [{ starts_with: 'claude-opus-4-1' }, { equals: 'claude-opus-4-10' }] };
    expect(matchesWhole(either, 'claude-opus-4-10')).toBe(true);
    expect(matchesWhole({ and: [{ starts_with: 'x-1' }, { contains: 'pro' }] }, 'x-1-pro')).toBe(true);
    expect(matchesWhole({ and: [{ starts_with: 'x-1' }, { contains: 'pro' }] }, 'x-12-pro')).toBe(false);
    expect(matchesWhole({ ends_with: '-pro' }, 'A-PRO')).toBe(true);
    expect(matchesWhole({ regex: '^m-\\d+$' }, 'm-42')).toBe(true);
  });
});

describe('the 1-hour cache writes reach the ledger', () => {
  const record = (cacheCreation: Record<string, number> | undefined, total = 3000) =>
    JSON.stringify({
      type: 'assistant',
      uuid: 'u-1',
      sessionId: 's-1',
      timestamp: AT,
      requestId: 'req_1',
      message: {
        id: 'msg_1',
        model: 'claude-opus-4-8',
        content: [{ type: 'text', text: 'ok' }],
        usage: {
          input_tokens: 10,
          output_tokens: 20,
          cache_read_input_tokens: 0,
          cache_creation_input_tokens: total,
          ...(cacheCreation ? { cache_creation: cacheCreation } : {}),
        },
      },
    });

  it('from a transcript record (the tmux meter) and a scanned line (usage scan)', () => {
    const split = { ephemeral_5m_input_tokens: 1000, ephemeral_1h_input_tokens: 2000 };
    expect(mapTranscriptLine(record(split), new Set()).request?.usage).toEqual({
      inputTokens: 10,
      outputTokens: 20,
      cacheReadTokens: 0,
      cacheCreationTokens: 3000,
      reasoningTokens: 0,
      cacheCreation1hTokens: 2000,
    });
    expect(
      mapTranscriptLine(record(undefined), new Set()).request?.usage.cacheCreation1hTokens,
    ).toBeUndefined();
    expect((recordOf(Buffer.from(record(split))) as unknown[])[8]).toBe(2000);
    expect((recordOf(Buffer.from(record(undefined))) as unknown[])[8]).toBe(0);
    // Hostile figures: more 1-hour writes than writes is held to the total; a negative one is none.
    expect((recordOf(Buffer.from(record({ ephemeral_1h_input_tokens: 9e9 }))) as unknown[])[8]).toBe(3000);
    expect((recordOf(Buffer.from(record({ ephemeral_1h_input_tokens: -5 }))) as unknown[])[8]).toBe(0);
    expect(
      mapTranscriptLine(record({ ephemeral_1h_input_tokens: 9e9 }), new Set()).request?.usage,
    ).toMatchObject({
      cacheCreation1hTokens: 3000,
    });
    expect(
      mapTranscriptLine(record({ ephemeral_1h_input_tokens: -5 }), new Set()).request?.usage
        .cacheCreation1hTokens,
    ).toBeUndefined();
  });

  it("from an Anthropic response at the wire (the gateway's meter)", () => {
    const meter = createUsageMeter('anthropic', 'json');
    meter.push(
      Buffer.from(
        JSON.stringify({
          id: 'msg_w',
          type: 'message',
          model: 'claude-opus-4-8',
          content: [],
          usage: {
            input_tokens: 5,
            output_tokens: 6,
            cache_creation_input_tokens: 700,
            cache_creation: { ephemeral_5m_input_tokens: 300, ephemeral_1h_input_tokens: 400 },
          },
        }),
      ),
    );
    expect(meter.finish(AT)?.usage).toMatchObject({ cacheCreationTokens: 700, cacheCreation1hTokens: 400 });
  });

  describe('in the SQLite ledger (a real file)', () => {
    let dir: string;
    let db: Db;
    beforeEach(() => {
      dir = mkdtempSync(join(tmpdir(), 'the-loop-prices-'));
      db = openDb(join(dir, 'the-loop.db'));
    });
    afterEach(() => {
      if (db.open) db.close();
      rmSync(dir, { recursive: true, force: true });
    });
    const entry = (model: string, u: Usage): LedgerEntry => ({
      meter: 'transcript',
      sourceId: `msg_${model}`,
      at: AT,
      sessionId: null,
      workItem: null,
      turnId: null,
      engine: 'claude',
      runner: null,
      model,
      usage: u,
      payer: { kind: 'unknown', id: null },
    });

    it('keeps the 1-hour part with the row, prices it, and prices it again when repriced', async () => {
      const u = usage({ cacheCreationTokens: 1_000_000, cacheCreation1hTokens: 1_000_000 });
      const known = new Ledger(new SqliteLedgerStore(db), priceTable());
      await known.add([entry('claude-opus-4-8', u)]);
      // Recorded while nothing priced it, then priced by a table that knows it: the same 1-hour price.
      const blind = new Ledger(new SqliteLedgerStore(db), priceTable({}, { lookup: () => undefined }));
      await blind.add([entry('claude-haiku-4-5', u)]);
      const row = (model: string) =>
        db
          .prepare(
            'SELECT cost_usd, cache_creation_tokens, cache_creation_1h_tokens FROM usage_ledger WHERE model = ?',
          )
          .get(model) as {
          cost_usd: number | null;
          cache_creation_tokens: number;
          cache_creation_1h_tokens: number;
        };
      expect(row('claude-opus-4-8')).toEqual({
        cost_usd: expect.closeTo(10, 10),
        cache_creation_tokens: 1_000_000,
        cache_creation_1h_tokens: 1_000_000,
      });
      expect(row('claude-haiku-4-5').cost_usd).toBeNull();
      expect(await known.repriceUnknown()).toBe(1);
      // Haiku 4.5: 2 per million 1-hour writes (1.25 at 5 minutes).
      expect(row('claude-haiku-4-5').cost_usd).toBeCloseTo(2, 10);
    });

    it('an id the dataset would price as another model stays unknown, and is named', async () => {
      const ledger = new Ledger(new SqliteLedgerStore(db), priceTable());
      const { warnings } = await ledger.add([entry('claude-opus-4-10', usage({ inputTokens: 1000 }))]);
      expect(warnings).toEqual([
        'no list price for model claude-opus-4-10: its cost is unknown (add it under pricing: in the config)',
      ]);
      const report = await ledger.store.report({
        since: new Date(0),
        until: new Date(Date.parse(AT) + 1),
        by: 'model',
      });
      expect(report.notIncluded.unpricedModels).toEqual(['claude-opus-4-10']);
      expect(report.total.costUsd).toBeNull();
    });
  });
});
