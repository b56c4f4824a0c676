import type { IncomingMessage } from 'node:http';
import { readBodyWithin } from '../../web/read-body.js';

export type BodyRead =
  | { ok: true; body: Buffer }
  | { ok: false; why: 'too-large' | 'busy' | 'timeout' | 'client-gone' };

/**
 * A request body read whole, for the one kind of request whose JSON is checked before it may pass
 * (a Responses request's `background`, see allow-list.ts); every other request streams through
 * unread. Bounded like a streamed body: past `maxBytes` it stops (the rest is read and dropped), and
 * `idleMs` without a byte gives up; it counts against the gateway's body budget (web/limits.ts),
 * `busy` when it finds no room. Codex sends its whole body at once (a length-framed JSON request),
 * so holding it until its end delays nothing measurable.
 */
export async function readBody(req: IncomingMessage, maxBytes: number, idleMs: number): Promise<BodyRead> {
  const read = await readBodyWithin(req, maxBytes, { idleMs });
  if (read.ok) return read;
  return { ok: false, why: read.why === 'gone' ? 'client-gone' : read.why };
}
