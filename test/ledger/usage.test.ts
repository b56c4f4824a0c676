import { describe, expect, it } from 'vitest';
import type { TurnEvent, Usage } from '../../src/core/events.js';
import { addUsage, totalTokens, turnUsageFrom } from '../../src/ledger/usage.js';

const u = (input: number, output: number, cacheRead = 0, cacheCreation = 0, reasoning = 0): Usage => ({
  inputTokens: input,
  outputTokens: output,
  cacheReadTokens: cacheRead,
  cacheCreationTokens: cacheCreation,
  reasoningTokens: reasoning,
});

const usageEvent = (usage: Usage, extra: { model?: string; costUsd?: number } = {}): TurnEvent => ({
  type: 'usage',
  usage,
  ...extra,
});

const noise: TurnEvent[] = [
  { type: 'session', engineSessionId: 's' },
  { type: 'text', text: 'hello' },
  { type: 'tool-use', id: 't', name: 'Bash', input: { command: 'ls' } },
  { type: 'tool-result', id: 't', ok: true, summary: 'a b' },
  { type: 'diagnostic', message: 'bad line' },
  { type: 'error', message: 'oops' },
  { type: 'turn-end', ok: true },
];

describe('turnUsageFrom', () => {
  it('no usage events → usage null (unmetered), never zeros — in both scopes', () => {
    for (const scope of ['turn', 'thread'] as const) {
      expect(turnUsageFrom(noise, scope, u(5, 5))).toEqual({
        usage: null,
        model: null,
        costUsd: null,
        nextBaseline: null,
        warnings: [],
      });
      expect(turnUsageFrom([], scope, null).usage).toBeNull();
    }
  });

  it('turn scope: one report is the turn usage, with its model and cost', () => {
    const result = turnUsageFrom(
      [...noise, usageEvent(u(3, 12, 0, 5120), { model: 'm1', costUsd: 0.032315 })],
      'turn',
      null,
    );
    expect(result).toEqual({
      usage: u(3, 12, 0, 5120),
      model: 'm1',
      costUsd: 0.032315,
      nextBaseline: null,
      warnings: [],
    });
  });

  it('turn scope: several reports are summed kind by kind; costs summed when every report has one', () => {
    const result = turnUsageFrom(
      [
        usageEvent(u(1, 2, 3, 4, 5), { model: 'a', costUsd: 0.25 }),
        usageEvent(u(10, 20, 30, 40, 50), { model: 'b', costUsd: 0.5 }),
        usageEvent(u(100, 200, 300, 400, 500), { model: 'a', costUsd: 1 }),
      ],
      'turn',
      null,
    );
    expect(result.usage).toEqual(u(111, 222, 333, 444, 555));
    expect(result.costUsd).toBe(1.75);
    expect(result.model).toBe('a,b');
  });

  it('turn scope: cost is null when any report lacks one (a partial sum would understate the bill)', () => {
    const result = turnUsageFrom(
      [usageEvent(u(1, 1), { costUsd: 0.5 }), usageEvent(u(1, 1)), usageEvent(u(1, 1), { costUsd: 0.25 })],
      'turn',
      null,
    );
    expect(result.usage).toEqual(u(3, 3));
    expect(result.costUsd).toBeNull();
    expect(result.model).toBeNull();
  });

  it('turn scope: a reported cost of 0 is a cost (0), not unknown', () => {
    expect(turnUsageFrom([usageEvent(u(0, 0), { costUsd: 0 })], 'turn', null).costUsd).toBe(0);
  });

  it('turn scope ignores any baseline', () => {
    expect(turnUsageFrom([usageEvent(u(5, 5))], 'turn', u(100, 100)).usage).toEqual(u(5, 5));
  });

  it('thread scope, first turn (no baseline): the total is the turn usage and becomes the baseline', () => {
    const result = turnUsageFrom([usageEvent(u(1200, 28, 0, 0, 12), { costUsd: 9 })], 'thread', null);
    expect(result).toEqual({
      usage: u(1200, 28, 0, 0, 12),
      model: null,
      // Running totals carry no per-turn cost.
      costUsd: null,
      nextBaseline: u(1200, 28, 0, 0, 12),
      warnings: [],
    });
  });

  it('thread scope: the turn used the difference from the baseline; the new total is the next baseline', () => {
    const result = turnUsageFrom(
      [usageEvent(u(1548, 53, 1152, 0, 12), { model: 'gpt' })],
      'thread',
      u(1200, 28, 0, 0, 12),
    );
    expect(result).toEqual({
      usage: u(348, 25, 1152, 0, 0),
      model: 'gpt',
      costUsd: null,
      nextBaseline: u(1548, 53, 1152, 0, 12),
      warnings: [],
    });
  });

  it('thread scope: with several reports only the last running total counts', () => {
    const result = turnUsageFrom([usageEvent(u(50, 5)), usageEvent(u(70, 9))], 'thread', u(40, 4));
    expect(result.usage).toEqual(u(30, 5));
    expect(result.nextBaseline).toEqual(u(70, 9));
  });

  it('thread scope: an unchanged total is a metered turn of zero tokens (not null)', () => {
    const result = turnUsageFrom([usageEvent(u(10, 10))], 'thread', u(10, 10));
    expect(result.usage).toEqual(u(0, 0));
    expect(result.warnings).toEqual([]);
  });

  it('thread scope: a total that went down (in any kind) is counted whole, with a warning', () => {
    const result = turnUsageFrom([usageEvent(u(500, 60, 0, 0, 0))], 'thread', u(400, 50, 0, 0, 3));
    expect(result.usage).toEqual(u(500, 60));
    expect(result.nextBaseline).toEqual(u(500, 60));
    expect(result.warnings).toHaveLength(1);
    expect(result.warnings[0]).toContain('lower than the previous turn');
  });

  it('does not mutate the events or the baseline it is given', () => {
    const baseline = u(1, 1);
    const events = [usageEvent(u(5, 5))];
    const copy = structuredClone(events);
    turnUsageFrom(events, 'thread', baseline);
    turnUsageFrom(events, 'turn', baseline);
    expect(baseline).toEqual(u(1, 1));
    expect(events).toEqual(copy);
  });
});

describe('addUsage / totalTokens', () => {
  it('add kind by kind and total every kind', () => {
    expect(addUsage(u(1, 2, 3, 4, 5), u(10, 20, 30, 40, 50))).toEqual(u(11, 22, 33, 44, 55));
    expect(totalTokens(u(1, 2, 3, 4, 5))).toBe(15);
    expect(totalTokens(u(0, 0))).toBe(0);
  });
});
