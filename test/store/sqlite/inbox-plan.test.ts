import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { answerTargetOf, parsePlan, turnPlanOf } from '../../../src/store/sqlite/inbox-rows.js';

// The schema the inbox used before its hand-written check: the check must give what it gave.
const turnPlanSchema = z.object({
  repo: z.string(),
  prompt: z.string(),
  engine: z.string(),
  runner: z.string(),
  repoPath: z.string(),
  workspace: z.enum(['checkout', 'worktree']),
  author: z.string(),
  trigger: z.string(),
  routedUnder: z.string().optional(),
});

const good = {
  repo: 'o/r',
  prompt: 'fix it',
  engine: 'claude',
  runner: 'tmux',
  repoPath: '/w/r',
  workspace: 'worktree',
  author: 'alice',
  trigger: 'issue_comment',
};

const cases: unknown[] = [
  good,
  { ...good, routedUnder: 'repos.o/r' },
  { ...good, workspace: 'checkout', extra: 'dropped', __proto__: { polluted: true } },
  JSON.parse(
    '{"__proto__":{"x":1},"repo":"o/r","prompt":"p","engine":"e","runner":"r","repoPath":"/","workspace":"checkout","author":"a","trigger":"t"}',
  ),
  { ...good, routedUnder: null },
  { ...good, routedUnder: 7 },
  { ...good, workspace: 'elsewhere' },
  { ...good, prompt: 42 },
  { ...good, repo: undefined },
  (({ author: _a, ...rest }) => rest)(good),
  [good],
  null,
  'a string',
  42,
  {},
  { ...good, prompt: 'x'.repeat(100_000) },
];

describe('the inbox turn plan check', () => {
  it.each(cases.map((c, i) => [i, c]))('case %i gives what the zod schema gave', (_i, value) => {
    const parsed = turnPlanSchema.safeParse(value);
    const ours = turnPlanOf(value);
    expect(ours).toStrictEqual(parsed.success ? parsed.data : undefined);
    // Same keys in the same order (a plan is shown and re-serialized).
    expect(JSON.stringify(ours)).toBe(JSON.stringify(parsed.success ? parsed.data : undefined));
  });

  it('parsePlan: malformed JSON and a plan of the wrong shape are no plan; a good one round-trips', () => {
    expect(parsePlan('start', 'o/r#1', '{not json')).toBeUndefined();
    expect(parsePlan('start', 'o/r#1', JSON.stringify({ ...good, workspace: 1 }))).toBeUndefined();
    expect(parsePlan('deliver', 'o/r#1', JSON.stringify(good))).toStrictEqual({
      action: 'deliver',
      workItem: 'o/r#1',
      ...good,
    });
  });
});

describe("a stored plan's answer target (issue 18)", () => {
  const answer = {
    repository: 'o/r',
    number: 7,
    pull: true,
    react: { kind: 'issue-comment', id: 2 ** 40 },
    installationId: 99,
    headSha: 'a'.repeat(40),
  };

  it('round-trips a good one, and every reaction kind', () => {
    expect(turnPlanOf({ ...good, answer })?.answer).toStrictEqual(answer);
    for (const react of [{ kind: 'issue', number: 7 }, { kind: 'review-comment', id: 3 }, undefined])
      expect(answerTargetOf({ ...answer, react })?.react).toStrictEqual(react);
  });

  it.each([
    ['not an object', 'x'],
    ['an array', [answer]],
    ['no repository', { ...answer, repository: 1 }],
    ['a number of 0', { ...answer, number: 0 }],
    ['a fractional number', { ...answer, number: 1.5 }],
    ['pull not a boolean', { ...answer, pull: 'yes' }],
    ['a negative installation', { ...answer, installationId: -1 }],
    ['a head that is not a sha', { ...answer, headSha: 'main; rm -rf /' }],
    ['an unknown reaction kind', { ...answer, react: { kind: 'review', id: 1 } }],
    ['a reaction without its id', { ...answer, react: { kind: 'issue-comment' } }],
    ['a reaction id past 2^53', { ...answer, react: { kind: 'issue-comment', id: 2 ** 60 } }],
  ])('%s is no answer target, and the plan is kept without one', (_why, bad) => {
    expect(answerTargetOf(bad)).toBeUndefined();
    const plan = turnPlanOf({ ...good, answer: bad });
    expect(plan).toBeDefined();
    expect(plan && 'answer' in plan).toBe(false);
  });
});
