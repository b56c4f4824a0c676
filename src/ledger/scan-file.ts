import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';

/**
 * Reads the usage records of one Claude Code transcript file from a byte offset, fast: lines are
 * filtered as bytes before anything is decoded (only an `assistant` record with a `"usage":{` key is
 * looked at), and of those only the few fields the ledger needs are decoded (scan-record.ts). The
 * file is streamed in chunks, never read whole; a line longer than a chunk is assembled in a grown
 * buffer (up to 64 MB, then skipped). Only complete lines are read: the cursor stops before a
 * partial last line.
 */

import { lastIndexIn, recordAt, type ScannedRecord, USAGE } from './scan-record.js';

export { recordOf, type ScannedRecord } from './scan-record.js';

export interface ScanCursor {
  offset: number;
  inode?: number | undefined;
}

export interface FileScan {
  records: ScannedRecord[];
  /** Byte offset after the last complete line read. */
  offset: number;
  inode: number;
  size: number;
  /** The file was truncated or replaced since the cursor: it was read again from byte 0. */
  restarted?: 'truncated' | 'replaced' | undefined;
  /** Candidate lines that could not be used (broken JSON, bad numbers), with the first few reasons. */
  skipped: number;
  /** Records whose key was already seen (not returned). */
  duplicates: number;
  warnings: string[];
}

/** Bytes read at a time, into one buffer per thread (4 MB held 6 MB more over two threads, no faster). */
const CHUNK = 1024 * 1024;
/** A candidate line longer than this is skipped (a real record this long is an image dump). */
const MAX_LINE = 64 * 1024 * 1024;
const MAX_WARNINGS = 5;

const ASSISTANT = Buffer.from('"type":"assistant"');
const ASSISTANT_RECORD = Buffer.from(',"type":"assistant"');

/** One file to scan, from where the last scan of it stopped. */
export interface ScanJob {
  path: string;
  offset: number;
  inode?: number | undefined;
}

export type ScanResult = { path: string; scan: FileScan } | { path: string; error: string };

/** A job with the number of bytes it will read (to share work out and cut it into pieces). */
export interface ScannedJob extends ScanJob {
  bytes: number;
}

/**
 * Scan files one after the other (one thread's share). One key map for all of them: copies across
 * files (a resumed session repeats its history) are folded here already. `metered`: Claude session
 * ids metered per turn elsewhere (see `recordOf`). An unreadable file is reported, not fatal.
 */
export function scanFiles(jobs: readonly ScanJob[], metered: ReadonlySet<string>): ScanResult[] {
  const seen = new Map<string, ScannedRecord>();
  return jobs.map((job) => {
    try {
      return { path: job.path, scan: scanFile(job.path, job, seen, metered) };
    } catch (error) {
      return { path: job.path, error: (error as NodeJS.ErrnoException).code ?? String(error) };
    }
  });
}

/**
 * The scan itself, with blocking reads: it runs in worker threads (or a CLI command) where nothing
 * else waits, and reads from the page cache are copies — a thread-pool round trip per chunk showed
 * as a fifth of the scan time. `seen`: records already found, by key — a copy is counted in
 * `duplicates`, not returned, and only raises the first record's output count if it has a larger one.
 */
export function scanFile(
  path: string,
  cursor: ScanCursor,
  seen: Map<string, ScannedRecord> = new Map(),
  metered?: ReadonlySet<string>,
): FileScan {
  // Transcripts are written by engines: a symlink is not followed, and a FIFO neither blocks the
  // open nor is read (the error is this file's, reported, and the scan goes on).
  const handle = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  try {
    const stat = fstatSync(handle);
    if (!stat.isFile()) throw new Error(`${path} is not a regular file`);
    const { start, restarted } = startOf(cursor, stat);
    const out: FileScan = {
      records: [],
      offset: start,
      inode: stat.ino,
      size: stat.size,
      restarted,
      skipped: 0,
      duplicates: 0,
      warnings: [],
    };
    const skip = (why: string, at: number) => {
      out.skipped += 1;
      if (out.warnings.length < MAX_WARNINGS) out.warnings.push(`${path}: byte ${at}: ${why}`);
    };
    // One buffer per thread, reused file after file: a fresh 4 MB per file would cost a page fault
    // per 4 KB of it (measured: a third of the scan time).
    let buffer = idle ?? Buffer.allocUnsafe(CHUNK);
    idle = undefined;
    let carried = 0; // bytes of an incomplete line kept at the start of `buffer`
    let position = start;
    while (position < stat.size) {
      if (carried === buffer.length) {
        // One line fills the whole buffer: grow it (up to the limit) or skip the line.
        if (buffer.length >= MAX_LINE) {
          const nl = findNewline(handle, position, stat.size);
          skip(`line longer than ${MAX_LINE} bytes`, out.offset);
          if (nl < 0) break;
          position = nl + 1;
          out.offset = position;
          carried = 0;
          continue;
        }
        const bigger = Buffer.allocUnsafe(Math.min(buffer.length * 2, MAX_LINE));
        buffer.copy(bigger, 0, 0, carried);
        buffer = bigger;
      }
      const bytesRead = readSync(
        handle,
        buffer,
        carried,
        Math.min(buffer.length - carried, stat.size - position),
        position,
      );
      if (bytesRead === 0) break;
      position += bytesRead;
      const end = carried + bytesRead;
      const lastNewline = buffer.lastIndexOf(0x0a, end - 1);
      if (lastNewline < 0) {
        carried = end; // no line ends in what we have: read on
        continue;
      }
      const complete = lastNewline + 1;
      const take = (lineStart: number, lineEnd: number, u?: number) => {
        const r = recordAt(buffer, lineStart, lineEnd, seen, metered, u);
        if (r === null) out.duplicates += 1;
        else if (typeof r === 'string') skip(r, out.offset + lineStart);
        else {
          seen.set(r[0], r);
          out.records.push(r);
        }
      };
      assistantLines(buffer, complete, take);
      out.offset += complete;
      carried = end - complete;
      if (carried > 0) buffer.copy(buffer, 0, complete, end);
    }
    if (buffer.length === CHUNK) idle = buffer;
    return out;
  } finally {
    closeSync(handle);
  }
}

