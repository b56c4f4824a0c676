import type { IncomingMessage } from 'node:http';
import { guardOf } from './limits.js';

export type BodyRead =
  | { ok: true; body: Buffer }
  | {
      ok: false;
      /**
       * too-large: over `maxBytes` (answer 413 and close); busy: no room in the listener's body
       * budget, or shed for a faster body (answer 503 with `Retry-After` and close, see
       * `busyHeaders`); timeout: `idleMs` without a byte; gone: the client left or was cut.
       */
      why: 'too-large' | 'busy' | 'timeout' | 'gone';
    };

/** Why a body was not read whole. */
export type BodyRefusal = Extract<BodyRead, { ok: false }>['why'];

/** The declared Content-Length (Node has refused a malformed one already), or undefined. */
const declaredLength = (req: IncomingMessage): number | undefined => {
  const value = req.headers['content-length'];
  if (value === undefined) return undefined;
  const n = Number(value);
  return Number.isSafeInteger(n) && n >= 0 ? n : undefined;
};

/** Headers for a 503 when a body found no room: when to try again, and that the connection ends. */
export const busyHeaders = (req: IncomingMessage): Record<string, string> => ({
  'retry-after': String(guardOf(req)?.limits.retryAfterSeconds ?? 5),
  connection: 'close',
});

/**
 * Read a request body whole, within `maxBytes` and within the body budget of the listener it came
 * in on (limits.ts). A declared length over `maxBytes`, or one that finds no room, is refused before
 * a byte is read; a body that grows past either is stopped there. Whatever was kept of a body that
 * is refused or shed is let go at once, and the rest of it is read and dropped (a paused request
 * would stall the socket) until the caller's answer closes the connection.
 */
export function readBodyWithin(
  req: IncomingMessage,
  maxBytes: number,
  options: { idleMs?: number } = {},
): Promise<BodyRead> {
  const declared = declaredLength(req);
  if (declared !== undefined && declared > maxBytes) return Promise.resolve({ ok: false, why: 'too-large' });
  const guard = guardOf(req);
  return new Promise((resolve) => {
    let chunks: Buffer[] = [];
    // A declared length is read into one buffer of that size: each chunk is copied and let go at
    // once, instead of many small buffers living as long as the body.
    let whole: Buffer | undefined;
    let bytes = 0;
    let settled = false;
    const finish = (read: BodyRead) => {
      if (settled) return;
      settled = true;
      if (idle) clearTimeout(idle);
      req.off('data', onData);
      if (hold) guard?.release(hold);
      chunks = [];
      whole = undefined;
      if (!read.ok) req.resume();
      resolve(read);
    };
    const hold = guard?.hold(req, declared ?? 0, () => finish({ ok: false, why: 'busy' }));
    const idle = options.idleMs
      ? setTimeout(() => finish({ ok: false, why: 'timeout' }), options.idleMs)
      : undefined;
    idle?.unref();
    const onData = (chunk: Buffer) => {
      idle?.refresh();
      bytes += chunk.length;
      if (bytes > maxBytes) return finish({ ok: false, why: 'too-large' });
      if (hold && guard && !guard.grow(hold, bytes)) return finish({ ok: false, why: 'busy' });
      if (whole) chunk.copy(whole, bytes - chunk.length);
      else chunks.push(chunk);
    };
    if (guard && !hold) return finish({ ok: false, why: 'busy' });
    req.on('data', onData);
    if (declared) whole = Buffer.allocUnsafe(declared);
    req.once('end', () =>
      finish({ ok: true, body: whole ? whole.subarray(0, bytes) : Buffer.concat(chunks, bytes) }),
    );
    req.once('error', () => finish({ ok: false, why: 'gone' }));
    req.once('close', () => {
      if (!req.complete) finish({ ok: false, why: 'gone' });
    });
  });
}
