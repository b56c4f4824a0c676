import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prepareClaudeHome } from '../fixtures/engine-homes/claude.js';
import { startAnthropicMock } from '../fixtures/mock-apis/anthropic.js';
import {
  anthropicUsage,
  type EngineUnderTest,
  expectCanaryNowhere,
  expectLedgerMatches,
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

describe('real Claude Code CLI, two turns through `the-loop run`', () => {
  let run: TwoTurnRun;
  beforeAll(async () => {
    run = await runTwoTurns(
      claude,
      ['Remember the word PAPAYA-41.', '-What was the word?'],
      ['Noted: PAPAYA-41.', 'It was PAPAYA-41.'],
    );
  }, 300_000);
  afterAll(async () => run?.cleanup());

  it('resumes the session: the second request carries the first turn', () => {
    const turns = run.mock.modelTurns();
    expect(turns).toHaveLength(2);
    const second = JSON.stringify(turns[1]?.body);
    expect(second).toContain('Remember the word PAPAYA-41.');
    expect(second).toContain('Noted: PAPAYA-41.');
    expect(second).toContain('-What was the word?');
    expect(turns[0]?.headers['x-claude-code-session-id']).toBe(turns[1]?.headers['x-claude-code-session-id']);
    expect(run.outputs[1]?.stdout).toContain('It was PAPAYA-41.');
  });

  it('records one session with two turns whose usage comes from the result events', () => {
    expect(run.show.session).toMatchObject({
      engine: 'claude',
      runner: 'process',
      status: 'active',
      credentialKind: 'api-key',
    });
    expect(run.show.session.engineSessionId).toBe(
      run.mock.modelTurns()[0]?.headers['x-claude-code-session-id'],
    );
    expect(run.show.turns.map((t) => [t.seq, t.status, t.endReason])).toEqual([
      [1, 'succeeded', 'result'],
      [2, 'succeeded', 'result'],
    ]);
    const [n1 = 0, n2 = 0] = run.turnRequests;
    expect(run.show.turns[0]?.usage).toEqual(claude.expectedUsage(run.mock.reported.slice(0, n1)));
    expect(run.show.turns[1]?.usage).toEqual(claude.expectedUsage(run.mock.reported.slice(n1, n2)));
  });

  it('delivers the canary credential only through the environment', () => {
    expect(claude.credentialHeader(run.mock.modelTurns()[0]?.headers ?? {})).toBe(run.canary);
    expectCanaryNowhere(run);
  });

  it("records every model response in the ledger at the wire with the mock's token sums, paid by a fingerprinted key", async () => {
    await expectLedgerMatches(run, claude, 'wire');
    expectCanaryNowhere(run);
  });
});