/** Where a file's scan starts: at the cursor, or from the start of a file replaced or truncated. */
function startOf(
  cursor: ScanCursor,
  stat: { ino: number; size: number },
): Pick<FileScan, 'restarted'> & { start: number } {
  const start = Number.isSafeInteger(cursor.offset) && cursor.offset > 0 ? cursor.offset : 0;
  if (cursor.inode !== undefined && cursor.inode !== stat.ino) return { start: 0, restarted: 'replaced' };
  if (stat.size < start) return { start: 0, restarted: 'truncated' };
  return { start, restarted: undefined };
}

/**
 * The assistant records with usage among the complete lines `buffer[0, complete)`, each handed to
 * `take`. Jump from one assistant record to the next instead of walking every line: most bytes (tool
 * results, prompts) are never looked at twice. Claude Code never writes the record's type as
 * its first key (`…"requestId":"…","type":"assistant","uuid":"…"`), and `,"type":"assistant"`
 * is found about five times faster than `"usage":{` (its first byte, a comma, and its length
 * let the search skip ahead). A chunk of lines where it never occurs is searched again the
 * general way, so a transcript that writes the type first is read all the same, only slower
 * (not a chunk that mixes both orders: no Claude Code version writes that).
 */
function assistantLines(
  buffer: Buffer,
  complete: number,
  take: (lineStart: number, lineEnd: number, u?: number) => void,
): void {
  let found = 0;
  for (let s = 0; s < complete; ) {
    const a = buffer.indexOf(ASSISTANT_RECORD, s);
    if (a < 0 || a >= complete) break;
    const lineStart = buffer.lastIndexOf(0x0a, a) + 1;
    const lineEnd = buffer.indexOf(0x0a, a);
    // The usage object is in the message, before the type: its last key is the record's own usage,
    // and it is where recordAt reads it.
    const u = lastIndexIn(buffer, USAGE, lineStart, lineEnd);
    if (u >= 0 && (u < a || lastIndexIn(buffer, USAGE, lineStart, lineEnd, a) >= 0)) {
      found += 1;
      take(lineStart, lineEnd, u);
    }
    s = lineEnd + 1;
  }
  for (let s = 0; found === 0 && s < complete; ) {
    const u = buffer.indexOf(USAGE, s);
    if (u < 0 || u >= complete) break;
    const lineStart = buffer.lastIndexOf(0x0a, u) + 1;
    const lineEnd = buffer.indexOf(0x0a, u);
    // The record's own type follows its message: looked for from the end.
    if (lastIndexIn(buffer, ASSISTANT, lineStart, lineEnd) >= 0) take(lineStart, lineEnd);
    s = lineEnd + 1;
  }
}

/** The reusable read buffer (taken while a scan runs, so concurrent scans never share it). */
let idle: Buffer | undefined;

function findNewline(handle: number, from: number, size: number): number {
  const chunk = Buffer.allocUnsafe(CHUNK);
  for (let at = from; at < size; ) {
    const bytesRead = readSync(handle, chunk, 0, Math.min(CHUNK, size - at), at);
    if (bytesRead === 0) return -1;
    const nl = chunk.subarray(0, bytesRead).indexOf(0x0a);
    if (nl >= 0) return at + nl;
    at += bytesRead;
  }
  return -1;
}
