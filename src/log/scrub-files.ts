import {
  closeSync,
  constants,
  type Dirent,
  fstatSync,
  openSync,
  readdirSync,
  readlinkSync,
  readSync,
  realpathSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import { within } from '../os/path-within.js';
import type { Range } from './secret-index.js';

/**
 * Secrets masked in place in files the engine wrote under the data directory — its transcripts and
 * state in its session home, its hook events — which the daemon cannot scrub as they are written
 * (the engine writes them). Each secret form found is overwritten with `*` of the same length: the
 * file keeps its size and every offset in it, so the engine appending to it, the daemon tailing it
 * by offset and the engine resuming from it all go on unaffected.
 */

/** What the scrubber offers a file scan. */
export interface ByteScrubber {
  /** Ranges of secret forms in bytes read as latin1. */
  byteRanges(latin1: string): Range[];
  /** Moves when a secret is added: files found clean before are scanned again. */
  readonly generation: number;
}

export interface FileScrubOptions {
  /** Files larger than this are skipped (and reported): 256 MB by default. */
  maxFileBytes?: number;
  /** Files past this count in one scan are left for the next (reported): 20,000 by default. */
  maxFiles?: number;
  /** Bytes read in one scan; files past it are left for the next (reported): 512 MB by default. */
  maxScanBytes?: number;
  /** Names never touched: files another process is about to read whole (a launcher's env file). */
  skip?: (name: string) => boolean;
  /** What was found clean, by path: kept by the caller across scans so unchanged files are not read again. */
  clean?: Map<string, string>;
}

export interface FileScrubReport {
  scanned: number;
  /** Files changed, with the number of ranges masked in each. */
  masked: Array<{ path: string; ranges: number }>;
  skipped: Array<{ path: string; reason: string }>;
}

const MASK = 0x2a; // '*'
const MAX_DEPTH = 32;

/** Mask every secret form in every regular file under `roots` (symlinks are not followed). */
export function scrubFilesInPlace(
  roots: readonly string[],
  scrubber: ByteScrubber,
  options: FileScrubOptions = {},
): FileScrubReport {
  const report: FileScrubReport = { scanned: 0, masked: [], skipped: [] };
  const limits: Limits = {
    maxFileBytes: options.maxFileBytes ?? 256 * 1024 * 1024,
    maxFiles: options.maxFiles ?? 20_000,
    budget: options.maxScanBytes ?? 512 * 1024 * 1024,
  };
  for (const root of roots) {
    let real: string;
    try {
      real = realpathSync(root);
    } catch {
      continue; // Not there (yet): nothing to scrub.
    }
    visit(real, 0, { root: real, scrubber, options, limits, report });
  }
  return report;
}

interface Limits {
  maxFileBytes: number;
  maxFiles: number;
  /** Bytes this scan may still read. */
  budget: number;
}

interface Scan {
  /** The root's real path: nothing outside it is read or written. */
  root: string;
  scrubber: ByteScrubber;
  options: FileScrubOptions;
  limits: Limits;
  report: FileScrubReport;
}

function visit(dir: string, depth: number, scan: Scan): void {
  const { report } = scan;
  let entries: Dirent[];
  try {
    // A directory swapped for a symbolic link since it was listed is not walked into.
    if (!within(realpathSync(dir), scan.root)) {
      report.skipped.push({ path: dir, reason: 'resolves outside the directory scrubbed' });
      return;
    }
    entries = readdirSync(dir, { withFileTypes: true });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    // Gone is nothing to scrub; unreadable (a mode the engine set) is said, not swallowed.
    if (code !== 'ENOENT' && code !== 'ENOTDIR')
      report.skipped.push({ path: dir, reason: `cannot list (${code})` });
    return;
  }
  for (const entry of entries) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (depth < MAX_DEPTH) visit(path, depth + 1, scan);
      else report.skipped.push({ path, reason: 'too deep' });
    } else if (entry.isFile() && !scan.options.skip?.(entry.name)) {
      if (report.scanned >= scan.limits.maxFiles) {
        report.skipped.push({ path, reason: 'file limit of one scan reached' });
        continue;
      }
      report.scanned++;
      scrubFile(path, scan);
    }
  }
}

