import { WebSocket } from 'ws';
import type { Logger } from '../log/logger.js';
import type { ConsoleDeps, EventCursor } from './ports.js';
import type { EventView, LiveMessage } from './protocol.js';

/**
 * The live socket (/ws/live): the sessions list whenever it changes, and for the session a page
 * watches, its detail and the new events of its running (or latest) turn. One poll serves every
 * socket: the store is read once per tick, whatever the number of pages open, and a socket is sent
 * only what changed for it.
 */

/** The list and a watched session's detail: a person reads them, once a second is live enough. */
const ROWS_MS = 1000;
/** A process session's events stream: a third of a second keeps the page close behind the engine. */
const EVENTS_MS = 300;
/** A client says little (`watch`); a larger frame is not read. */
const MAX_CLIENT_FRAME = 4 * 1024;
/** Frames that are not a known message before the socket is closed (1008). */
const MAX_BAD_FRAMES = 200;
/** A page that stopped reading: past this much unsent, its socket is closed rather than buffered. */
const MAX_BUFFERED = 8 * 1024 * 1024;
/** Events in one message (a first watch of a long turn sends its latest ones). */
const MAX_EVENTS = 500;

type LiveDeps = Pick<ConsoleDeps, 'sessionRows' | 'sessionDetail' | 'turnEvents'>;

interface Client {
  ws: WebSocket;
  watching: string | null;
  sentRows: string | undefined;
  sentDetail: string | undefined;
  cursor: EventCursor | undefined;
  bad: number;
}

export class LiveHub {
  private readonly clients = new Set<Client>();
  private timers: NodeJS.Timeout[] = [];
  private readonly busy = { rows: false, events: false };

  constructor(
    private readonly deps: LiveDeps,
    private readonly logger: Logger,
    private readonly intervals: { rowsMs?: number; eventsMs?: number } = {},
  ) {}

  /** A new, authenticated socket: sent the list at once, then what changes. */
  attach(ws: WebSocket): void {
    const client: Client = {
      ws,
      watching: null,
      sentRows: undefined,
      sentDetail: undefined,
      cursor: undefined,
      bad: 0,
    };
    this.clients.add(client);
    ws.on('message', (data, isBinary) => this.received(client, data as Buffer, isBinary));
    ws.on('close', () => {
      this.clients.delete(client);
      if (this.clients.size === 0) this.stopTimers();
    });
    ws.on('error', () => ws.terminate());
    this.startTimers();
    void this.pushRows([client]);
  }

  counts(): { clients: number } {
    return { clients: this.clients.size };
  }

  close(): void {
    this.stopTimers();
    for (const client of this.clients) client.ws.terminate();
    this.clients.clear();
  }

  private startTimers(): void {
    if (this.timers.length > 0) return;
    const rows = setInterval(() => void this.tickRows(), this.intervals.rowsMs ?? ROWS_MS);
    const events = setInterval(() => void this.tickEvents(), this.intervals.eventsMs ?? EVENTS_MS);
    rows.unref();
    events.unref();
    this.timers = [rows, events];
  }

  private stopTimers(): void {
    for (const timer of this.timers) clearInterval(timer);
    this.timers = [];
  }

  private received(client: Client, data: Buffer, isBinary: boolean): void {
    const message = isBinary || data.length > MAX_CLIENT_FRAME ? undefined : parseWatch(data);
    if (!message) {
      client.bad++;
      if (client.bad > MAX_BAD_FRAMES) client.ws.close(1008, 'too many malformed frames');
      return;
    }
    client.watching = message.sessionId;
    client.sentDetail = undefined;
    client.cursor = undefined;
    if (message.sessionId) {
      void this.pushDetails([client]);
      void this.pushEvents([client]);
    }
  }

  private async tickRows(): Promise<void> {
    if (this.busy.rows) return;
    this.busy.rows = true;
    try {
      await this.pushRows([...this.clients]);
      await this.pushDetails([...this.clients]);
    } finally {
      this.busy.rows = false;
    }
  }

  private async tickEvents(): Promise<void> {
    if (this.busy.events) return;
    this.busy.events = true;
    try {
      await this.pushEvents([...this.clients]);
    } finally {
      this.busy.events = false;
    }
  }

  private async pushRows(clients: Client[]): Promise<void> {
    if (clients.length === 0) return;
    const text = await this.read('sessions', async () =>
      JSON.stringify({ t: 'sessions', rows: await this.deps.sessionRows() } satisfies LiveMessage),
    );
    if (text === undefined) return;
    for (const client of clients) {
      if (client.sentRows === text) continue;
      client.sentRows = text;
      this.send(client, text);
    }
  }

  private async pushDetails(clients: Client[]): Promise<void> {
    for (const [id, watchers] of byWatched(clients)) {
      const text = await this.read('session', async () => {
        const detail = await this.deps.sessionDetail(id);
        return detail ? JSON.stringify({ t: 'session', detail } satisfies LiveMessage) : undefined;
      });
      if (text === undefined) continue;
      for (const client of watchers) {
        if (client.watching !== id || client.sentDetail === text) continue;
        client.sentDetail = text;
        this.send(client, text);
      }
    }
  }

  private async pushEvents(clients: Client[]): Promise<void> {
    for (const client of clients) {
      const id = client.watching;
      if (!id) continue;
      const events = await this.read('events', () => this.deps.turnEvents(id, client.cursor, MAX_EVENTS));
      // Only what is past the cursor (the store says so already; a stand-in may not).
      const fresh = after(events ?? [], client.cursor);
      const last = fresh.at(-1);
      if (!last || client.watching !== id) continue;
      client.cursor = { turnId: last.turnId, seq: last.seq };
      this.send(client, JSON.stringify({ t: 'events', sessionId: id, events: fresh } satisfies LiveMessage));
    }
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

/** Clients by the session they watch. */
function byWatched(clients: Client[]): Map<string, Client[]> {
  const map = new Map<string, Client[]>();
  for (const client of clients) {
    if (!client.watching) continue;
    const list = map.get(client.watching) ?? [];
    list.push(client);
    map.set(client.watching, list);
  }
  return map;
}

/** Events past the cursor: a new turn (another id) starts from its first event. */
function after(events: EventView[], cursor: EventCursor | undefined): EventView[] {
  if (!cursor) return events;
  return events.filter((e) => e.turnId > cursor.turnId || (e.turnId === cursor.turnId && e.seq > cursor.seq));
}
