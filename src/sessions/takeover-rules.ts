import { LoopError } from '../core/errors.js';
import type { SessionRecord, SessionTakeover } from '../core/ports/sessions.js';
import { stripControls } from '../core/text.js';

/**
 * The rules of take over, pure: why a taken-over session's deliveries wait, who may take it over
 * while it is held, and what a name must look like to be shown on every page and in `sessions list`.
 */

/** Why deliveries to this session wait for a person, if one took it over. */
export function takeoverReason(session: Pick<SessionRecord, 'takeover'>): string | undefined {
  const t = session.takeover;
  return t ? `taken over by ${t.by} since ${t.since}: hand back to go on` : undefined;
}

/**
 * Whether two take overs are the same person's: the same name (a person logging in again after a
 * daemon restart gets a new console login, and must not be locked out of their own take over), or
 * the same console login.
 */
export function sameHolder(a: SessionTakeover, b: Pick<SessionTakeover, 'by' | 'principal'>): boolean {
  return a.by === b.by || (a.principal !== null && a.principal === b.principal);
}

/**
 * Why this take over cannot be written, if it cannot: only an active session is taken over, and
 * only by one person at a time (the same person again is no conflict).
 */
export function takeoverRefusal(
  session: Pick<SessionRecord, 'workItem' | 'status' | 'takeover'>,
  takeover: Pick<SessionTakeover, 'by' | 'principal'>,
): LoopError | undefined {
  if (session.status !== 'active') {
    return new LoopError(
      'usage',
      `${session.workItem}'s session is ${session.status}: nothing to take over`,
      {
        hint: 'Only an active session can be taken over; the next delivery starts a new one.',
      },
    );
  }
  const held = session.takeover;
  if (!held || sameHolder(held, takeover)) return undefined;
  return new LoopError('usage', `${session.workItem} is taken over by ${held.by} since ${held.since}`, {
    hint: `Ask ${held.by} to hand it back (or hand it back yourself: the-loop sessions handback ${session.workItem}).`,
  });
}

/** Longest name shown for who took a session over. */
export const TAKEOVER_NAME_MAX = 100;

/**
 * The name a person took over as, checked: shown in pages, tables and the log, so it is one short
 * line of printable text (controls are refused, not silently removed: the person chose it).
 */
export function checkTakeoverName(by: string): string {
  const name = by.trim();
  if (name === '' || name.length > TAKEOVER_NAME_MAX || stripControls(name) !== name || /[\n\t]/.test(name)) {
    throw new LoopError('usage', `not a name to take over as: ${JSON.stringify(by.slice(0, 120))}`, {
      hint: `Give a name of 1 to ${TAKEOVER_NAME_MAX} printable characters (--as alice).`,
    });
  }
  return name;
}

/** How long a take over lasted, in words (`12 min 5 s`), for the log and the ledger's drive. */
export function takeoverLength(since: string, until: Date): string {
  const ms = Math.max(0, until.getTime() - Date.parse(since));
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}
