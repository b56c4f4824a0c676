/**
 * Splits a byte stream into complete lines. Only a complete `\n` ends a line (a chunk boundary
 * never does), a trailing `\r` is stripped, and bytes are decoded per line so a multi-byte character
 * split across chunks survives. A line longer than `maxLineBytes` is not buffered: its bytes are
 * dropped as they arrive and it is reported once, so an engine printing a 50 MB line costs no memory.
 *
 * Callbacks run synchronously, once per `\n`, in order. A line that lies whole inside one chunk (the
 * common case) is decoded straight from that chunk, with no copy; only the unfinished tail of a chunk
 * is copied (the chunk's buffer may be reused by the stream) and joined once its `\n` arrives.
 */
export interface LineReaderOptions {
  maxLineBytes: number;
  onLine: (line: string) => void;
  onOversized: (bytes: number) => void;
}

const LF = 0x0a;
const CR = 0x0d;

export class LineReader {
  private parts: Buffer[] = [];
  private size = 0;
  /** Bytes of the current line dropped so far; > 0 means we are skipping an oversized line. */
  private skipped = 0;

  constructor(private readonly options: LineReaderOptions) {}

  push(chunk: Buffer): void {
    let start = 0;
    // The end of a line begun in an earlier chunk.
    if (this.size > 0 || this.skipped > 0) {
      const nl = chunk.indexOf(LF);
      if (nl === -1) {
        this.append(chunk);
        return;
      }
      this.append(chunk.subarray(0, nl));
      this.finishLine();
      start = nl + 1;
    }
    // Lines whole inside this chunk.
    const max = this.options.maxLineBytes;
    let nl = chunk.indexOf(LF, start);
    while (nl !== -1) {
      const bytes = nl - start;
      if (bytes > max) this.options.onOversized(bytes);
      else this.options.onLine(decode(chunk, start, nl));
      start = nl + 1;
      nl = chunk.indexOf(LF, start);
    }
    // The unfinished rest, kept for the next chunk.
    if (start < chunk.length) this.append(chunk.subarray(start));
  }

  /** End of stream: a last line without `\n` is still a line. */
  end(): void {
    if (this.size > 0 || this.skipped > 0) this.finishLine();
  }

  private append(bytes: Buffer): void {
    if (bytes.length === 0) return;
    if (this.skipped > 0) {
      this.skipped += bytes.length;
      return;
    }
    if (this.size + bytes.length > this.options.maxLineBytes) {
      this.skipped = this.size + bytes.length;
      this.parts = [];
      this.size = 0;
      return;
    }
    // Copy: the chunk's buffer may be reused by the stream.
    this.parts.push(Buffer.from(bytes));
    this.size += bytes.length;
  }

  private finishLine(): void {
    if (this.skipped > 0) {
      const bytes = this.skipped;
      this.skipped = 0;
      this.options.onOversized(bytes);
      return;
    }
    const buffer = this.parts.length === 1 ? (this.parts[0] as Buffer) : Buffer.concat(this.parts, this.size);
    this.parts = [];
    this.size = 0;
    this.options.onLine(decode(buffer, 0, buffer.length));
  }
}

/** The UTF-8 text of `buffer[start, end)`, without one trailing `\r`. */
function decode(buffer: Buffer, start: number, end: number): string {
  const last = end > start && buffer[end - 1] === CR ? end - 1 : end;
  return buffer.toString('utf8', start, last);
}
