import {
  closeSync,
  constants,
  type Dirent,
  fstatSync,
  lstatSync,
  openSync,
  readdirSync,
  readSync,
  statSync,
} from 'node:fs';
import { join } from 'node:path';
import {
  entersDir,
  holdsTranscripts,
  isTranscriptName,
  segmentsBelow,
  type WatchRoot,
} from './watch-plan.js';

/** The file system reads of the transcript watcher: walking a tree, a file's identity, a line end. */

/** A regular file's identity and size, or undefined (gone, a symlink, a FIFO, a directory…). */
export function regularFile(path: string): { ino: number; size: number } | undefined {
  try {
    const st = lstatSync(path);
    return st.isFile() ? { ino: st.ino, size: st.size } : undefined;
  } catch {
    return undefined;
  }
}

/** Whether `path` is a directory (a root may be a symbolic link to one: the operator named it). */
export function isDirectory(path: string, followLink: boolean): boolean {
  try {
    return (followLink ? statSync(path) : lstatSync(path)).isDirectory();
  } catch {
    return false;
  }
}

export interface WalkVisitor {
  /** A directory that is entered; false: do not go below it (e.g. too many watched). */
  dir(path: string): boolean;
  file(path: string): void;
  /** A directory that could not be read. */
  error(path: string, error: NodeJS.ErrnoException): void;
}

/**
 * Every directory of the tree from `start` (inside `root`) that the root enters, and the transcript
 * files in those that hold them. Symbolic links are never followed below the root (a link back up
 * would loop), and nothing but directories and regular files is looked at.
 */
export function walkTree(root: WatchRoot, start: string, visit: WalkVisitor): void {
  const stack = [start];
  while (stack.length > 0) {
    const dir = stack.pop() as string;
    const segments = segmentsBelow(root, dir);
    if (!segments || !entersDir(root, segments) || !visit.dir(dir)) continue;
    let entries: Dirent[];
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch (error) {
      visit.error(dir, error as NodeJS.ErrnoException);
      continue;
    }
    const files = holdsTranscripts(root, segments);
    for (const e of entries) {
      if (e.isDirectory()) stack.push(join(dir, e.name));
      else if (files && e.isFile() && isTranscriptName(e.name)) visit.file(join(dir, e.name));
    }
  }
}

/** Lines are short but for a few: look in 64 KB first, then in chunks growing to 1 MB. */
const FIRST_LOOK = 64 * 1024;
const MAX_LOOK = 1024 * 1024;

/**
 * Whether a line ends (`\n`) in bytes `[from, to)` of a regular file (read in 1 MB chunks, never
 * through a symlink, never blocking on a FIFO). An unreadable file answers true: the import then
 * reports why it could not read it.
 */
export function hasLineEnd(path: string, from: number, to: number): boolean {
  let handle: number;
  try {
    handle = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return true;
  }
  try {
    if (!fstatSync(handle).isFile()) return true;
    let chunk = Buffer.allocUnsafe(Math.min(FIRST_LOOK, Math.max(1, to - from)));
    for (let at = from; at < to; ) {
      const n = readSync(handle, chunk, 0, Math.min(chunk.length, to - at), at);
      if (n === 0) return false;
      if (chunk.subarray(0, n).includes(0x0a)) return true;
      at += n;
      if (chunk.length < MAX_LOOK && at < to)
        chunk = Buffer.allocUnsafe(Math.min(MAX_LOOK, chunk.length * 4));
    }
    return false;
  } catch {
    return true;
  } finally {
    closeSync(handle);
  }
}
