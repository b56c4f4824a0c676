import { type FSWatcher, watch } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import { basename, dirname, isAbsolute } from 'node:path';
import { LoopError } from '../../core/errors.js';
import { type Logger, nullLogger } from '../../log/logger.js';
import {
  type HookEvent,
  type HookEventMatch,
  matchesHookEvent,
  parseHookEventLine,
} from './claude-hook-events.js';

/**
 * Reads back the events file `bin/the-loop-hook.js` appends to (one JSON line per Claude Code hook
 * event), from a persisted byte offset. Split on complete `\n` only, each line validated, a bad line
 * reported and skipped; unknown hook events are passed through as `other`.
 */

export interface HookEventsTailOptions {
  /** Byte offset to start from (a persisted `offset`); 0 reads the file from the start. */
  offset?: number;
  /**
   * Poll interval while a `next` waits. `fs.watch` only hints (it misses events on some file systems
   * and cannot watch a file that does not exist yet), so polling is what guarantees progress.
   */
  pollMs?: number;
  /** Longer lines are skipped with a warning; the hook caps its input at 8 MiB. */
  maxLineBytes?: number;
  logger?: Logger;
  /** Every event `next` consumes, matching or not, in file order. */
  onEvent?: (event: HookEvent) => void;
}

export interface NextOptions {
  timeoutMs?: number;
  signal?: AbortSignal;
}

export type NextResult =
  | { ok: true; event: HookEvent }
  | { ok: false; reason: 'timeout' | 'aborted' | 'closed' };

type Pending = { kind: 'line'; bytes: Buffer; end: number } | { kind: 'skipped'; size: number; end: number };

const DEFAULT_POLL_MS = 100;
const DEFAULT_MAX_LINE_BYTES = 32 * 1024 * 1024;
const READ_CHUNK_BYTES = 1024 * 1024;

/**
 * Follows one events file from a byte offset. Reads happen only while `next` waits. Complete lines
 * only; a bad line is reported and consumed. `offset` is the byte offset after the last line consumed,
 * for persisting and resuming after a restart.
 */
export class HookEventsTail {
  private consumed: number;
  /** Bytes of the file already read (consumed + queued + partial). */
  private readPos: number;
  private readonly queue: Pending[] = [];
  private partial: Buffer[] = [];
  private partialSize = 0;
  /** Inside a line too long to keep: its bytes so far. */
  private skipping: number | undefined;
  private waiting = false;
  private closed = false;
  private watcher: FSWatcher | undefined;
  private wake: (() => void) | undefined;
  private readonly pollMs: number;
  private readonly maxLineBytes: number;
  private readonly logger: Logger;

  constructor(
    readonly file: string,
    private readonly options: HookEventsTailOptions = {},
  ) {
    if (!isAbsolute(file) || /[\n\r\0]/.test(file)) {
      throw new LoopError(
        'internal',
        `events file must be an absolute path on one line: ${JSON.stringify(file)}`,
      );
    }
    const offset = options.offset ?? 0;
    if (!Number.isSafeInteger(offset) || offset < 0) {
      throw new LoopError('internal', `events file offset must be a non-negative integer, got ${offset}`);
    }
    this.consumed = offset;
    this.readPos = offset;
    this.pollMs = options.pollMs ?? DEFAULT_POLL_MS;
    this.maxLineBytes = options.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES;
    this.logger = options.logger ?? nullLogger;
  }

  /** Byte offset just after the last line `next` consumed. */
  get offset(): number {
    return this.consumed;
  }

  /** The first event from the current offset that matches; earlier events are consumed. */
  async next(match: HookEventMatch, options: NextOptions = {}): Promise<NextResult> {
    if (this.closed) return { ok: false, reason: 'closed' };
    if (this.waiting) throw new LoopError('internal', `already waiting for a hook event on ${this.file}`);
    if (options.signal?.aborted) return { ok: false, reason: 'aborted' };
    this.waiting = true;
    let stopped: 'timeout' | 'aborted' | undefined;
    const stop = (reason: 'timeout' | 'aborted') => {
      stopped ??= reason;
      this.wake?.();
    };
    const timer =
      options.timeoutMs === undefined ? undefined : setTimeout(() => stop('timeout'), options.timeoutMs);
    const onAbort = () => stop('aborted');
    options.signal?.addEventListener('abort', onAbort, { once: true });
    try {
      for (;;) {
        const event = this.take(match);
        if (event) return { ok: true, event };
        if (this.closed) return { ok: false, reason: 'closed' };
        if (stopped) return { ok: false, reason: stopped };
        if ((await this.readAvailable()) > 0) continue;
        if (this.closed || stopped) continue;
        this.ensureWatcher();
        await new Promise<void>((resolve) => {
          const poll = setTimeout(() => {
            this.wake = undefined;
            resolve();
          }, this.pollMs);
          this.wake = () => {
            clearTimeout(poll);
            this.wake = undefined;
            resolve();
          };
        });
      }
    } finally {
      if (timer) clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      this.waiting = false;
    }
  }

