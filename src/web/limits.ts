import { createServer, type IncomingMessage, type RequestListener, type Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { LoopError } from '../core/errors.js';
import type { Logger } from '../log/logger.js';
import { admitBytes, type HeldBody, shedForConnection } from './limits-plan.js';

/**
 * The limits every HTTP listener of the daemon runs under (webhook and telemetry, gateway, and the
 * browser console when it comes: create its server with `guard.createServer(handler)` and read any
 * body it keeps with `readBodyWithin`). One guard may serve several servers (the gateway's TCP port
 * and Unix socket): its connection cap and body budget are then shared.
 *
 * A connection that upgrades (a WebSocket) leaves HTTP: it no longer waits for headers, so it is
 * never shed for a waiting slot and never written a raw 503 (that would land inside its frames),
 * and it no longer counts against `maxConnections` — whoever accepts the upgrade caps those (the
 * console's live hub and terminal hub), so pages keep their room however many sockets are open.
 */
export interface ListenerLimits {
  /** Open connections; past it the listener sheds (limits-plan.ts), it never stops accepting. */
  maxConnections: number;
  /** Bytes of request bodies held in memory at once (bodies read with `readBodyWithin`). */
  maxBufferedBytes: number;
  /** A request's headers must arrive whole within this (Node answers 408 and closes). */
  headersTimeoutMs: number;
  /** The whole request, body included, within this; 0: no deadline (the gateway streams pushes). */
  requestTimeoutMs: number;
  /** A keep-alive connection waits this long for its next request. */
  keepAliveTimeoutMs: number;
  /** A connection silent this long is closed; 0: none. */
  idleTimeoutMs: number;
  /** Largest request line and headers, together (Node answers 431 past it). */
  maxHeaderBytes: number;
  /** What a refusal for lack of room tells the client to wait (`Retry-After`). */
  retryAfterSeconds: number;
  /** A body younger than this is shed only for a smaller one (limits-plan.ts). */
  graceMs: number;
}

/**
 * The webhook listener's defaults. GitHub sends a delivery at once and waits 10 s for the answer
 * (docs.github.com, "Best practices for using webhooks"), so a body still arriving after 20 s is
 * one nobody waits for. 1,024 connections at most 16 kB of headers each bound the memory of
 * connections that never finish their headers to ~16 MB; 64 MiB of bodies holds two of GitHub's
 * largest (25 MB) at once.
 */
export const LISTENER_DEFAULTS: ListenerLimits = {
  maxConnections: 1024,
  maxBufferedBytes: 64 * 1024 * 1024,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 20_000,
  keepAliveTimeoutMs: 5_000,
  idleTimeoutMs: 0,
  maxHeaderBytes: 16 * 1024,
  retryAfterSeconds: 5,
  graceMs: 1_000,
};

/** How often Node checks the header and request deadlines (its default, 30 s, would quadruple them). */
const CHECK_INTERVAL_MS = 1_000;
/** A shed connection still open this long after its 503 is destroyed (a handler that did not answer). */
const SHED_CLOSE_MS = 1_000;
/** Shedding is logged at most this often, with the counts since the last line. */
const LOG_EVERY_MS = 60_000;

interface Conn {
  socket: Socket;
  guard: ListenerGuard;
  body: BodyHold | undefined;
  /** Requests begun and not yet answered (several when a client pipelines). */
  inFlight: number;
  /** Requests served: a kept-alive connection is closed when shed, never sent a 503 it could misread. */
  served: number;
  /** Upgraded (a WebSocket): out of HTTP's cap and its waiting list for good. */
  upgraded: boolean;
}

/** What a server does with an upgrade request its guard has already taken out of HTTP's count. */
export type UpgradeListener = (req: IncomingMessage, socket: Duplex, head: Buffer) => void;

/** A body being read under a guard's budget. */
export interface BodyHold extends HeldBody {
  conn: Conn;
  /** Called when the body is shed: its reader stops and its handler answers 503. */
  onShed: () => void;
}

export interface ListenerCounts {
  /** HTTP connections (what `maxConnections` caps). */
  open: number;
  /** Connections that upgraded and are still open (capped by whoever accepted them). */
  upgraded: number;
  heldBytes: number;
  shedWaiting: number;
  shedBodies: number;
  refusedConnections: number;
  refusedBodies: number;
}

const connOf = new WeakMap<Socket, Conn>();
let nextBodyId = 1;

/** The guard of the listener a request came in on (undefined: a server made without one). */
export const guardOf = (req: IncomingMessage): ListenerGuard | undefined => connOf.get(req.socket)?.guard;

const rawBusy = (retryAfter: number) =>
  `HTTP/1.1 503 Service Unavailable\r\nRetry-After: ${retryAfter}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`;

export class ListenerGuard {
  readonly limits: ListenerLimits;
  private open = 0;
  private upgrades = 0;
  /** Connections waiting for a request's headers, the longest-waiting first (Map keeps insertion order). */
  private readonly waiting = new Map<Socket, Conn>();
  private readonly bodies = new Map<number, BodyHold>();
  private readonly counts = { shedWaiting: 0, shedBodies: 0, refusedConnections: 0, refusedBodies: 0 };
  private logged = { at: 0, shed: 0 };

  constructor(
    limits: Partial<ListenerLimits> = {},
    private readonly logger?: Logger,
    private readonly name = 'listener',
  ) {
    this.limits = validLimits({ ...LISTENER_DEFAULTS, ...limits });
  }

  /**
   * An HTTP server with these limits (timeouts, header size, connection cap, body budget). With
   * `onUpgrade`, it serves upgrades: each socket is taken out of HTTP's count before the handler
   * sees it. Without, it adds no 'upgrade' listener: Node then hands an upgrade request to the
   * request handler as a plain request (the webhook listener answers it so).
   */
  createServer(listener: RequestListener, onUpgrade?: UpgradeListener): Server {
    const l = this.limits;
    const server = createServer(
      {
        headersTimeout: l.headersTimeoutMs,
        requestTimeout: l.requestTimeoutMs,
        keepAliveTimeout: l.keepAliveTimeoutMs,
        connectionsCheckingInterval: CHECK_INTERVAL_MS,
        maxHeaderSize: l.maxHeaderBytes,
      },
      listener,
    );
    if (l.idleTimeoutMs > 0) server.setTimeout(l.idleTimeoutMs, (socket) => socket.destroy());
    server.on('connection', (socket: Socket) => this.connected(socket));
    if (onUpgrade) {
      server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
        this.upgraded(req.socket);
        onUpgrade(req, socket, head);
      });
    }
    server.on('request', (req: IncomingMessage, res) => {
      const conn = connOf.get(req.socket);
      if (!conn) return;
      this.waiting.delete(req.socket);
      conn.inFlight++;
      res.once('close', () => {
        conn.inFlight--;
        conn.served++;
        // A keep-alive connection waits for its next request: it is sheddable again, as the newest —
        // once no pipelined request of it is still being answered.
        if (conn.inFlight === 0 && !conn.upgraded && !conn.socket.destroyed)
          this.waiting.set(conn.socket, conn);
      });
    });
    return server;
  }

  /** What the guard holds and has shed so far. */
  stats(): ListenerCounts {
    return { open: this.open, upgraded: this.upgrades, heldBytes: this.heldBytes(), ...this.counts };
  }

  /**
   * The connection has upgraded (createServer's `onUpgrade` calls this first; a server wiring its own
   * 'upgrade' listener must too): out of the waiting list and of HTTP's cap. Idempotent.
   */
  upgraded(socket: Socket): void {
    const conn = connOf.get(socket);
    if (!conn || conn.guard !== this || conn.upgraded) return;
    conn.upgraded = true;
    this.waiting.delete(socket);
    this.open--;
    this.upgrades++;
  }

  /**
   * Count a body of `declared` bytes (0 when unknown) against the budget, shedding others as
   * limits-plan.ts allows; undefined when it does not fit even so (answer 503).
   */
  hold(req: IncomingMessage, declared: number, onShed: () => void): BodyHold | undefined {
    const conn = connOf.get(req.socket);
    if (!conn) return undefined;
    const body: BodyHold = {
      id: nextBodyId++,
      reserved: 0,
      received: 0,
      startedAt: Date.now(),
      conn,
      onShed,
    };
    if (!this.reserve(body, declared)) {
      this.counts.refusedBodies++;
      this.note();
      return undefined;
    }
    conn.body = body;
    this.bodies.set(body.id, body);
    return body;
  }

  /** `received` bytes have arrived for `body`; false when they no longer fit (answer 503). */
  grow(body: BodyHold, received: number): boolean {
    body.received = received;
    if (received <= body.reserved) return true;
    if (this.reserve(body, received)) return true;
    this.counts.refusedBodies++;
    this.note();
    return false;
  }

  /** The body is read (or abandoned): its bytes no longer count. Idempotent. */
  release(body: BodyHold): void {
    this.bodies.delete(body.id);
    if (body.conn.body === body) body.conn.body = undefined;
  }

  private heldBytes(): number {
    let n = 0;
    for (const b of this.bodies.values()) n += b.reserved;
    return n;
  }

  /** Raise `body`'s reservation to `bytes`, shedding others when needed (limits-plan.ts). */
  private reserve(body: BodyHold, bytes: number): boolean {
    const decision = admitBytes({
      bodies: [...this.bodies.values()],
      id: body.id,
      need: bytes,
      budget: this.limits.maxBufferedBytes,
      now: Date.now(),
      graceMs: this.limits.graceMs,
    });
    if (!decision.admit) return false;
    for (const id of decision.shed) this.shedBody(id);
    body.reserved = bytes;
    return true;
  }

  private shedBody(id: number): void {
    const body = this.bodies.get(id);
    if (!body) return;
    this.release(body);
    this.counts.shedBodies++;
    this.note();
    body.onShed();
    // The handler answers 503 and closes; if it does not, the connection goes anyway.
    const socket = body.conn.socket;
    setTimeout(() => socket.destroy(), SHED_CLOSE_MS).unref();
  }

  private connected(socket: Socket): void {
    const conn: Conn = { socket, guard: this, body: undefined, inFlight: 0, served: 0, upgraded: false };
    connOf.set(socket, conn);
    this.open++;
    this.waiting.set(socket, conn);
    socket.once('close', () => {
      if (conn.upgraded) this.upgrades--;
      else this.open--;
      this.waiting.delete(socket);
      if (conn.body) this.release(conn.body);
    });
    const decision = shedForConnection({
      open: this.open,
      cap: this.limits.maxConnections,
      waiting: this.waiting.size > 1,
      bodies: [...this.bodies.values()],
      now: Date.now(),
      graceMs: this.limits.graceMs,
    });
    if (decision.kind === 'waiting') {
      const [oldest] = this.waiting.keys();
      if (oldest) this.refuse(oldest);
      this.counts.shedWaiting++;
      this.note();
    } else if (decision.kind === 'body') this.shedBody(decision.id);
    else if (decision.kind === 'refuse') {
      this.refuse(socket);
      this.counts.refusedConnections++;
      this.note();
    }
  }

  /**
   * Close a connection that has no request in progress, telling it when to come back — unless it was
   * kept alive after a request: a client reusing it at that moment would read the 503 as the answer
   * to its new request, so it is only closed (as any idle keep-alive connection may be).
   */
  private refuse(socket: Socket): void {
    this.waiting.delete(socket);
    const conn = connOf.get(socket);
    // Best effort (a small write goes out at once), not waited for: the descriptor is what counts.
    // Never into an upgraded stream (it is never chosen; said again here, where the write is).
    if (conn?.served === 0 && !conn.upgraded && socket.writable) {
      socket.write(rawBusy(this.limits.retryAfterSeconds));
    }
    socket.destroy();
  }

  /** A warning when the listener sheds, at most once a minute. */
  private note(): void {
    const now = Date.now();
    if (!this.logger || now - this.logged.at < LOG_EVERY_MS) return;
    const c = this.counts;
    const total = c.shedWaiting + c.shedBodies + c.refusedConnections + c.refusedBodies;
    this.logger.warn(`${this.name} is full: shedding connections and request bodies`, {
      ...this.stats(),
      sinceLastWarning: total - this.logged.shed,
    });
    this.logged = { at: now, shed: total };
  }
}

