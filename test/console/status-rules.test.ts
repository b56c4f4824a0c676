import { describe, expect, it } from 'vitest';
import { consoleHeldReason, consoleStatus } from '../../src/console/status-rules.js';
import type { SessionHold, SessionRecord } from '../../src/core/ports/sessions.js';

type Fields = Pick<SessionRecord, 'status' | 'takeover' | 'waiting' | 'hold'>;

const SINCE = '2026-03-01T10:00:00.000Z';
const takeover = { by: 'alice@host', since: SINCE, principal: 'p1' };
const waiting = { since: SINCE, message: 'Allow this command?' };
const overBudget: SessionHold = {
  kind: 'over-budget',
  reason: '2 of 2 turns (session, last 24 h)',
  dimension: 'turns',
  scope: 'session',
  used: 2,
  limit: 2,
  since: SINCE,
};
const breach: SessionHold = { kind: 'breach', reason: 'pushed to main', acts: [4], turnId: 3, since: SINCE };
const unaccounted: SessionHold = { kind: 'unaccounted', reason: 'no usage record', turnId: 1, since: SINCE };

const session = (fields: Partial<Fields> = {}): Fields => ({
  status: 'active',
  takeover: null,
  waiting: null,
  hold: null,
  ...fields,
});

describe('consoleStatus', () => {
  const cases: Array<[string, Partial<Fields>, boolean, string]> = [
    ['active, no turn running', {}, false, 'idle'],
    ['active, a turn running', {}, true, 'running'],
    ['a TUI waiting for a person (its turn runs)', { waiting }, true, 'waiting'],
    ['over budget', { hold: overBudget }, false, 'over-budget'],
    ['a breach', { hold: breach }, false, 'breach'],
    ['unaccounted', { hold: unaccounted }, false, 'unaccounted'],
    ['a hold shown before a running turn', { hold: breach }, true, 'breach'],
    ['waiting shown before a hold', { waiting, hold: overBudget }, true, 'waiting'],
    ['taken over: held, whatever else', { takeover, waiting, hold: breach }, true, 'held'],
    ['taken over, idle', { takeover }, false, 'held'],
    ['closed', { status: 'closed' }, false, 'closed'],
    ['lost', { status: 'lost' }, false, 'lost'],
    ['ended by its engine', { status: 'ended' }, false, 'ended'],
    [
      'closed while taken over and held: closed',
      { status: 'closed', takeover, hold: breach },
      false,
      'closed',
    ],
    ['lost with a turn still recorded running: lost', { status: 'lost' }, true, 'lost'],
  ];
  for (const [name, fields, running, expected] of cases) {
    it(`${name} → ${expected}`, () => {
      expect(consoleStatus(session(fields), { running })).toBe(expected);
    });
  }
});

describe('consoleHeldReason', () => {
  const cases: Array<[string, Partial<Fields>, string | null]> = [
    ['nothing held', {}, null],
    ['a hold: its reason', { hold: overBudget }, '2 of 2 turns (session, last 24 h)'],
    [
      'taken over: who and since when, before a hold',
      { takeover, hold: breach },
      `taken over by alice@host since ${SINCE}: hand back to go on`,
    ],
    ['a closed session holds nothing', { status: 'closed', takeover, hold: breach }, null],
    ['waiting for a person is not a hold', { waiting }, null],
  ];
  for (const [name, fields, expected] of cases) {
    it(name, () => {
      expect(consoleHeldReason(session(fields))).toBe(expected);
    });
  }
});
