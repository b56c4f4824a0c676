import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prepareCodexHome } from '../fixtures/engine-homes/codex.js';
import { startOpenAIMock } from '../fixtures/mock-apis/openai.js';
import {
  type EngineUnderTest,
  expectCanaryNowhere,
  expectLedgerMatches,
  openaiUsage,
  realBinary,
  runTwoTurns,
  type TwoTurnRun,
} from './helpers.js';

const codex: EngineUnderTest = {
  engine: 'codex',
  realBinary: realBinary('codex'),
  startMock: startOpenAIMock,
  prepareHome: prepareCodexHome,
  expectedUsage: openaiUsage,
  credentialHeader: (h) => String(h.authorization ?? '').replace(/^Bearer /, ''),
  // Codex reads its provider from config.toml; the gateway forwards where OPENAI_BASE_URL says.
  gatewayEnv: (url) => ({ OPENAI_BASE_URL: `${url}/v1` }),
};

describe('real Codex CLI, two turns through `the-loop run`', () => {
  let run: TwoTurnRun;
  beforeAll(async () => {
    run = await runTwoTurns(
      codex,
      ['Remember the word MANGO-17.', '-What was the word?'],
      ['Noted: MANGO-17.', 'It was MANGO-17.'],
    );
  }, 300_000);
  afterAll(async () => run?.cleanup());

  it('captures the thread id and resumes it: the second request carries the first turn', () => {
    const turns = run.mock.modelTurns();
    expect(turns).toHaveLength(2);
    const second = JSON.stringify(turns[1]?.body);
    expect(second).toContain('Remember the word MANGO-17.');
    expect(second).toContain('Noted: MANGO-17.');
    expect(run.show.session.engineSessionId).toMatch(/^[0-9a-f-]{36}$/);
    expect(run.show.session.engineSessionStarted).toBe(true);
  });

  it('records per-turn usage as the difference of the thread totals', () => {
    expect(run.show.turns.map((t) => [t.seq, t.status, t.endReason])).toEqual([
      [1, 'succeeded', 'result'],
      [2, 'succeeded', 'result'],
    ]);
    const [n1 = 0, n2 = 0] = run.turnRequests;
    expect(run.show.turns[0]?.usage).toEqual(codex.expectedUsage(run.mock.reported.slice(0, n1)));
    expect(run.show.turns[1]?.usage).toEqual(codex.expectedUsage(run.mock.reported.slice(n1, n2)));
    // The thread total the engine reported on turn 2 is remembered for turn 3.
    expect(run.show.session.usageBaseline).toEqual(codex.expectedUsage(run.mock.reported.slice(0, n2)));
  });

  it('delivers the canary credential only through the environment', () => {
    expect(codex.credentialHeader(run.mock.modelTurns()[0]?.headers ?? {})).toBe(run.canary);
    expectCanaryNowhere(run);
  });

  it("records every model response in the ledger at the wire with the mock's token sums, paid by a fingerprinted key", async () => {
    await expectLedgerMatches(run, codex, 'wire');
    expectCanaryNowhere(run);
  });
});
