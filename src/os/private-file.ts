import { mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
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
