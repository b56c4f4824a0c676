import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';

/**
 * Hostile clients on the loopback, for the ingress-abuse acceptance test: a fixed number of slots,
 * each a connection that misbehaves; one the server closes is opened again after `reopenMs`, up
 * to `maxOpens` in all (bounded), until `stop()`. One shared timer drives every slot.
 */
export interface AttackStats {
  /** Connections opened in all. */
  opened: number;
  /** Open now. */
  open: number;
  /** Closed by the server (before stop()). */
  closedByServer: number;
  /** Status lines the server answered with, counted (`503`, `408`, …). */
  statuses: Record<string, number>;
  /** Body bytes written in all. */
  bytesSent: number;
}

export interface Attack {
  stats(): AttackStats;
  stop(): void;
}

interface Slot {
  socket: Socket | undefined;
  sent: number;
}

interface Behaviour {
  /** What is written on connect. */
  start: (slot: Slot) => string;
  /** What is written on each tick (undefined: nothing more). */
  tick: (slot: Slot) => Buffer | string | undefined;
}

function attack(
  port: number,
  count: number,
  b: Behaviour,
  o: { tickMs: number; reopenMs: number; maxOpens: number },
): Attack {
  const stats: AttackStats = { opened: 0, open: 0, closedByServer: 0, statuses: {}, bytesSent: 0 };
  const slots: Slot[] = Array.from({ length: count }, () => ({ socket: undefined, sent: 0 }));
  let stopped = false;
  const timers = new Set<NodeJS.Timeout>();
  const later = (ms: number, fn: () => void) => {
    const t = setTimeout(() => {
      timers.delete(t);
      fn();
    }, ms);
    timers.add(t);
  };
  const open = (slot: Slot) => {
    if (stopped || stats.opened >= o.maxOpens) return;
    stats.opened++;
    stats.open++;
    slot.sent = 0;
    const socket = connect({ port, host: '127.0.0.1' });
    slot.socket = socket;
    socket.on('connect', () => socket.write(b.start(slot)));
    socket.on('data', (d: Buffer) => {
      const m = /^HTTP\/1\.1 (\d{3})/.exec(d.subarray(0, 16).toString('latin1'));
      if (m?.[1]) stats.statuses[m[1]] = (stats.statuses[m[1]] ?? 0) + 1;
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      stats.open--;
      slot.socket = undefined;
      if (stopped) return;
      stats.closedByServer++;
      later(o.reopenMs + Math.floor(Math.random() * o.reopenMs), () => open(slot));
    });
  };
  // Opened in batches: a burst of thousands of SYNs would overflow the listen backlog.
  for (let i = 0; i < count; i += 250)
    later(Math.floor(i / 250) * 20, () => slots.slice(i, i + 250).forEach(open));
  const ticker = setInterval(() => {
    for (const slot of slots) {
      const s = slot.socket;
      if (!s || s.connecting || s.destroyed || s.writableNeedDrain) continue;
      const data = b.tick(slot);
      if (data === undefined) continue;
      const n = typeof data === 'string' ? Buffer.byteLength(data) : data.length;
      slot.sent += n;
      stats.bytesSent += n;
      s.write(data);
    }
  }, o.tickMs);
  return {
    stats: () => ({ ...stats, statuses: { ...stats.statuses } }),
    stop: () => {
      stopped = true;
      clearInterval(ticker);
      for (const t of timers) clearTimeout(t);
      for (const slot of slots) slot.socket?.destroy();
    },
  };
}

/** Connections that start a request and never finish its headers (a byte now and then). */
export function unfinishedHeaders(port: number, count: number, maxOpens: number): Attack {
  return attack(
    port,
    count,
    { start: () => 'POST /gh-webhook HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Never-Ends: ', tick: () => 'a' },
    { tickMs: 1_000, reopenMs: 1_000, maxOpens },
  );
}

/**
 * Unsigned (wrongly signed) webhook bodies of `size` bytes sent slowly, `chunk` bytes per slot per
 * tick, never the last byte: half declare their length, half are chunked (no length to refuse up
 * front, so they can only be held to the budget as they grow).
 */
export function slowBodies(
  port: number,
  count: number,
  size: number,
  chunk: number,
  maxOpens: number,
): Attack {
  const data = Buffer.alloc(chunk, 'a');
  let n = 0;
  const chunked = new WeakSet<Slot>();
  return attack(
    port,
    count,
    {
      start: (slot) => {
        const id = `abuse-${n++}`;
        if (n % 2 === 0) chunked.delete(slot);
        else chunked.add(slot);
        const framing = chunked.has(slot) ? 'transfer-encoding: chunked' : `content-length: ${size}`;
        return [
          'POST /gh-webhook HTTP/1.1',
          'host: 127.0.0.1',
          'content-type: application/json',
          'x-github-event: issues',
          `x-github-delivery: ${id}`,
          `x-hub-signature-256: sha256=${'0'.repeat(64)}`,
          framing,
          '',
          '',
        ].join('\r\n');
      },
      tick: (slot) => {
        if (slot.sent >= size - chunk) return undefined;
        if (!chunked.has(slot)) return data;
        return Buffer.concat([Buffer.from(`${chunk.toString(16)}\r\n`), data, Buffer.from('\r\n')]);
      },
    },
    { tickMs: 100, reopenMs: 1_000, maxOpens },
  );
}

/** One request on a connection of its own (no keep-alive pool): status and body. */
export function post(
  url: string,
  body: Buffer | undefined,
  headers: Record<string, string> = {},
  method = body ? 'POST' : 'GET',
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, headers, agent: false, timeout: 30_000 }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (c: string) => {
        text += c;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: text.trim() }));
    });
    req.on('timeout', () => req.destroy(new Error(`${method} ${url}: no answer in 30 s`)));
    req.on('error', reject);
    req.end(body);
  });
}

/** The resident set of a process, in MB (VmRSS from /proc). */
export function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m?.[1]) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(m[1]) / 1024;
}
