/**
 * No model request counted twice across meters, with the real Claude Code CLI (process runner,
 * bubblewrap sandbox) served by the gateway, through the real `the-loop run`:
 * - two turns are metered at the wire only: one ledger row per response id, all `wire`, whose token
 *   sums are the mock's (side requests included); the engine's result usage stays on the turn;
 * - `the-loop usage scan` of its transcripts imports nothing: the ledger and the report are unchanged;
 * - an engine with `otel.enabled` that the gateway serves is not given its exporter's environment
 *   (and gets wire rows only), while the same engine without the gateway is.
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import type { Usage } from '../../src/core/events.js';
import { prepareClaudeHome } from '../fixtures/engine-homes/claude.js';
import { startAnthropicMock } from '../fixtures/mock-apis/anthropic.js';
import type { MockApi, MockUsage } from '../fixtures/mock-apis/types.js';
import { freePort, runCli } from '../helpers/cli.js';
import { anthropicUsage, type EngineUnderTest, realBinary, runTwoTurns, type TwoTurnRun } from './helpers.js';

/** Usage the mock gives Claude Code's side requests (titles, quota probes), when it makes any. */
const SIDE: MockUsage = { input: 17, output: 3 };

interface Row {
  meter: string;
  source_id: string;
  session_id: string;
  turn_id: number | null;
  input_tokens: number;
  output_tokens: number;
  cache_read_tokens: number;
  cache_creation_tokens: number;
  reasoning_tokens: number;
}

