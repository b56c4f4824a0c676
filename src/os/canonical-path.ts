import { realpathSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';

/** The path with symlinks resolved as far as it exists (the rest appended as written). */
export function canonicalPath(path: string): string {
  const absolute = resolve(path);
  try {
    return realpathSync(absolute);
  } catch {
    const parent = dirname(absolute);
    return parent === absolute ? absolute : join(canonicalPath(parent), basename(absolute));
  }
}
