/**
 * Splits a byte stream into complete lines. Only a complete `\n` ends a line (a chunk boundary
 * never does), a trailing `\r` is stripped, and bytes are decoded per line so a multi-byte character
 * split across chunks survives. A line longer than `maxLineBytes` is not buffered: its bytes are
 * dropped as they arrive and it is reported once, so an engine printing a 50 MB line costs no memory.
 */
export interface LineReaderOptions {
  maxLineBytes: number;
  onLine: (line: string) => void;
  onOversized: (bytes: number) => void;
}

export class LineReader {
  private parts: Buffer[] = [];
  private size = 0;
  /** Bytes of the current line dropped so far; > 0 means we are skipping an oversized line. */
  private skipped = 0;

  constructor(private readonly options: LineReaderOptions) {}

  push(chunk: Buffer): void {
    let start = 0;
    while (start < chunk.length) {
      const nl = chunk.indexOf(0x0a, start);
      const end = nl === -1 ? chunk.length : nl;
      this.append(chunk.subarray(start, end));
      if (nl === -1) return;
      this.finishLine();
      start = nl + 1;
    }
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
    let line = buffer.toString('utf8');
    if (line.endsWith('\r')) line = line.slice(0, -1);
    this.options.onLine(line);
  }
}
