/**
 * Incremental reading of an append-only JSON-lines file (an engine's transcript) from a saved cursor:
 * only the bytes after `offset`, in fixed-size chunks (never the whole file in memory), and only
 * complete lines — a trailing line without its `\n` is left for the next read, and the returned offset
 * stops before it. A file that shrank below the cursor (truncated) or has another inode (replaced,
 * e.g. rotated or rewritten by rename) is read again from byte 0; de-duplicating what that re-reads
 * is the caller's job. Bytes appended while a read is under way are left for the next read.
 */
import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import { LineReader } from '../protocols/line-reader.js';

export interface FileCursor {
  /** Bytes consumed so far: always just after a `\n` (or 0). */
  offset: number;
  /** The file's size when it was last read. */
  size?: number | undefined;
  /** The file's inode when it was last read; a different one means the file was replaced. */
  inode?: number | undefined;
}

export interface ReadLinesOptions {
  /** A line longer than this is skipped (its bytes are not kept) and reported by `onOversized`. */
  maxLineBytes: number;
  /**
   * Stop after about this many bytes of complete lines (at the first line end past it), so a caller
   * can walk a huge file in bounded steps; unbounded when absent.
   */
  maxReadBytes?: number | undefined;
  /** One complete line (without `\n`, a trailing `\r` stripped); `at` is its byte offset in the file. */
  onLine: (line: string, at: number) => void;
  onOversized: (bytes: number, at: number) => void;
}

export type ReadLinesResult =
  | {
      ok: true;
      cursor: FileCursor;
      /** Why the read started from 0 instead of the saved offset. */
      restarted?: 'truncated' | 'replaced' | undefined;
      /** True when the read stopped at `maxReadBytes` with bytes left: read again to go on. */
      more: boolean;
    }
  | { ok: false; missing: boolean; message: string };

/** Chunk size: large enough to keep syscalls few, small enough to be a rounding error in memory. */
const CHUNK_BYTES = 256 * 1024;

export async function readCompleteLines(
  path: string,
  cursor: FileCursor,
  options: ReadLinesOptions,
): Promise<ReadLinesResult> {
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    // The engine writes these files, and may be hostile: a symlink is not followed (it could name
    // the database), and a FIFO does not block the open (it would hold a thread of the pool).
    handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return {
      ok: false,
      missing: code === 'ENOENT',
      message: `cannot open ${path}: ${code ?? String(error)}`,
    };
  }
  try {
    // fstat on the open descriptor: size and inode describe exactly the file we read, even if the
    // path is renamed or replaced meanwhile.
    const stat = await handle.stat();
    if (!stat.isFile()) {
      return { ok: false, missing: false, message: `${path} is not a regular file: not read` };
    }
    const size = stat.size;
    let start = Number.isSafeInteger(cursor.offset) && cursor.offset > 0 ? cursor.offset : 0;
    let restarted: 'truncated' | 'replaced' | undefined;
    if (cursor.inode !== undefined && stat.ino !== cursor.inode) {
      restarted = 'replaced';
      start = 0;
    } else if (size < start) {
      restarted = 'truncated';
      start = 0;
    }

    const buffer = Buffer.allocUnsafe(CHUNK_BYTES);
    let position = start;
    let committed = start;
    // Where the line being assembled started, and where to look for the next `\n` in the current
    // chunk: LineReader calls back synchronously, once per `\n`, in order.
    let lineStart = start;
    let chunk = buffer.subarray(0, 0);
    let chunkAt = start;
    let searchFrom = 0;
    const endOfLine = (): number => {
      const nl = chunk.indexOf(0x0a, searchFrom);
      searchFrom = nl + 1;
      const at = lineStart;
      lineStart = chunkAt + nl + 1;
      return at;
    };
    const lines = new LineReader({
      maxLineBytes: options.maxLineBytes,
      onLine: (line) => options.onLine(line, endOfLine()),
      onOversized: (bytes) => options.onOversized(bytes, endOfLine()),
    });

    let more = false;
    while (position < size) {
      const { bytesRead } = await handle.read(buffer, 0, Math.min(CHUNK_BYTES, size - position), position);
      if (bytesRead === 0) break; // shrank under us: what we have is what there is
      chunk = buffer.subarray(0, bytesRead);
      // With a budget, stop at the first line end at or past it, even in the middle of a chunk.
      let stop = false;
      if (options.maxReadBytes !== undefined) {
        const from = Math.max(0, start + options.maxReadBytes - 1 - position);
        const nl = from < bytesRead ? chunk.indexOf(0x0a, from) : -1;
        if (nl !== -1) {
          chunk = chunk.subarray(0, nl + 1);
          stop = true;
        }
      }
      chunkAt = position;
      searchFrom = 0;
      lines.push(chunk);
      const lastNl = chunk.lastIndexOf(0x0a);
      if (lastNl !== -1) committed = position + lastNl + 1;
      position += chunk.length;
      if (stop) {
        more = committed < size;
        break;
      }
    }
    // No lines.end(): a last line without `\n` may still be being written; it is read next time.
    return { ok: true, cursor: { offset: committed, size, inode: stat.ino }, restarted, more };
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return { ok: false, missing: false, message: `cannot read ${path}: ${code ?? String(error)}` };
  } finally {
    await handle.close();
  }
}
