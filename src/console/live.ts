import { WebSocket } from 'ws';
import type { Logger } from '../log/logger.js';
import type { ConsoleDeps, EventCursor } from './ports.js';
import type { LiveMessage } from './protocol.js';

/**
 * The live socket (/ws/live): the sessions list whenever it changes, and for the session a page
 * watches, its detail and the new events of its running (or latest) turn. One poll serves every
 * socket: each tick reads the list once, and each watched session's detail and events once, however
 * many pages are open on it (they share one cursor into its events). A page that starts watching a
 * session already watched is sent what the hub holds of it (its detail, its latest events) without
 * a read; only the first page of a session waits for the next tick, whose read starts at its latest
 * events (at most MAX_EVENTS). A socket is sent only what changed for it.
 */

export interface LiveOptions {
  rowsMs?: number;
  eventsMs?: number;
  /** Live sockets open at once; past it a new one is closed (1013). */
  maxClients?: number;
}

/** The list and a watched session's detail: a person reads them, once a second is live enough. */
const ROWS_MS = 1000;
/** A process session's events stream: a third of a second keeps the page close behind the engine. */
const EVENTS_MS = 300;
/**
 * One per open page: the listener's HTTP cap does not count upgraded sockets (web/limits.ts), so
 * this is what bounds them (and the sessions watched, and the events the hub holds for them).
 */
const MAX_CLIENTS = 256;
/** A client says little (`watch`); a larger frame is not read. */
const MAX_CLIENT_FRAME = 4 * 1024;
/** Frames that are not a known message before the socket is closed (1008). */
const MAX_BAD_FRAMES = 200;
/** A page sends `watch` when it opens or changes session: past this many a second, frames are bad. */
const FRAMES_PER_SECOND = 10;
/** A page that stopped reading: past this much unsent, its socket is closed rather than buffered. */
const MAX_BUFFERED = 8 * 1024 * 1024;
/** Events in one message (a first watch of a long turn sends its latest ones). */
const MAX_EVENTS = 500;
/** What the hub keeps of a watched session's latest events for the pages that join it, in bytes. */
const RECENT_BYTES = 512 * 1024;

type LiveDeps = Pick<ConsoleDeps, 'sessionRows' | 'sessionDetail' | 'turnEvents'>;

/** An event serialized once, for every page it goes to. */
interface Sent extends EventCursor {
  json: string;
}

/** A session some page watches: what every page on it shares. */
interface Watch {
  id: string;
  clients: Set<Client>;
  /** Its first events read has been done: a page joining now is sent `recent` at once. */
  primed: boolean;
  /** The last event read (the store is read past it). */
  cursor: EventCursor | undefined;
  /** Its latest turn's last events (at most MAX_EVENTS and RECENT_BYTES). */
  recent: Sent[];
  /** Its last detail message. */
  detail: string | undefined;
}

interface Client {
  ws: WebSocket;
  watch: Watch | null;
  sentRows: string | undefined;
  sentDetail: string | undefined;
  /** The last event this page was sent (a page that joined late is behind or ahead of the watch). */
  cursor: EventCursor | undefined;
  bad: number;
  frames: { since: number; count: number };
}

export class LiveHub {
  private readonly clients = new Set<Client>();
  private readonly watches = new Map<string, Watch>();
  /** The last list message: what a new socket is sent at once (while any socket is open). */
  private rows: string | undefined;
  private refused = 0;
  private timers: NodeJS.Timeout[] = [];
  private readonly busy = { rows: false, events: false };

  constructor(
    private readonly deps: LiveDeps,
    private readonly logger: Logger,
    private readonly options: LiveOptions = {},
  ) {}

  /** A new, authenticated socket: sent the list at once, then what changes (closed 1013 when full). */
  attach(ws: WebSocket): void {
    if (this.clients.size >= (this.options.maxClients ?? MAX_CLIENTS)) {
      this.refused++;
      // The page says the reason and tries again later (console/src/live.ts).
      ws.close(1013, 'too many live pages are open: close some, this one retries');
      return;
    }
    const client: Client = {
      ws,
      watch: null,
      sentRows: undefined,
      sentDetail: undefined,
      cursor: undefined,
      bad: 0,
      frames: { since: 0, count: 0 },
    };
    this.clients.add(client);
    ws.on('message', (data, isBinary) => this.received(client, data as Buffer, isBinary));
    ws.on('close', () => this.detach(client));
    ws.on('error', () => ws.terminate());
    this.startTimers();
    if (this.rows === undefined) void this.tickRows();
    else {
      client.sentRows = this.rows;
      this.send(client, this.rows);
    }
  }

