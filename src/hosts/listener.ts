/**
 * Wake-ups across hosts (issue 17): a connection of its own LISTENs on the channel the PostgreSQL
 * inbox notifies when work becomes runnable, and each notification wakes the dispatcher, which reads
 * the inbox: the payload (a hash of the work item, a hint) is never read. The
 * dispatcher's poll stays as the slow backstop: a notification lost while the connection was down
 * costs at most one poll interval. A dropped connection is made again with back-off (logged once).
 */
import type { Logger } from '../log/logger.js';

/** The inbox's channel (the PostgreSQL inbox notifies it). */
export const INBOX_CHANNEL = 'the_loop_inbox';

/** The part of a `pg.Client` the listener uses (the composition root makes one over the store's URL). */
export interface ListenClient {
  connect(): Promise<unknown>;
  query(text: string): Promise<unknown>;
  on(event: 'notification', listener: (message: { channel: string }) => void): unknown;
  on(event: 'error' | 'end', listener: (error?: Error) => void): unknown;
  end(): Promise<void>;
}

export interface ListenerOptions {
  /** A new, unconnected client (a dropped one is never reused). */
  client: () => ListenClient;
  onNotify: () => void;
  logger: Logger;
  /** Back-off after a failure: from this (ms)… */
  minDelayMs?: number;
  /** …doubling up to this. */
  maxDelayMs?: number;
}

export class InboxListener {
  private client: ListenClient | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private delay: number;
  private down = false;

  constructor(private readonly options: ListenerOptions) {
    this.delay = options.minDelayMs ?? 500;
  }

  /** Connect and LISTEN; resolves once listening (or once the first attempt failed: it retries). */
  async start(): Promise<void> {
    this.stopped = false;
    await this.connect();
  }

  /** Whether it is listening now. */
  listening(): boolean {
    return this.client !== undefined && !this.down;
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    const client = this.options.client();
    let lost = false;
    const onLost = (error?: Error) => {
      if (lost) return;
      lost = true;
      if (this.client === client) this.client = undefined;
      client.end().catch(() => {});
      this.retry(error);
    };
    client.on('error', onLost);
    client.on('end', () => onLost());
    client.on('notification', (message) => {
      if (message.channel === INBOX_CHANNEL) this.options.onNotify();
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${INBOX_CHANNEL}`);
    } catch (error) {
      onLost(error instanceof Error ? error : new Error(String(error)));
      return;
    }
    if (lost || this.stopped) {
      client.end().catch(() => {});
      return;
    }
    this.client = client;
    if (this.down) this.options.logger.info('listening for inbox notifications again', {});
    this.down = false;
    this.delay = this.options.minDelayMs ?? 500;
    // Whatever was notified while it was down: one wake-up covers it.
    this.options.onNotify();
  }

  private retry(error?: Error): void {
    if (this.stopped) return;
    if (!this.down)
      this.options.logger.warn('inbox notifications lost; reconnecting (the poll goes on meanwhile)', {
        error: error?.message ?? 'connection ended',
      });
    this.down = true;
    const delay = this.delay;
    this.delay = Math.min(this.delay * 2, this.options.maxDelayMs ?? 30_000);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.connect();
    }, delay);
    this.timer.unref();
  }

  /** Stop listening and close the connection. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => {});
  }
}
