import { describe, expect, it } from 'vitest';
import { checksSession, isTurnEngine, marksLost } from '../../src/sessions/recovery-rules.js';

describe('recovery rules', () => {
  const start = '2025-01-01T12:00:00.000Z';
  const at = (offsetMs: number) => new Date(Date.parse(start) + offsetMs);

  it.each([
    ['started with the turn', at(0), true],
    ['started 10 s before it', at(-10_000), true],
    ['started 10 s after it', at(10_000), true],
    ['started 10.001 s after it (a reused pid)', at(10_001), false],
    ['started an hour before it (a reused pid)', at(-3_600_000), false],
    ['whose start is unknown', null, false],
  ])('a process %s is the lost turn’s engine: %s', (_what, processStarted, expected) => {
    expect(isTurnEngine(start, processStarted)).toBe(expected);
  });

  it.each([
    ['no delivery', undefined, undefined, true],
    ['a queued delivery', { status: 'queued', workItem: 'o/r#1' }, undefined, true],
    ['a failed delivery', { status: 'failed', workItem: 'o/r#1' }, undefined, true],
    [
      'a running delivery (the dispatcher adopts it)',
      { status: 'running', workItem: 'o/r#1' },
      undefined,
      false,
    ],
    [
      'a running delivery of the reconciled work item',
      { status: 'running', workItem: 'o/r#1' },
      'o/r#1',
      false,
    ],
    ['a queued delivery of the reconciled work item', { status: 'queued', workItem: 'o/r#1' }, 'o/r#1', true],
    ['a queued delivery of another work item', { status: 'queued', workItem: 'o/r#2' }, 'o/r#1', false],
    ['no delivery, one work item reconciled', undefined, 'o/r#1', false],
  ] as const)('a turn of %s is marked lost: %s', (_what, delivery, only, expected) => {
    expect(marksLost(delivery, only)).toBe(expected);
  });

  it('checks every active session, or only the reconciled work item’s', () => {
    expect(checksSession({ workItem: 'o/r#1' })).toBe(true);
    expect(checksSession({ workItem: 'o/r#1' }, 'o/r#1')).toBe(true);
    expect(checksSession({ workItem: 'o/r#2' }, 'o/r#1')).toBe(false);
  });
});