function readLedger(dataDir: string): { rows: Row[]; turnMeters: string[] } {
  const db = new Database(join(dataDir, 'the-loop.db'), { readonly: true });
  try {
    return {
      rows: db.prepare('SELECT * FROM usage_ledger ORDER BY id').all() as Row[],
      turnMeters: (db.prepare('SELECT meter FROM turns ORDER BY id').all() as Array<{ meter: string }>).map(
        (t) => t.meter,
      ),
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

interface Report {
  total: { rows: number; turns: number; usage: Usage; costUsd: number | null };
  notIncluded: { unmeteredCount: number };
}

describe('a Claude Code session served by the gateway is metered at the wire only', () => {
  let run: TwoTurnRun;
  let side: MockUsage[] = [];
  const claude: EngineUnderTest = {
    engine: 'claude',
    realBinary: realBinary('claude'),
    startMock: async (options) => {
      const mock = await startAnthropicMock({ ...options, sideUsage: SIDE });
      side = mock.sideReported;
      return mock;
    },
    prepareHome: (root, url) => prepareClaudeHome(root, url),
    expectedUsage: anthropicUsage,
    credentialHeader: (h) => h['x-api-key'] as string | undefined,
  };
  const env = () => ({ THE_LOOP_CONFIG: join(run.root, 'config.yaml') });
  const usageReport = async (): Promise<Report> => {
    const res = await runCli(['usage', '--json'], { cwd: run.root, env: env() });
    expect(res.code, res.stderr).toBe(0);
    return JSON.parse(res.stdout) as Report;
  };

  beforeAll(async () => {
    run = await runTwoTurns(
      claude,
      ['Remember the word KIWI-58.', 'What was the word?'],
      ['Noted: KIWI-58.', 'It was KIWI-58.'],
      {},
      { gateway: { port: await freePort() } },
    );
  }, 300_000);
  afterAll(async () => run?.cleanup());

  it('records one wire row per response id, whose sums are what the mock reported', () => {
    const { rows, turnMeters } = readLedger(run.dataDir);
    expect(turnMeters).toEqual(['wire', 'wire']);
    expect(rows.map((r) => r.meter)).toEqual(rows.map(() => 'wire'));
    // Every response the mock gave (model turns and side requests) is one row, keyed by its id.
    expect(run.mock.modelTurns()).toHaveLength(2);
    expect(rows).toHaveLength(run.mock.reported.length + side.length);
    for (const r of rows) {
      expect(r.source_id).toMatch(/^anthropic:msg_[A-Za-z0-9_-]+$/);
      expect(r.session_id).toBe(run.show.session.id);
      expect(r.turn_id).not.toBeNull();
    }
    expect(new Set(rows.map((r) => r.source_id)).size).toBe(rows.length);
    expect(sumRows(rows)).toEqual(anthropicUsage([...run.mock.reported, ...side]));
    // The engine's own result figures stay on the turns (for display), not in the ledger.
    const [n1 = 0, n2 = 0] = run.turnRequests;
    expect(run.show.turns.map((t) => t.usage)).toEqual([
      anthropicUsage(run.mock.reported.slice(0, n1)),
      anthropicUsage(run.mock.reported.slice(n1, n2)),
    ]);
  });

  it('`usage scan` of its transcripts imports nothing: same rows, same totals', async () => {
    const before = readLedger(run.dataDir).rows;
    const totals = await usageReport();
    expect(totals.total.usage).toEqual(anthropicUsage([...run.mock.reported, ...side]));
    expect(totals.notIncluded.unmeteredCount).toBe(0);
    // Claude Code did write the session's transcript — in the session's own config dir (the
    // sandbox gives each session one): there is something to skip.
    const projects = join(run.dataDir, 'homes', String(run.show.session.slug), 'claude', 'projects');
    const transcripts = readdirSync(projects, { recursive: true, encoding: 'utf8' }).filter((f) =>
      f.endsWith(`${String(run.show.session.engineSessionId)}.jsonl`),
    );
    expect(transcripts).toHaveLength(1);

    const res = await runCli(['usage', 'scan', projects, '--json'], { cwd: run.root, env: env() });
    run.outputs.push({ stdout: res.stdout, stderr: res.stderr });
    expect(res.code, res.stderr).toBe(0);
    const scan = JSON.parse(res.stdout) as { filesRead: number; added: number; alreadyMetered: number };
    expect(scan.filesRead).toBeGreaterThanOrEqual(1);
    expect(scan.added).toBe(0);
    // Both model responses were found in the transcript, and recognised as metered already.
    expect(scan.alreadyMetered).toBe(run.mock.reported.length);
    expect(readLedger(run.dataDir).rows).toEqual(before);
    const after = await usageReport();
    expect([after.total, after.notIncluded]).toEqual([totals.total, totals.notIncluded]);
  });
});

/** The output of the turn's shell step, as the engine sent it back to the model. */
function toolOutput(mock: MockApi): string {
  const body = mock.modelTurns()[1]?.body as { messages?: Array<{ content: unknown }> } | undefined;
  const blocks = (body?.messages ?? []).flatMap((m) => (Array.isArray(m.content) ? m.content : []));
  const result = blocks.find((b: { type?: string }) => b.type === 'tool_result') as
    | { content: string | Array<{ text?: string }> }
    | undefined;
  const content = result?.content ?? '';
  return typeof content === 'string' ? content : content.map((c) => c.text ?? '').join('\n');
}

/** One turn of the real Claude Code with `otel.enabled`: the model has it print its environment. */
async function otelTurn(gateway: Record<string, unknown>): Promise<{
  root: string;
  mock: MockApi;
  env: string;
  code: number | null;
  output: string;
}> {
  const root = mkdtempSync(join(tmpdir(), 'the-loop-wire-otel-'));
  const work = join(root, 'work');
  mkdirSync(work);
  const mock = await startAnthropicMock({
    script: [
      { kind: 'shell', command: 'env', usage: { input: 300, output: 30 } },
      { kind: 'text', text: 'Done.', usage: { input: 350, output: 10 } },
    ],
  });
  const home = prepareClaudeHome(join(root, 'engine'), mock.url);
  const configPath = join(root, 'config.yaml');
  writeFileSync(
    configPath,
    stringify({
      dataDir: 'data',
      defaults: { engine: 'claude', backstopSeconds: 150, killGraceSeconds: 2 },
      gateway,
      engines: {
        claude: {
          binary: realBinary('claude'),
          env: home.env,
          otel: { enabled: true, signal: 'logs', exportIntervalMs: 500 },
          // Without the gateway `auto` would be the default mode, where `env` needs an approval.
          permissions: { mode: 'bypass' },
        },
      },
    }),
  );
  const env = { [home.credentialEnv]: 'sk-ant-real-key-0123456789', THE_LOOP_CONFIG: configPath };
  const res = await runCli(['run', 'github:acme/wire-otel#2', '--cwd', work, '--', 'Look around.'], {
    cwd: root,
    env,
    timeoutMs: 200_000,
  });
  return { root, mock, env: toolOutput(mock), code: res.code, output: res.stdout + res.stderr };
}

describe('otel.enabled on an engine the gateway serves: its exporter is not turned on', () => {
  let served: Awaited<ReturnType<typeof otelTurn>>;
  let direct: Awaited<ReturnType<typeof otelTurn>>;
  beforeAll(async () => {
    served = await otelTurn({ port: await freePort() });
    // The control: the same engine without the gateway is metered by OpenTelemetry.
    direct = await otelTurn({ enabled: false });
  }, 400_000);
  afterAll(async () => {
    for (const r of [served, direct]) {
      if (!r) continue;
      await r.mock.close();
      rmSync(r.root, { recursive: true, force: true });
    }
  });

  it('the engine gets no exporter environment and the ledger only wire rows', () => {
    expect(served.code, served.output).toBe(0);
    const { env } = served;
    expect(env).toMatch(/^ANTHROPIC_BASE_URL=http:\/\/127\.0\.0\.1:\d+\/m\/tlg1_/m);
    // The exporter's switch (Claude Code keeps OTEL_* variables from its tools, not this one).
    expect(env).not.toMatch(/^CLAUDE_CODE_ENABLE_TELEMETRY=/m);
    const { rows, turnMeters } = readLedger(join(served.root, 'data'));
    expect(turnMeters).toEqual(['wire']);
    expect(rows.map((r) => r.meter)).toEqual(served.mock.reported.map(() => 'wire'));
    expect(sumRows(rows)).toEqual(anthropicUsage(served.mock.reported));
  });

  it('without the gateway the same engine is given its exporter and metered by OpenTelemetry', () => {
    expect(direct.code, direct.output).toBe(0);
    const { env } = direct;
    expect(env).toMatch(/^CLAUDE_CODE_ENABLE_TELEMETRY=1$/m);
    expect(env).not.toMatch(/\/m\/tlg1_/);
    expect(readLedger(join(direct.root, 'data')).turnMeters).toEqual(['otel']);
  });
});
