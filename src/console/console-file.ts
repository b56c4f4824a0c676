import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { writePrivateFile } from '../os/private-file.js';

/**
 * `<dataDir>/console.json` {url, pid}: where the running daemon's console is, for `the-loop
 * console` (the port may be 0 in the config). Written 0600 at start, removed at stop; a pid that is
 * no longer alive means a daemon that died without removing it.
 */
export const CONSOLE_FILE = 'console.json';

export interface ConsoleFile {
  url: string;
  pid: number;
}

export function writeConsoleFile(dataDir: string, file: ConsoleFile): void {
  writePrivateFile(dataDir, CONSOLE_FILE, `${JSON.stringify(file)}\n`);
}

/** Remove it, if it is still this process's (a later daemon's file is left alone). */
export function removeConsoleFile(dataDir: string, pid: number): void {
  if (readConsoleFile(dataDir)?.pid === pid) rmSync(join(dataDir, CONSOLE_FILE), { force: true });
}

/** The file's content, or undefined when there is none or it is not one of ours. */
export function readConsoleFile(dataDir: string): ConsoleFile | undefined {
  let value: unknown;
  try {
    value = JSON.parse(readFileSync(join(dataDir, CONSOLE_FILE), 'utf8'));
  } catch {
    return undefined;
  }
  const f = value as Partial<ConsoleFile> | null;
  if (!f || typeof f.url !== 'string' || !/^https?:\/\/[^\s/]+$/.test(f.url)) return undefined;
  if (typeof f.pid !== 'number' || !Number.isSafeInteger(f.pid) || f.pid <= 0) return undefined;
  return { url: f.url, pid: f.pid };
}
