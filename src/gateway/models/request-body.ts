import type { IncomingMessage } from 'node:http';

export type BodyRead =
  | { ok: true; body: Buffer }
  | { ok: false; why: 'too-large' | 'timeout' | 'client-gone' };

/**
 * A request body read whole, for the one kind of request whose JSON is checked before it may pass
 * (a Responses request's `background`, see allow-list.ts); every other request streams through
 * unread. Bounded like a streamed body: past `maxBytes` it stops (the rest is read and dropped), and
 * `idleMs` without a byte gives up. Codex sends its whole body at once (a length-framed JSON
 * request), so holding it until its end delays nothing measurable.
 */
export function readBody(req: IncomingMessage, maxBytes: number, idleMs: number): Promise<BodyRead> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let bytes = 0;
    let settled = false;
    const finish = (read: BodyRead) => {
      if (settled) return;
      settled = true;
      clearTimeout(idle);
      req.off('data', onData);
      // Whatever is still arriving is read and dropped: a paused request would stall the socket.
      if (!read.ok) req.resume();
      resolve(read);
    };
    const idle = setTimeout(() => finish({ ok: false, why: 'timeout' }), idleMs);
    idle.unref();
    const onData = (chunk: Buffer) => {
      idle.refresh();
      bytes += chunk.length;
      if (bytes > maxBytes) finish({ ok: false, why: 'too-large' });
      else chunks.push(chunk);
    };
    req.on('data', onData);
    req.on('end', () => finish({ ok: true, body: Buffer.concat(chunks, bytes) }));
    req.on('error', () => finish({ ok: false, why: 'client-gone' }));
    req.on('close', () => {
      if (!req.complete) finish({ ok: false, why: 'client-gone' });
    });
  });
}
