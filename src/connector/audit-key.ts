import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The install's key for the audit's payload digests: 32 random bytes in `<dir>/audit.key` (file 0600,
 * directory 0700), made on first use and kept. Every connector process of the install digests with
 * it, so one payload has one digest across them — and nobody without the file can test guesses.
 */
export function loadAuditKey(dir: string): Buffer {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
  const file = join(dir, 'audit.key');
  try {
    writeFileSync(file, randomBytes(32), { mode: 0o600, flag: 'wx' });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  const key = readFileSync(file);
  if (key.length !== 32)
    throw new Error(`${file} is not an audit key (32 bytes): remove it to make a new one`);
  return key;
}
