/**
 * An incremental Server-Sent Events parser, after the WHATWG HTML "event stream interpretation"
 * (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation):
 * chunks may split anywhere (inside a line, a `\r\n` pair or a UTF-8 sequence); lines end in `\r\n`,
 * `\n` or `\r`; `data:` lines of one event are joined with `\n`; a blank line dispatches; lines
 * starting with `:` are comments; an event with no data is not dispatched; an unterminated event at
 * the end of the stream is dropped (the spec's rule: it may be cut short). A line or an event longer
 * than `maxEventBytes` is skipped, reported once, and parsing goes on at the next event.
 *
 * It works on bytes, for a proxy that tees a long stream through it: line ends are found with native
 * searches, and an event whose name `accept` refuses (a text delta) is never decoded or copied.
 * Splitting on CR and LF bytes is safe for UTF-8 (neither occurs inside a multi-byte sequence), so
 * each event's data is decoded whole. It holds at most one line and one event.
 */

export interface SseEvent {
  /** The `event:` field ('' when absent; the spec's default type is then "message"). */
  event: string;
  /** The `data:` lines joined with `\n`. */
  data: string;
  /** The `id:` field, when the event had one. */
  id?: string | undefined;
}

export interface SseParserOptions {
  onEvent: (event: SseEvent) => void;
  /** Which event names are worth decoding (default: all). Refused events are skipped unread. */
  accept?: (eventName: string) => boolean;
  /** A line or an event over the limit was skipped (called once per skipped event). */
  onOversized?: (bytes: number) => void;
  /** Bound on one line and on one event's data, in bytes (default 16 MiB). */
  maxEventBytes?: number;
}

/** The OpenAI `response.completed` event repeats the whole output: room for a long answer. */
const DEFAULT_MAX_EVENT_BYTES = 16 * 1024 * 1024;
const LF = 0x0a;
const CR = 0x0d;
const COLON = 0x3a;
const NEWLINE = Buffer.from('\n');

/** Does `buf[a, b)` hold the field `name` (followed by `:` or the line end)? */
function isField(buf: Buffer, a: number, b: number, name: string): boolean {
  const n = name.length;
  if (b - a < n || (b - a > n && buf[a + n] !== COLON)) return false;
  for (let i = 0; i < n; i++) if (buf[a + i] !== name.charCodeAt(i)) return false;
  return true;
}

/** Where a field's value starts: after the colon and one optional space. */
function valueStart(buf: Buffer, a: number, b: number, nameLength: number): number {
  const v = a + nameLength + 1;
  return v < b && buf[v] === 0x20 ? v + 1 : Math.min(v, b);
}

export class SseParser {
  private readonly max: number;
  /** Pieces of the incomplete line carried over from earlier chunks. */
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  /** A chunk ended in `\r`: a `\n` starting the next one belongs to the same line end. */
  private afterCR = false;
  private firstLine = true;
  /** The current event went over the limit, or its name was refused: skip it, up to its blank line. */
  private skipping = false;
  private refused = false;
  /** The current line went over the limit: its end is not a blank line. */
  private dropping = false;
  private event = '';
  private data: Buffer[] = [];
  private dataBytes = 0;
  private id: string | undefined;

  constructor(private readonly options: SseParserOptions) {
    this.max = options.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES;
  }

  /** One chunk of the stream. The parser keeps views of it: never change a chunk once pushed. */
  push(chunk: Buffer | string): void {
    const buf = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
    const n = buf.length;
    let start = 0;
    if (this.afterCR && n > 0) {
      this.afterCR = false;
      if (buf[0] === LF) start = 1;
    }
    let lf = buf.indexOf(LF, start);
    let cr = buf.indexOf(CR, start);
    while (lf !== -1 || cr !== -1) {
      const end = lf === -1 ? cr : cr === -1 ? lf : Math.min(lf, cr);
      this.endLine(buf, start, end);
      start = end + 1;
      if (end === cr) {
        if (start < n) {
          if (buf[start] === LF) start += 1;
        } else this.afterCR = true;
        cr = buf.indexOf(CR, start);
      }
      if (lf !== -1 && lf < start) lf = buf.indexOf(LF, start);
    }
    if (start < n) this.carry(buf, start, n);
  }

  /** The stream ended: an event without its blank line is dropped, as the spec says. */
  end(): void {
    this.pending = [];
    this.pendingBytes = 0;
    this.resetEvent();
    this.dropping = false;
  }

  private carry(buf: Buffer, from: number, to: number): void {
    if (this.dropping) return;
    if (this.pendingBytes + (to - from) > this.max) {
      this.oversize(this.pendingBytes + (to - from));
      this.pending = [];
      this.pendingBytes = 0;
      this.dropping = true;
      return;
    }
    this.pending.push(buf.subarray(from, to));
    this.pendingBytes += to - from;
  }

  private endLine(buf: Buffer, from: number, to: number): void {
    if (this.dropping) {
      this.dropping = false;
      return;
    }
    let line = buf;
    let a = from;
    let b = to;
    if (this.pendingBytes > 0) {
      line = Buffer.concat([...this.pending, buf.subarray(from, to)]);
      a = 0;
      b = line.length;
      this.pending = [];
      this.pendingBytes = 0;
    }
    if (this.firstLine) {
      this.firstLine = false;
      // A byte order mark at the start of the stream is not part of the first line.
      if (b - a >= 3 && line[a] === 0xef && line[a + 1] === 0xbb && line[a + 2] === 0xbf) a += 3;
    }
    this.takeLine(line, a, b);
  }

  private takeLine(line: Buffer, a: number, b: number): void {
    if (a === b) {
      this.dispatch();
      return;
    }
    if (this.skipping || line[a] === COLON) return; // ':' starts a comment (keep-alive pings)
    if (b - a > this.max) {
      this.oversize(b - a);
      return;
    }
    if (isField(line, a, b, 'data')) {
      if (this.refused) return;
      const v = valueStart(line, a, b, 4);
      this.dataBytes += b - v + 1;
      if (this.dataBytes > this.max) this.oversize(this.dataBytes);
      // Kept by reference: decoded once, at the blank line.
      else this.data.push(line.subarray(v, b));
    } else if (isField(line, a, b, 'event')) {
      this.event = line.toString('utf8', valueStart(line, a, b, 5), b);
      this.refused = this.options.accept !== undefined && !this.options.accept(this.event);
    } else if (isField(line, a, b, 'id')) {
      const id = line.toString('utf8', valueStart(line, a, b, 2), b);
      if (!id.includes('\0')) this.id = id;
    }
    // `retry` and unknown fields are ignored.
  }

  private dispatch(): void {
    const skip = this.skipping || this.refused || this.data.length === 0;
    const event = skip ? undefined : this.build();
    this.resetEvent();
    if (event) this.options.onEvent(event);
  }

  private build(): SseEvent | undefined {
    const parts: Buffer[] = [];
    for (const [i, d] of this.data.entries()) {
      if (i > 0) parts.push(NEWLINE);
      parts.push(d);
    }
    const data =
      parts.length === 1 ? (parts[0] as Buffer).toString('utf8') : Buffer.concat(parts).toString('utf8');
    const event: SseEvent = { event: this.event, data };
    if (this.id !== undefined) event.id = this.id;
    return event;
  }

  private oversize(bytes: number): void {
    if (!this.skipping) this.options.onOversized?.(bytes);
    this.resetEvent();
    this.skipping = true;
  }

  private resetEvent(): void {
    this.event = '';
    this.data = [];
    this.dataBytes = 0;
    this.id = undefined;
    this.skipping = false;
    this.refused = false;
  }
}
