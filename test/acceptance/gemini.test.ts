import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prepareGeminiHome } from '../fixtures/engine-homes/gemini.js';
import { startGeminiMock } from '../fixtures/mock-apis/gemini.js';
import {
  type EngineUnderTest,
  expectCanaryNowhere,
  expectLedgerMatches,
  geminiUsage,
  realBinary,
  runTwoTurns,
  type TwoTurnRun,
} from './helpers.js';

const gemini: EngineUnderTest = {
  engine: 'gemini',
  realBinary: realBinary('gemini'),
  startMock: startGeminiMock,
  prepareHome: (root, url) => prepareGeminiHome(root, url),
  expectedUsage: geminiUsage,
  credentialHeader: (h) => h['x-goog-api-key'] as string | undefined,
};

describe('real Gemini CLI, two turns through `the-loop run`', () => {
  let run: TwoTurnRun;
  beforeAll(async () => {
    run = await runTwoTurns(
      gemini,
      ['Remember the word GUAVA-23.', '-What was the word?'],
      ['Noted: GUAVA-23.', 'It was GUAVA-23.'],
    );
  }, 300_000);
  afterAll(async () => run?.cleanup());

  it('resumes the pinned session: the second request carries the first turn', () => {
    const turns = run.mock.modelTurns();
    expect(turns).toHaveLength(2);
    const second = JSON.stringify(turns[1]?.body);
    expect(second).toContain('Remember the word GUAVA-23.');
    expect(second).toContain('Noted: GUAVA-23.');
    expect(second).toContain('-What was the word?');
    expect(run.outputs[1]?.stdout).toContain('It was GUAVA-23.');
  });

  it('records one session with two turns whose usage comes from the result events', () => {
    expect(run.show.session).toMatchObject({
      engine: 'gemini',
      status: 'active',
      credentialKind: 'api-key',
      engineSessionStarted: true,
    });
    expect(run.show.turns.map((t) => [t.seq, t.status, t.endReason])).toEqual([
      [1, 'succeeded', 'result'],
      [2, 'succeeded', 'result'],
    ]);
    const [n1 = 0, n2 = 0] = run.turnRequests;
    expect(run.show.turns[0]?.usage).toEqual(gemini.expectedUsage(run.mock.reported.slice(0, n1)));
    expect(run.show.turns[1]?.usage).toEqual(gemini.expectedUsage(run.mock.reported.slice(n1, n2)));
  });

  it('delivers the canary credential only through the environment', () => {
    expect(gemini.credentialHeader(run.mock.modelTurns()[0]?.headers ?? {})).toBe(run.canary);
    expectCanaryNowhere(run);
  });

  it("records every model response in the ledger at the wire with the mock's token sums, paid by a fingerprinted key", async () => {
    await expectLedgerMatches(run, gemini, 'wire');
    expectCanaryNowhere(run);
  });
});