/** Limits that make sense together, or a clear error naming the one that does not. */
export function validLimits(l: ListenerLimits): ListenerLimits {
  const bad = (what: string) => new LoopError('config-invalid', `listener limits: ${what}`);
  for (const [key, value] of Object.entries(l)) {
    if (!Number.isInteger(value) || value < 0) throw bad(`${key} must be a whole number ≥ 0, not ${value}`);
  }
  if (l.maxConnections < 1) throw bad('maxConnections must be at least 1');
  if (l.headersTimeoutMs < 1) throw bad('headersTimeoutMs must be at least 1');
  if (l.requestTimeoutMs > 0 && l.headersTimeoutMs > l.requestTimeoutMs) {
    throw bad(
      `headersTimeoutMs (${l.headersTimeoutMs}) must not exceed requestTimeoutMs (${l.requestTimeoutMs})`,
    );
  }
  return l;
}

/** The webhook and telemetry listener's limits, from `server.*` in the config. */
export const serverLimits = (s: {
  maxConnections: number;
  maxBufferedBytes: number;
  headersTimeoutSeconds: number;
  requestTimeoutSeconds: number;
}): Partial<ListenerLimits> => ({
  maxConnections: s.maxConnections,
  maxBufferedBytes: s.maxBufferedBytes,
  headersTimeoutMs: s.headersTimeoutSeconds * 1000,
  requestTimeoutMs: s.requestTimeoutSeconds * 1000,
});
