import {
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { LoopError } from '../core/errors.js';

/**
 * Write `text` to `<dir>/<name>` (dir 0700, file 0600), replaced atomically (a fresh temp file, then
 * rename): a reader never sees half a file, and a file planted at the temp name is never written
 * through (`wx`). Returns the path.
 */
export function writePrivateFile(dir: string, name: string, text: string | Uint8Array): string {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const path = join(dir, name);
  const temp = join(dir, `.${name}.${process.pid}.${Date.now()}.tmp`);
  try {
    writeFileSync(temp, text, { mode: 0o600, flag: 'wx' });
    renameSync(temp, path);
  } catch (error) {
    rmSync(temp, { force: true });
    throw new LoopError('internal', `cannot write ${name} in ${dir}`, { cause: error });
  }
  return path;
}

const notOurs = (stat: { uid: number; mode: number }) =>
  (process.getuid !== undefined && stat.uid !== process.getuid()) || (stat.mode & 0o022) !== 0;

/**
 * The text of `<dir>/<name>` when no one else could have written it: a regular file (not a link, not
 * a FIFO: it opens without blocking) of at most `maxBytes`, owned by this user and writable by no
 * one else, in a directory likewise. null otherwise, or when it cannot be read.
 */
export function readPrivateFile(dir: string, name: string, maxBytes: number): string | null {
  try {
    const where = lstatSync(dir, { throwIfNoEntry: false });
    if (!where?.isDirectory() || notOurs(where)) return null;
    const fd = openSync(join(dir, name), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    try {
      const stat = fstatSync(fd);
      return stat.isFile() && !notOurs(stat) && stat.size <= maxBytes ? readFileSync(fd, 'utf8') : null;
    } finally {
      closeSync(fd);
    }
  } catch {
    return null;
  }
}

/** writePrivateFile, best effort, and only into a directory of ours alone (false: not written). */
export function keepPrivateFile(dir: string, name: string, text: string): boolean {
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const where = lstatSync(dir);
    if (!where.isDirectory() || notOurs(where)) return false;
    writePrivateFile(dir, name, text);
    return true;
  } catch {
    return false;
  }
}
