import type { SessionRecord } from '../core/ports/sessions.js';
import type { ActLine } from '../core/status-facts.js';

/**
 * Why a session's deliveries wait, and what releases them, in words a person on GitHub can act on.
 * Pure. A take over and a TUI waiting for a person are holds too: they say who, and how it goes on.
 */
export function holdOf(
  session: Pick<SessionRecord, 'workItem' | 'hold' | 'takeover' | 'waiting'>,
): { reason: string; release: string } | undefined {
  // The work item names the session in every command, and is what a person on GitHub knows.
  const id = session.workItem;
  const resume = `\`the-loop sessions resume ${id}\` or the console's Resume button`;
  if (session.takeover)
    return {
      reason: `taken over by ${session.takeover.by}`,
      release: `${session.takeover.by} hands it back (\`the-loop sessions handback ${id}\`)`,
    };
  const hold = session.hold;
  if (hold) {
    switch (hold.kind) {
      case 'over-budget':
        return {
          reason: `over budget: ${hold.reason}`,
          release: `\`the-loop sessions resume ${id} --raise <amount>\` (raises the ${hold.dimension} ceiling) or the console's Resume button`,
        };
      case 'breach':
        return {
          reason: `an act the policy forbids: ${hold.reason}`,
          release: `a person reviews it (\`the-loop acts --session ${id}\`), then ${resume}`,
        };
      case 'unaccounted':
        return { reason: `its usage could not be accounted for: ${hold.reason}`, release: resume };
      case 'interrupted':
        return { reason: `its host stopped mid-turn: ${hold.reason}`, release: resume };
    }
  }
  if (session.waiting)
    return {
      reason: `waiting for a person: ${session.waiting.message}`,
      release: `a person answers it in the session's terminal (\`the-loop sessions attach ${id}\` or the console)`,
    };
  return undefined;
}

/** An act as a tracking comment lists it: what it was about, the commit a push left, its outcome. */
export function actLineOf(act: {
  kind: string;
  detail: unknown;
  outcome: ActLine['outcome'];
  rule: string | null;
  command: string;
}): ActLine {
  const d = (act.detail && typeof act.detail === 'object' ? act.detail : {}) as Record<string, unknown>;
  const list = (v: unknown) =>
    Array.isArray(v) && v.every((x) => typeof x === 'string') && v.length > 0 ? v.join(', ') : undefined;
  const text = (v: unknown) => (typeof v === 'string' && v !== '' ? v : undefined);
  const target =
    text(d.ref) ??
    list(d.branches) ??
    list(d.tags) ??
    list(d.refs) ??
    (text(d.pr) ? `#${d.pr}` : undefined) ??
    text(d.endpoint) ??
    list(d.packages) ??
    text(d.path) ??
    act.command.slice(0, 200);
  const sha = text(d.newOid);
  return {
    kind: act.kind,
    target,
    sha: sha && !/^0+$/.test(sha) ? sha : undefined,
    outcome: act.outcome,
    rule: act.outcome === 'blocked' ? (act.rule ?? undefined) : undefined,
  };
}