  /**
   * Consume every complete line the file has now, without waiting; returns their events in order.
   * Used before a delivery, so that events written meanwhile (a person typing in the TUI) are not
   * mistaken for the confirmation of our own prompt.
   */
  async drain(): Promise<HookEvent[]> {
    if (this.closed || this.waiting) return [];
    while ((await this.readAvailable()) > 0) {
      // Read until the end.
    }
    const events: HookEvent[] = [];
    this.take(undefined, events);
    return events;
  }

  /** Stop following: a waiting `next` resolves `closed`; no watcher or timer is left. */
  close(): void {
    this.closed = true;
    this.watcher?.close();
    this.watcher = undefined;
    this.wake?.();
  }

  /** Consume queued lines up to and including the first matching event (all of them without a match). */
  private take(match: HookEventMatch | undefined, collect?: HookEvent[]): HookEvent | undefined {
    for (let item = this.queue.shift(); item !== undefined; item = this.queue.shift()) {
      this.consumed = item.end;
      if (item.kind === 'skipped') {
        this.logger.warn('skipped an over-long hook event line', {
          file: this.file,
          bytes: item.size,
          limit: this.maxLineBytes,
        });
        continue;
      }
      const text = item.bytes.toString('utf8').replace(/\r$/, '');
      if (text.trim() === '') continue;
      const parsed = parseHookEventLine(text, item.end);
      if (!parsed.ok) {
        this.logger.warn('skipped a bad hook event line', {
          file: this.file,
          end: item.end,
          error: parsed.error,
        });
        continue;
      }
      for (const warning of parsed.warnings) {
        this.logger.warn(warning, { file: this.file, event: parsed.event.event, end: item.end });
      }
      this.options.onEvent?.(parsed.event);
      collect?.push(parsed.event);
      if (match && matchesHookEvent(match, parsed.event)) return parsed.event;
    }
    return undefined;
  }

  /** Read what the file has beyond `readPos`; returns the number of bytes read (0: nothing new). */
  private async readAvailable(): Promise<number> {
    let size: number;
    try {
      size = (await stat(this.file)).size;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 0;
      throw new LoopError('internal', `cannot read hook events file ${this.file}`, { cause: error });
    }
    if (size < this.readPos) {
      // Our events files only grow; a shorter one was truncated or replaced under us. Start over.
      this.logger.warn('hook events file shrank; reading it again from the start', {
        file: this.file,
        size,
        offset: this.readPos,
      });
      this.queue.length = 0;
      this.partial = [];
      this.partialSize = 0;
      this.skipping = undefined;
      this.consumed = 0;
      this.readPos = 0;
    }
    if (size === this.readPos) return 0;
    const handle = await open(this.file, 'r');
    let total = 0;
    try {
      while (this.readPos < size) {
        const buffer = Buffer.allocUnsafe(Math.min(READ_CHUNK_BYTES, size - this.readPos));
        const { bytesRead } = await handle.read(buffer, 0, buffer.length, this.readPos);
        if (bytesRead === 0) break;
        this.ingest(buffer.subarray(0, bytesRead));
        total += bytesRead;
      }
    } finally {
      await handle.close();
    }
    return total;
  }

  /** Split newly read bytes into complete lines (queued with their end offsets) and a partial rest. */
  private ingest(chunk: Buffer): void {
    const base = this.readPos;
    let start = 0;
    for (let nl = chunk.indexOf(10, start); nl !== -1; nl = chunk.indexOf(10, start)) {
      const piece = chunk.subarray(start, nl);
      const end = base + nl + 1;
      if (this.skipping !== undefined) {
        this.queue.push({ kind: 'skipped', size: this.skipping + piece.length, end });
        this.skipping = undefined;
      } else if (this.partialSize + piece.length > this.maxLineBytes) {
        this.queue.push({ kind: 'skipped', size: this.partialSize + piece.length, end });
      } else {
        const bytes = this.partialSize === 0 ? Buffer.from(piece) : Buffer.concat([...this.partial, piece]);
        this.queue.push({ kind: 'line', bytes, end });
      }
      this.partial = [];
      this.partialSize = 0;
      start = nl + 1;
    }
    const rest = chunk.subarray(start);
    if (rest.length > 0) {
      if (this.skipping !== undefined) {
        this.skipping += rest.length;
      } else if (this.partialSize + rest.length > this.maxLineBytes) {
        this.skipping = this.partialSize + rest.length;
        this.partial = [];
        this.partialSize = 0;
      } else {
        this.partial.push(Buffer.from(rest));
        this.partialSize += rest.length;
      }
    }
    this.readPos = base + chunk.length;
  }

  /** A directory watch as a hint to read early; polling still runs, and a missing dir is retried later. */
  private ensureWatcher(): void {
    if (this.watcher || this.closed) return;
    const name = basename(this.file);
    try {
      this.watcher = watch(dirname(this.file), { persistent: false }, (_type, changed) => {
        if (changed === null || changed === name) this.wake?.();
      });
      this.watcher.on('error', () => {
        this.watcher?.close();
        this.watcher = undefined;
      });
    } catch {
      this.watcher = undefined;
    }
  }
}
