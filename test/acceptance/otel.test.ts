import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Usage } from '../../src/core/events.js';
import { prepareClaudeHome } from '../fixtures/engine-homes/claude.js';
import { startAnthropicMock } from '../fixtures/mock-apis/anthropic.js';
import { runCli } from '../helpers/cli.js';
import {
  anthropicUsage,
  type EngineUnderTest,
  expectCanaryNowhere,
  realBinary,
  runTwoTurns,
  type TwoTurnRun,
} from './helpers.js';

const claude: EngineUnderTest = {
  engine: 'claude',
  realBinary: realBinary('claude'),
  startMock: startAnthropicMock,
  prepareHome: (root, url) => prepareClaudeHome(root, url),
  expectedUsage: anthropicUsage,
  credentialHeader: (h) => h['x-api-key'] as string | undefined,
};

interface Row {
  meter: string;
  source_id: string;
  session_id: string;
  turn_id: number | null;
  model: string | null;
  input_tokens: number;
  output_tokens: number;
  cache_read_tokens: number;
  cache_creation_tokens: number;
  reasoning_tokens: number;
  cost_usd: number | null;
  cost_basis: string | null;
  payer_kind: string;
  payer_id: string | null;
}

function ledger(run: TwoTurnRun): {
  rows: Row[];
  drives: number;
  turns: Array<{ id: number; meter: string }>;
} {
  const db = new Database(join(run.dataDir, 'the-loop.db'), { readonly: true });
  try {
    return {
      rows: db.prepare('SELECT * FROM usage_ledger ORDER BY id').all() as Row[],
      drives: (db.prepare('SELECT COUNT(*) FROM unmetered_drives').pluck().get() as number) ?? 0,
      turns: db.prepare('SELECT id, meter FROM turns ORDER BY id').all() as Array<{
        id: number;
        meter: string;
      }>,
    };
  } finally {
    db.close();
  }
}

const sumRows = (rows: Row[]): Usage => ({
  inputTokens: rows.reduce((n, r) => n + r.input_tokens, 0),
  outputTokens: rows.reduce((n, r) => n + r.output_tokens, 0),
  cacheReadTokens: rows.reduce((n, r) => n + r.cache_read_tokens, 0),
  cacheCreationTokens: rows.reduce((n, r) => n + r.cache_creation_tokens, 0),
  reasoningTokens: rows.reduce((n, r) => n + r.reasoning_tokens, 0),
});

/** The session's OTLP token, recomputed from the data dir's key: it must leak nowhere either. */
function sessionToken(run: TwoTurnRun): string {
  const key = Buffer.from(readFileSync(join(run.dataDir, 'otel-key'), 'utf8').trim(), 'hex');
  const id = run.show.session.id;
  return `tl1.${id}.${createHmac('sha256', key).update(`otel:${id}`).digest('hex').slice(0, 32)}`;
}

function expectTokenNowhere(run: TwoTurnRun): void {
  const token = sessionToken(run);
  const argv = readFileSync(run.argvFile, 'utf8');
  expect(argv).not.toContain(token);
  for (const name of ['the-loop.db', 'the-loop.db-wal', 'the-loop.log']) {
    let bytes: Buffer;
    try {
      bytes = readFileSync(join(run.dataDir, name));
    } catch {
      continue;
    }
    expect(bytes.includes(token), `${name} holds the OTLP token`).toBe(false);
  }
  for (const out of run.outputs) expect(out.stdout + out.stderr).not.toContain(token);
}

describe.each([
  ['logs', /^[0-9a-f-]{36}:log:req_/],
  ['metrics', /^[0-9a-f-]{36}:metric:[0-9a-f]{24}$/],
] as const)(
  'real Claude Code metered by OpenTelemetry (%s signal), two turns through `the-loop run`',
  (signal, sourceId) => {
    let run: TwoTurnRun;
    beforeAll(async () => {
      run = await runTwoTurns(
        claude,
        ['Remember the word GUAVA-12.', 'What was the word?'],
        ['Noted: GUAVA-12.', 'It was GUAVA-12.'],
        { otel: { enabled: true, signal, exportIntervalMs: 500 } },
        // OpenTelemetry meters an engine the gateway does not (its wire meter would win).
        { gateway: { enabled: false } },
      );
    }, 300_000);
    afterAll(async () => run?.cleanup());

    it("records the engine's telemetry as otel rows whose token sums equal the mock's", () => {
      const { rows, drives, turns } = ledger(run);
      expect(turns.map((t) => t.meter)).toEqual(['otel', 'otel']);
      expect(rows.length).toBeGreaterThanOrEqual(2);
      for (const r of rows) {
        expect(r.meter).toBe('otel');
        expect(r.source_id).toMatch(sourceId);
        expect(r.session_id).toBe(run.show.session.id);
        expect(r.payer_kind).toBe('api-key');
        expect(r.payer_id).toMatch(/^key:[0-9a-f]{12}$/);
        // Claude Code computes the cost itself: labelled as the engine's figure.
        expect(r.cost_basis).toBe('engine-reported');
        expect(r.cost_usd).toBeGreaterThan(0);
      }
      expect(sumRows(rows)).toEqual(claude.expectedUsage(run.mock.reported));
      // Each turn's requests are attributed to it; the first turn's equal the first response's.
      const [n1 = 0] = run.turnRequests;
      expect(sumRows(rows.filter((r) => r.turn_id === turns[0]?.id))).toEqual(
        claude.expectedUsage(run.mock.reported.slice(0, n1)),
      );
      expect(rows.every((r) => r.turn_id !== null)).toBe(true);
      // Telemetry arrived before each turn ended: nothing waits as unmetered.
      expect(drives).toBe(0);
    });

    it('the report counts them once, with nothing left out', async () => {
      const env = { THE_LOOP_CONFIG: join(run.root, 'config.yaml') };
      const json = await runCli(['usage', '--json'], { cwd: run.root, env });
      run.outputs.push({ stdout: json.stdout, stderr: json.stderr });
      expect(json.code, json.stderr).toBe(0);
      const report = JSON.parse(json.stdout) as {
        total: { usage: Usage; turns: number };
        notIncluded: { unmeteredCount: number };
      };
      expect(report.total.usage).toEqual(claude.expectedUsage(run.mock.reported));
      expect(report.total.turns).toBe(2);
      expect(report.notIncluded.unmeteredCount).toBe(0);
    });

    it('keeps the credential and the per-session OTLP token out of argv, files and output', () => {
      expectCanaryNowhere(run);
      expectTokenNowhere(run);
    });
  },
);
