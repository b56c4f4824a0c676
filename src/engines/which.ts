import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, isAbsolute, join, resolve } from 'node:path';

const executable = (path: string): boolean => {
  try {
    if (!statSync(path).isFile()) return false;
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
};

/**
 * Resolve an engine binary like the OS would: a name is looked up on `pathVar`; anything with a
 * slash is taken as a path (relative to `cwd`). Returns the absolute path, or null.
 */
export function whichBinary(binary: string, pathVar: string | undefined, cwd: string): string | null {
  if (binary.includes('/')) {
    const full = isAbsolute(binary) ? binary : resolve(cwd, binary);
    return executable(full) ? full : null;
  }
  for (const dir of (pathVar ?? '').split(delimiter)) {
    if (!dir) continue;
    const full = join(dir, binary);
    if (executable(full)) return full;
  }
  return null;
}
