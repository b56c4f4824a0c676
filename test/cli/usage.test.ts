import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fakeEngineConfig, makeProject, runCli } from '../helpers/cli.js';

/**
 * `the-loop usage` over turns of a metered engine (the fake engine's stream-json result events) and
 * of an engine declared without a meter (plain text): the metered one is in the totals with its
 * payer; the other is an unmetered run under "Not included" — and `$0.00` appears nowhere.
 */
describe('the-loop usage', () => {
  let project: ReturnType<typeof makeProject>;
  const CANARY = 'sk-usage-canary-0123456789abcdef';
  beforeAll(() => {
    project = makeProject();
    const stateDir = join(project.dir, 'engine-state');
    mkdirSync(stateDir);
    const config = fakeEngineConfig(stateDir);
    const engines = config.engines as Record<string, Record<string, unknown>>;
    // The same program, declared as plain text: nothing in its output is a usage figure.
    engines.plain = {
      ...engines.fake,
      protocol: 'text',
      sessionId: 'none',
      headless: { args: ['-p'], promptPrefix: ['--'] },
    };
    writeFileSync(project.configPath, JSON.stringify(config));
  });
  afterAll(() => project.cleanup());

  const cli = (args: string[]) => runCli(args, { cwd: project.dir, env: { ANTHROPIC_API_KEY: CANARY } });

  it('totals metered turns and lists unmetered runs under "Not included", never as $0', async () => {
    expect((await cli(['run', 'github:octo/widgets#1', 'hello'])).code).toBe(0);
    expect((await cli(['run', 'github:octo/widgets#1', 'again'])).code).toBe(0);
    const plain = await cli(['run', 'github:octo/widgets#2', '--engine', 'plain', 'hello']);
    expect(plain.code, plain.stdout + plain.stderr).toBe(0);

    const json = await cli(['usage', '--json', '--by', 'engine']);
    expect(json.code, json.stderr).toBe(0);
    const report = JSON.parse(json.stdout) as {
      groups: Array<{
        key: string;
        turns: number;
        rows: number;
        usage: { inputTokens: number };
        costUsd: number | null;
      }>;
      total: { turns: number; rows: number };
      notIncluded: {
        unmeteredCount: number;
        unmetered: Array<{ engine: string; runner: string; reason: string }>;
      };
    };
    // Only the metered engine is in the totals; the plain one is not counted as zero there.
    expect(report.groups.map((g) => [g.key, g.turns, g.rows])).toEqual([['fake', 2, 2]]);
    // The ledger's figures are the turns' own, as recorded from the result events.
    const shown = JSON.parse((await cli(['sessions', 'show', 'github:octo/widgets#1', '--json'])).stdout) as {
      turns: Array<{ usage: { inputTokens: number } }>;
    };
    expect(report.groups[0]?.usage.inputTokens).toBe(
      shown.turns.reduce((n, t) => n + t.usage.inputTokens, 0),
    );
    expect(report.groups[0]?.costUsd).toBeGreaterThan(0);
    expect(report.notIncluded.unmeteredCount).toBe(1);
    expect(report.notIncluded.unmetered[0]).toMatchObject({ engine: 'plain', runner: 'process' });
    expect(report.notIncluded.unmetered[0]?.reason).toMatch(/reports no usage/);

    for (const by of ['day', 'engine', 'model', 'work-item', 'payer', 'session']) {
      const text = await cli(['usage', '--by', by]);
      expect(text.code, text.stderr).toBe(0);
      expect(text.stdout).toMatch(/^Usage .* not included: 1 unmetered run/);
      expect(text.stdout).toMatch(/Not included[^\n]*\n {2}1 unmetered run · plain on process/);
      expect(text.stdout).not.toContain('$0.00');
      expect(text.stdout).not.toContain(CANARY);
    }
    const payer = await cli(['usage', '--by', 'payer']);
    expect(payer.stdout).toMatch(/api-key key:[0-9a-f]{12}/);
    // Where list prices come from: the pinned dataset, its version and date.
    expect(payer.stdout).toMatch(
      /list-price \(@pydantic\/genai-prices 0\.1\.8, data of 2026-09-23, at each request's time\)/,
    );
    expect((JSON.parse(json.stdout) as { prices: unknown }).prices).toEqual({
      dataset: { name: '@pydantic/genai-prices', version: '0.1.8', date: '2026-09-23' },
      configured: [],
    });
  });

  it('rejects bad options with a clear usage error', async () => {
    for (const args of [
      ['usage', '--by', 'colour'],
      ['usage', '--since', 'yesterday'],
      ['usage', '--since', '1d', '--until', '2d'],
    ]) {
      const res = await cli(args);
      expect(res.code, args.join(' ')).toBe(2);
      expect(res.stderr).toMatch(/--by|--since|--until/);
    }
  });

  it('an empty period says so, with nothing to leave out', async () => {
    const res = await cli(['usage', '--since', '2020-01-01', '--until', '2020-01-02']);
    expect(res.code).toBe(0);
    expect(res.stdout).toMatch(/0 tokens in 0 turns/);
    expect(res.stdout).toContain('No metered usage in this period.');
    expect(res.stdout).toMatch(/Not included[^\n]*\n {2}nothing/);
    expect(res.stdout).not.toContain('$0.00');
  });
});