  counts(): { clients: number; watched: number; refused: number } {
    return { clients: this.clients.size, watched: this.watches.size, refused: this.refused };
  }

  close(): void {
    this.stopTimers();
    for (const client of this.clients) client.ws.terminate();
    this.clients.clear();
    this.watches.clear();
  }

  private detach(client: Client): void {
    this.unwatch(client);
    this.clients.delete(client);
    if (this.clients.size === 0) this.stopTimers();
  }

  private startTimers(): void {
    if (this.timers.length > 0) return;
    const rows = setInterval(() => void this.tickRows(), this.options.rowsMs ?? ROWS_MS);
    const events = setInterval(() => void this.tickEvents(), this.options.eventsMs ?? EVENTS_MS);
    rows.unref();
    events.unref();
    this.timers = [rows, events];
  }

  private stopTimers(): void {
    for (const timer of this.timers) clearInterval(timer);
    this.timers = [];
    // Nobody is sent it while no socket is open: the next one reads a fresh list.
    this.rows = undefined;
  }

  private received(client: Client, data: Buffer, isBinary: boolean): void {
    const message =
      !this.withinRate(client) || isBinary || data.length > MAX_CLIENT_FRAME ? undefined : parseWatch(data);
    if (!message) {
      client.bad++;
      if (client.bad > MAX_BAD_FRAMES) client.ws.close(1008, 'too many malformed frames');
      return;
    }
    // The same session again keeps its Watch (leaving first could drop it, and its cursor with it).
    if (client.watch?.id !== message.sessionId) this.unwatch(client);
    if (message.sessionId) this.watch(client, message.sessionId);
  }

  /** Whether this frame is within the socket's FRAMES_PER_SECOND (a window of one second). */
  private withinRate(client: Client): boolean {
    const now = Date.now();
    if (now - client.frames.since >= 1000) client.frames = { since: now, count: 0 };
    client.frames.count++;
    return client.frames.count <= FRAMES_PER_SECOND;
  }

  private watch(client: Client, id: string): void {
    let watch = this.watches.get(id);
    if (!watch) {
      watch = { id, clients: new Set(), primed: false, cursor: undefined, recent: [], detail: undefined };
      this.watches.set(id, watch);
    }
    watch.clients.add(client);
    client.watch = watch;
    client.sentDetail = undefined;
    client.cursor = undefined;
    if (!watch.primed) return;
    // What the hub holds of it already: no read for a page joining a session others watch.
    if (watch.detail !== undefined) {
      client.sentDetail = watch.detail;
      this.send(client, watch.detail);
    }
    this.sendEvents(client, watch, watch.recent);
  }

  private unwatch(client: Client): void {
    const watch = client.watch;
    if (!watch) return;
    watch.clients.delete(client);
    client.watch = null;
    if (watch.clients.size === 0) this.watches.delete(watch.id);
  }

  private async tickRows(): Promise<void> {
    if (this.busy.rows) return;
    this.busy.rows = true;
    try {
      await this.pushRows();
      for (const watch of [...this.watches.values()]) await this.pushDetail(watch);
    } finally {
      this.busy.rows = false;
    }
  }

  private async tickEvents(): Promise<void> {
    if (this.busy.events) return;
    this.busy.events = true;
    try {
      for (const watch of [...this.watches.values()]) {
        // A session's first tick brings its detail too (the rows tick refreshes it after).
        if (!watch.primed) await this.pushDetail(watch);
        await this.pushEvents(watch);
      }
    } finally {
      this.busy.events = false;
    }
  }

  private async pushRows(): Promise<void> {
    if (this.clients.size === 0) return;
    const text = await this.read('sessions', async () =>
      JSON.stringify({ t: 'sessions', rows: await this.deps.sessionRows() } satisfies LiveMessage),
    );
    if (text === undefined || this.clients.size === 0) return;
    this.rows = text;
    for (const client of this.clients) {
      if (client.sentRows === text) continue;
      client.sentRows = text;
      this.send(client, text);
    }
  }

