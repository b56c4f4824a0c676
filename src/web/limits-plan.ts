/**
 * What a listener sheds when it is full: pure decisions over plain data (the adapter is limits.ts).
 *
 * A plain cap that refuses new connections would hand the listener to whoever fills it first: 5,000
 * connections that never finish their headers would lock out the next good webhook. So a full
 * listener admits the newcomer and sheds what costs most and does least: first the connection that
 * has waited longest for its headers (a keep-alive connection between requests waits too), then the
 * slowest body being read. A connection that upgraded (a WebSocket) is none of these: it has left
 * HTTP, is not counted in `open` and is never shed here (whoever accepted it caps its kind).
 *
 * The same rule keeps the body budget. A body that does not fit sheds the slowest bodies past their
 * grace period (a newcomer cannot shed a good request that has only just started), then, if that is
 * not enough, young bodies larger than itself, largest first; it is refused when even that would
 * not make room. An attacker who wants to keep a share must send faster than good clients do (and a
 * body that arrives fast ends fast, and is then checked and dropped), and cannot hold the budget
 * with bodies in their grace period either: filling it takes bodies larger than budget / connection
 * cap (64 kB by default), and those yield to the small ones GitHub sends.
 */

/** A body being read into memory, as the budget sees it. */
export interface HeldBody {
  id: number;
  /** Bytes counted against the budget: its declared length, or what has arrived when larger. */
  reserved: number;
  /** Bytes that have arrived so far. */
  received: number;
  /** When its reading started (ms). */
  startedAt: number;
}

/** Bytes per second a body has arrived at, young bodies counted over the whole grace period. */
export const arrivalRate = (body: HeldBody, now: number, graceMs: number): number =>
  (body.received * 1000) / Math.max(now - body.startedAt, graceMs, 1);

/** Bodies that may be shed (past the grace period), slowest first, the older first on a tie. */
export function sheddable(
  bodies: readonly HeldBody[],
  now: number,
  graceMs: number,
  except?: number,
): HeldBody[] {
  return bodies
    .filter((b) => b.id !== except && now - b.startedAt >= graceMs)
    .map((b) => ({ b, rate: arrivalRate(b, now, graceMs) }))
    .sort((x, y) => x.rate - y.rate || x.b.startedAt - y.b.startedAt || x.b.id - y.b.id)
    .map((x) => x.b);
}

export type BodyAdmission = { admit: true; shed: number[] } | { admit: false };

/**
 * Whether body `id` may hold `need` bytes in all within `budget` (what it holds already is its own,
 * not counted twice), and which other bodies to shed for it: those past the grace period, slowest
 * first, then young ones larger than `need`, largest first. Nothing is shed when shedding all that
 * may be shed would still not make room.
 */
export function admitBytes(input: {
  bodies: readonly HeldBody[];
  id: number;
  need: number;
  budget: number;
  now: number;
  graceMs: number;
}): BodyAdmission {
  const { bodies, id, need, budget, now, graceMs } = input;
  const held = bodies.reduce((n, b) => (b.id === id ? n : n + b.reserved), 0);
  let free = budget - held;
  if (need <= free) return { admit: true, shed: [] };
  const shed: number[] = [];
  const old = sheddable(bodies, now, graceMs, id);
  const larger = bodies
    .filter((b) => b.id !== id && now - b.startedAt < graceMs && b.reserved > need)
    .sort((x, y) => y.reserved - x.reserved || x.startedAt - y.startedAt || x.id - y.id);
  for (const body of [...old, ...larger]) {
    shed.push(body.id);
    free += body.reserved;
    if (need <= free) return { admit: true, shed };
  }
  return { admit: false };
}

export type ConnectionShed =
  | { kind: 'none' }
  | { kind: 'waiting' }
  | { kind: 'body'; id: number }
  | { kind: 'refuse' };

/**
 * What to do when a connection has just opened, with `open` connections counting it: nothing while
 * within `cap`; else shed the connection waiting longest for its headers, else the slowest body past
 * its grace period, else refuse the newcomer (every connection is busy with a request that is not
 * reading a body: a streamed push or model answer is not cut for a newcomer).
 */
export function shedForConnection(input: {
  open: number;
  cap: number;
  /** Whether some connection other than the newcomer waits for its headers. */
  waiting: boolean;
  bodies: readonly HeldBody[];
  now: number;
  graceMs: number;
}): ConnectionShed {
  if (input.open <= input.cap) return { kind: 'none' };
  if (input.waiting) return { kind: 'waiting' };
  const [slowest] = sheddable(input.bodies, input.now, input.graceMs);
  return slowest ? { kind: 'body', id: slowest.id } : { kind: 'refuse' };
}
