import type { UnmeteredDrive } from '../core/ports/ledger.js';
import type { SessionRecord, SessionStore, SessionTakeover } from '../core/ports/sessions.js';
import { onSessionEnd } from '../core/session-end.js';
import { type HoldDeps, heldReason } from '../ledger/budget-hold.js';
import type { Logger } from '../log/logger.js';
import { checkTakeoverName, sameHolder, takeoverLength, takeoverReason } from './takeover-rules.js';

export { takeoverReason } from './takeover-rules.js';

/**
 * Take over and hand back: a person types in a session's TUI (from the console or the CLI) while its
 * deliveries wait. Recorded three ways: on the session's row (who, since when), in the log, and at
 * hand back as an unmetered drive in the ledger — what the engine did for the person was not
 * measured as a turn, and a total must say it leaves that out.
 */
export interface TakeoverDeps {
  store: Pick<SessionStore, 'get' | 'setTakeover' | 'endTakeover'>;
  ledger: { recordUnmetered(drive: UnmeteredDrive): Promise<void> };
  logger: Logger;
}

/**
 * Take the session over as `by` (a console login's public id as `principal`; null from the CLI).
 * The same person again changes nothing; someone else's take over is refused (`usage`, naming who),
 * as is a session that is not active.
 */
export async function takeOver(
  deps: TakeoverDeps,
  session: SessionRecord,
  who: { by: string; principal: string | null },
  now: Date,
): Promise<SessionRecord> {
  const by = checkTakeoverName(who.by);
  const current = (await deps.store.get(session.id)) ?? session;
  const held = current.takeover;
  if (held && sameHolder(held, { by, principal: who.principal })) {
    if (held.principal === who.principal) return current;
    // The same person from another login (a new one after a restart, or the CLI's): the take over
    // goes on from where they are now, since when it began.
    return deps.store.setTakeover(session.id, { ...held, principal: who.principal });
  }
  const takeover: SessionTakeover = { by, since: now.toISOString(), principal: who.principal };
  const taken = await deps.store.setTakeover(session.id, takeover);
  deps.logger.info('session taken over: its deliveries wait for the hand back', {
    workItem: taken.workItem,
    session: taken.id,
    by,
    console: who.principal !== null,
  });
  return taken;
}

/**
 * Hand the session back: its deliveries go on (the caller wakes the dispatcher). Logged with who,
 * since when and for how long, and recorded in the ledger as an unmetered drive. A session no one
 * holds is returned as it is, with nothing recorded.
 */
export async function handBack(
  deps: TakeoverDeps,
  session: SessionRecord,
  now: Date,
): Promise<SessionRecord> {
  const current = (await deps.store.get(session.id)) ?? session;
  const held = current.takeover;
  if (!held) return current;
  // Two at once (two tabs, the CLI and the console, a close and a hand back): one ends it and records
  // the drive; the other finds it ended.
  if (!(await deps.store.endTakeover(session.id, held))) return (await deps.store.get(session.id)) ?? current;
  const back = { ...current, takeover: null };
  const until = now.toISOString();
  await deps.ledger.recordUnmetered({
    at: until,
    sessionId: back.id,
    workItem: back.workItem,
    // Not a turn of ours: a person's typing is never one of the session's numbered turns.
    turnId: null,
    engine: back.engine,
    runner: back.runner,
    reason: `typed by ${held.by} (taken over ${held.since} → ${until})`,
  });
  deps.logger.info('session handed back: its deliveries go on', {
    workItem: back.workItem,
    session: back.id,
    by: held.by,
    since: held.since,
    until,
    lasted: takeoverLength(held.since, now),
  });
  return back;
}

/**
 * The session store, with a take over ended — and its typing recorded — whenever its session stops
 * being active (closed by a person or its work item, lost, ended by its engine): a closed session is
 * never shown as taken over, and the drive is not lost. Wraps whatever ends sessions, like the
 * gateway's token revocation.
 */
export function endingTakeovers(store: SessionStore, deps: Omit<TakeoverDeps, 'store'>): SessionStore {
  const end = async (session: SessionRecord): Promise<SessionRecord> => {
    if (!session.takeover) return session;
    try {
      return await handBack({ ...deps, store }, session, new Date());
    } catch (error) {
      deps.logger.error('could not end the take over of an ended session', { session: session.id, error });
      return session;
    }
  };
  return onSessionEnd(store, end);
}

/**
 * Why deliveries to a work item wait, the dispatcher's question: a person typing in its active
 * session first (nothing is pasted under their hands), then its budget holds (budget-hold.ts).
 */
export async function deliveryHold(app: HoldDeps, workItem: string): Promise<string | undefined> {
  const session = await app.store.findActive(workItem);
  const typing = session && takeoverReason(session);
  return typing ?? (await heldReason(app, workItem));
}
