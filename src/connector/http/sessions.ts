import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { LoopError } from '../../core/errors.js';
import type { Logger } from '../../log/logger.js';
import { MAX_BODY_BYTES } from './http-rules.js';

/**
 * The MCP sessions of `the-loop mcp --http`: each is one client's connection (its own grant check,
 * binding, backends and connection id in the audit) behind its own Streamable HTTP transport, found
 * by its `Mcp-Session-Id`. At most `max` at once; one idle for `idleMs` is closed, so is one its
 * client DELETEs; `closeAll` ends them all and disposes their backends.
 */

/** What the composition opens for a new session: a connection's MCP server and how to let it go. */
export interface OpenedSession {
  server: McpServer;
  /** The connection id the audit records its calls under. */
  connection: string;
  dispose(): Promise<unknown>;
}

export interface SessionTableOptions {
  open: () => Promise<OpenedSession>;
  max: number;
  idleMs: number;
  logger: Logger;
  now?: () => number;
}

/** A new session that was not started: the listener answers it with this status. */
export interface StartRefusal {
  status: number;
  message: string;
  retryAfterSeconds?: number;
}

interface Session {
  /** Set once the transport has answered the initialize request with it. */
  id: string | null;
  connection: string;
  transport: StreamableHTTPServerTransport;
  opened: OpenedSession;
  /** Requests other than the long-lived GET stream being answered: a session busy with them is not idle. */
  busy: number;
  lastActive: number;
  closing: Promise<void> | null;
}

export class SessionTable {
  private readonly sessions = new Map<string, Session>();
  /** Starts in progress (counted against `max` before their connection is open, so none overshoots). */
  private readonly starting = new Set<Promise<unknown>>();
  private closed = false;
  private readonly sweeper: NodeJS.Timeout;
  private readonly now: () => number;

  constructor(private readonly options: SessionTableOptions) {
    this.now = options.now ?? Date.now;
    // Checked a few times per idle period: a session lives at most a quarter longer than idleMs.
    const every = Math.min(60_000, Math.max(1_000, Math.floor(options.idleMs / 4)));
    this.sweeper = setInterval(() => this.sweep(), every);
    this.sweeper.unref();
  }

  get size(): number {
    return this.sessions.size;
  }

  /** The open sessions' ids with their connection ids. */
  list(): Array<{ id: string; connection: string }> {
    return [...this.sessions.values()].flatMap((s) => (s.id ? [{ id: s.id, connection: s.connection }] : []));
  }

  /** Answer a request of an open session; false (nothing written) when there is none of that id. */
  async serve(id: string, req: IncomingMessage, res: ServerResponse, body: unknown): Promise<boolean> {
    const session = this.sessions.get(id);
    if (!session || session.closing) return false;
    await this.handle(session, req, res, body);
    return true;
  }

  /**
   * Open a session for an initialize request and answer it; a refusal (nothing written) when the
   * table is full, shutting down, or the connection cannot open (a `single` target gone).
   */
  async start(req: IncomingMessage, res: ServerResponse, body: unknown): Promise<StartRefusal | null> {
    if (this.closed) return { status: 503, message: 'Service Unavailable: the server is stopping' };
    if (this.sessions.size + this.starting.size >= this.options.max)
      return {
        status: 503,
        message: `Service Unavailable: ${this.options.max} sessions are open; end one (DELETE /mcp) or try again later`,
        retryAfterSeconds: 60,
      };
    const started = this.open(req, res, body);
    this.starting.add(started);
    try {
      return await started;
    } finally {
      this.starting.delete(started);
    }
  }

  private async open(req: IncomingMessage, res: ServerResponse, body: unknown): Promise<StartRefusal | null> {
    let opened: OpenedSession;
    try {
      opened = await this.options.open();
    } catch (error) {
      if (!(error instanceof LoopError))
        this.options.logger.error('connector session failed to open', { error });
      return {
        status: 503,
        message: `Service Unavailable: ${error instanceof LoopError ? error.message : 'the connection could not open (logged)'}`,
      };
    }
    const session: Session = {
      id: null,
      connection: opened.connection,
      opened,
      busy: 0,
      lastActive: this.now(),
      closing: null,
      transport: new StreamableHTTPServerTransport({
        // 122 random bits: a session id is not guessable, though the token is what admits a request.
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => {
          session.id = id;
          this.sessions.set(id, session);
        },
        maxRequestBodySize: MAX_BODY_BYTES,
      }),
    };
    // Set before connect (the server chains its own): a DELETE or a close ends the session here too.
    session.transport.onclose = () => void this.end(session, 'closed');
    try {
      await opened.server.connect(session.transport);
      await this.handle(session, req, res, body);
    } catch (error) {
      await this.end(session, 'failed');
      throw error;
    }
    // Not initialized (the transport refused the request), or the server began stopping meanwhile.
    if (session.id === null || this.closed) await this.end(session, 'not started');
    else
      this.options.logger.info('connector session opened', {
        connection: session.connection,
        sessions: this.sessions.size,
      });
    return null;
  }

  private async handle(session: Session, req: IncomingMessage, res: ServerResponse, body: unknown) {
    // The GET stream stays open for as long as the client listens: it does not keep a session alive.
    const counted = req.method !== 'GET';
    if (counted) session.busy++;
    session.lastActive = this.now();
    try {
      await session.transport.handleRequest(req, res, body);
    } finally {
      if (counted) session.busy--;
      session.lastActive = this.now();
    }
  }

  /** Close one session: its transport (and streams), its server, its backends. Idempotent. */
  private end(session: Session, why: string): Promise<void> {
    if (session.closing) return session.closing;
    // Run after this returns: closing the server closes the transport, which calls back here.
    session.closing = Promise.resolve().then(async () => {
      if (session.id !== null && this.sessions.get(session.id) === session) this.sessions.delete(session.id);
      await session.opened.server.close().catch(() => {});
      await session.opened
        .dispose()
        .catch((error: unknown) =>
          this.options.logger.warn('connector session: a backend did not close', { error }),
        );
      if (session.id !== null)
        this.options.logger.info('connector session closed', { connection: session.connection, why });
    });
    return session.closing;
  }

  /** Close the sessions idle too long (the timer runs this; tests call it with their clock). */
  sweep(): void {
    const now = this.now();
    for (const session of this.sessions.values()) {
      if (session.busy === 0 && now - session.lastActive > this.options.idleMs)
        void this.end(session, 'idle');
    }
  }

  /** End every session, those still starting included; no session opens after. */
  async closeAll(): Promise<void> {
    this.closed = true;
    clearInterval(this.sweeper);
    await Promise.allSettled([...this.starting]);
    await Promise.all([...this.sessions.values()].map((s) => this.end(s, 'server stopping')));
  }
}