  private async pushDetail(watch: Watch): Promise<void> {
    const text = await this.read('session', async () => {
      const detail = await this.deps.sessionDetail(watch.id);
      return detail ? JSON.stringify({ t: 'session', detail } satisfies LiveMessage) : undefined;
    });
    if (text === undefined || this.watches.get(watch.id) !== watch) return;
    watch.detail = text;
    for (const client of watch.clients) {
      if (client.sentDetail === text) continue;
      client.sentDetail = text;
      this.send(client, text);
    }
  }

  /** One read past the session's cursor, for every page on it. */
  private async pushEvents(watch: Watch): Promise<void> {
    const events = await this.read('events', () => this.deps.turnEvents(watch.id, watch.cursor, MAX_EVENTS));
    // Gone while read (its last page left): a page watching it again has a new Watch.
    if (events === undefined || this.watches.get(watch.id) !== watch) return;
    watch.primed = true;
    // Only what is past the cursor (the store says so already; a stand-in may not).
    const fresh = after(events, watch.cursor).map(
      (e): Sent => ({ turnId: e.turnId, seq: e.seq, json: JSON.stringify(e) }),
    );
    const last = fresh.at(-1);
    if (!last) return;
    watch.cursor = { turnId: last.turnId, seq: last.seq };
    watch.recent = keepRecent(watch.recent, fresh);
    const text = eventsMessage(watch.id, fresh);
    for (const client of watch.clients) this.sendEvents(client, watch, fresh, text);
  }

  /** The events a page has not been sent yet (`text`: all of `events`, serialized already). */
  private sendEvents(client: Client, watch: Watch, events: Sent[], text?: string): void {
    const fresh = after(events, client.cursor);
    const last = fresh.at(-1);
    if (!last) return;
    client.cursor = { turnId: last.turnId, seq: last.seq };
    this.send(
      client,
      text !== undefined && fresh.length === events.length ? text : eventsMessage(watch.id, fresh),
    );
  }

  /** A read of the store; a failure is logged and the tick skipped (the next one tries again). */
  private async read<T>(what: string, fn: () => Promise<T>): Promise<T | undefined> {
    try {
      return await fn();
    } catch (error) {
      this.logger.warn('console: live read failed', { what, error });
      return undefined;
    }
  }

  private send(client: Client, text: string): void {
    const { ws } = client;
    if (ws.readyState !== WebSocket.OPEN) return;
    if (ws.bufferedAmount > MAX_BUFFERED) {
      ws.terminate();
      return;
    }
    ws.send(text);
  }
}

function parseWatch(data: Buffer): { sessionId: string | null } | undefined {
  let value: unknown;
  try {
    value = JSON.parse(data.toString('utf8'));
  } catch {
    return undefined;
  }
  if (!value || typeof value !== 'object') return undefined;
  const m = value as { t?: unknown; sessionId?: unknown };
  if (m.t !== 'watch') return undefined;
  if (m.sessionId === null) return { sessionId: null };
  return typeof m.sessionId === 'string' && /^[0-9a-f-]{36}$/i.test(m.sessionId)
    ? { sessionId: m.sessionId.toLowerCase() }
    : undefined;
}

/**
 * `{ t: 'events', sessionId, events }` (LiveMessage) from events serialized once: a page that joins
 * late, or is behind, is sent a slice of them without serializing them again.
 */
function eventsMessage(sessionId: string, events: readonly Sent[]): string {
  return `{"t":"events","sessionId":${JSON.stringify(sessionId)},"events":[${events.map((e) => e.json).join(',')}]}`;
}

/**
 * What a page joining now is sent: the latest turn's last events (an earlier turn's are what a read
 * without a cursor would not return either), at most MAX_EVENTS and RECENT_BYTES of them.
 */
function keepRecent(recent: readonly Sent[], fresh: readonly Sent[]): Sent[] {
  const turn = fresh.at(-1)?.turnId;
  const kept = [...recent, ...fresh].filter((e) => e.turnId === turn).slice(-MAX_EVENTS);
  let bytes = 0;
  let from = kept.length;
  while (from > 0 && bytes + (kept[from - 1]?.json.length ?? 0) <= RECENT_BYTES) {
    from--;
    bytes += kept[from]?.json.length ?? 0;
  }
  return kept.slice(from);
}

/** Events past the cursor: a new turn (another id) starts from its first event. */
function after<E extends EventCursor>(events: readonly E[], cursor: EventCursor | undefined): E[] {
  if (!cursor) return [...events];
  return events.filter((e) => e.turnId > cursor.turnId || (e.turnId === cursor.turnId && e.seq > cursor.seq));
}