function scrubFile(path: string, scan: Scan): void {
  const { report, limits, scrubber } = scan;
  const clean = scan.options.clean;
  let fd: number;
  try {
    // No symlink followed (the engine writes in these directories), and a FIFO does not block.
    fd = openSync(path, constants.O_RDWR | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'ENOENT') report.skipped.push({ path, reason: `cannot open (${code})` });
    return;
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) return;
    const why = refusal(fd, st, scan);
    if (why) {
      report.skipped.push({ path, reason: why });
      return;
    }
    const stamp = `${st.ino}:${st.size}:${st.mtimeMs}:${scrubber.generation}`;
    if (clean?.get(path) === stamp) return;
    if (st.size > limits.budget) {
      report.skipped.push({ path, reason: 'byte budget of one scan reached (left for the next)' });
      return;
    }
    limits.budget -= st.size;
    const bytes = readAll(fd, st.size);
    const ranges = scrubber.byteRanges(bytes.toString('latin1'));
    for (const [start, end] of ranges.map((r) => widen(bytes, r))) {
      writeSync(fd, Buffer.alloc(end - start, MASK), 0, end - start, start);
    }
    if (ranges.length > 0) report.masked.push({ path, ranges: ranges.length });
    const after = fstatSync(fd);
    clean?.set(path, `${after.ino}:${after.size}:${after.mtimeMs}:${scrubber.generation}`);
  } finally {
    closeSync(fd);
  }
}

/**
 * Why an opened file is not read: it is outside the root (a directory on its path was swapped for a
 * symbolic link after it was checked — the descriptor says where it really is), a second name of a
 * file elsewhere (a hard link), too big, or sparse (gigabytes that cost the engine no disk).
 */
function refusal(
  fd: number,
  st: { size: number; nlink: number; blocks: number },
  scan: Scan,
): string | undefined {
  let real: string;
  try {
    real = readlinkSync(`/proc/self/fd/${fd}`);
  } catch {
    return 'where it really is cannot be told';
  }
  if (!within(real, scan.root)) return 'resolves outside the directory scrubbed';
  if (st.nlink !== 1) return 'has other names (a hard link)';
  if (st.size > scan.limits.maxFileBytes)
    return `${st.size} bytes is over the limit of ${scan.limits.maxFileBytes}`;
  // Allocated blocks far short of the size: holes, not written bytes (the margin leaves room for a
  // file system that compresses, which reports the compressed blocks).
  if (st.size > 8 * 1024 * 1024 && st.blocks * 512 < st.size / 32) return 'sparse';
  return undefined;
}

/** The first `size` bytes of the file (it may grow while it is read: what is past `size` is the next scan's). */
function readAll(fd: number, size: number): Buffer {
  const bytes = Buffer.alloc(size);
  let got = 0;
  while (got < size) {
    const n = readSync(fd, bytes, got, size - got, got);
    if (n === 0) break;
    got += n;
  }
  return got === size ? bytes : bytes.subarray(0, got);
}

const isContinuation = (byte: number | undefined) => byte !== undefined && (byte & 0xc0) === 0x80;
const BACKSLASH = 0x5c;

/**
 * A range grown so masking it leaves valid UTF-8 and valid JSON escapes: whole characters, and no
 * escape cut in two (a `\` left before a `*` would escape it; a masked `\` would unescape a quote).
 */
function widen(bytes: Buffer, [from, to]: Range): Range {
  let start = from;
  let end = to;
  while (start > 0 && isContinuation(bytes[start])) start--;
  while (end < bytes.length && isContinuation(bytes[end])) end++;
  // An odd run of backslashes right before the range escapes its first byte: mask the escape too.
  let run = 0;
  while (start - run - 1 >= 0 && bytes[start - run - 1] === BACKSLASH) run++;
  if (run % 2 === 1) start--;
  // An odd run of backslashes ending the range escapes the byte after it: mask that byte too
  // (the four hex digits of a \u escape as well).
  run = 0;
  while (end - run - 1 >= start && bytes[end - run - 1] === BACKSLASH) run++;
  if (run % 2 === 1 && end < bytes.length) end = Math.min(bytes.length, end + (bytes[end] === 0x75 ? 5 : 1));
  return [start, end];
}
