import { LoopError } from '../core/errors.js';
import type { BudgetHold, SessionHold, SessionRecord, SessionStore } from '../core/ports/sessions.js';
import { type HoldDeps, holdIfOverBudget } from '../ledger/budget-hold.js';
import { parseRaise } from '../ledger/budget-rules.js';

/**
 * Release a held session: what `the-loop sessions resume` and the console's resume button both do.
 * An unaccounted or breach hold is released as it is (a person has seen it); an over-budget one
 * needs its ceiling raised, in the unit of the ceiling reached, and stays held if still over after.
 */
export type ResumeOutcome =
  | { kind: 'not-held'; session: SessionRecord }
  | { kind: 'released'; released: SessionHold; session: SessionRecord }
  | {
      kind: 'raised';
      released: BudgetHold;
      amount: number;
      /** Still over after the raise: the hold put back on. */
      again: SessionHold | null;
      session: SessionRecord;
    };

export interface ResumeDeps extends HoldDeps {
  store: HoldDeps['store'] & Pick<SessionStore, 'get' | 'setHold' | 'raiseBudget'>;
}

export async function resumeHeld(
  deps: ResumeDeps,
  session: SessionRecord,
  raise: string | undefined,
): Promise<ResumeOutcome> {
  if (session.status !== 'active') {
    throw new LoopError(
      'usage',
      `${session.workItem}'s session is ${session.status}: there is nothing to resume`,
      {
        hint: 'The next delivery to this work item starts a new session.',
      },
    );
  }
  const hold = session.hold;
  if (!hold) return { kind: 'not-held', session };
  if (hold.kind !== 'over-budget') {
    if (raise !== undefined) {
      const what =
        hold.kind === 'breach'
          ? 'for a policy breach'
          : hold.kind === 'interrupted'
            ? 'after its host died'
            : 'as unaccounted';
      throw new LoopError(
        'usage',
        `${session.workItem} is held ${what}, not over budget: resume it without --raise`,
      );
    }
    await deps.store.setHold(session.id, null);
    return { kind: 'released', released: hold, session: await reread(deps, session) };
  }
  if (raise === undefined) {
    throw new LoopError('usage', `${session.workItem} is over budget: ${hold.reason}`, {
      hint: `Raise the ${hold.scope} ceiling: the-loop sessions resume ${session.workItem} --raise <${hold.dimension === 'usd' ? 'dollars' : hold.dimension}>`,
    });
  }
  const amount = parseRaise(raise, hold.dimension);
  if (Number.isNaN(amount)) {
    throw new LoopError(
      'usage',
      `--raise takes a positive ${hold.dimension === 'usd' ? 'amount of dollars' : `whole number of ${hold.dimension}`}, not ${JSON.stringify(raise)}`,
    );
  }
  const raised = await deps.store.raiseBudget(session.id, { [hold.dimension]: amount });
  await deps.store.setHold(session.id, null);
  const again = await holdIfOverBudget(deps, { ...raised, hold: null });
  return { kind: 'raised', released: hold, amount, again, session: await reread(deps, session) };
}

const reread = async (deps: ResumeDeps, session: SessionRecord): Promise<SessionRecord> =>
  (await deps.store.get(session.id)) ?? session;
