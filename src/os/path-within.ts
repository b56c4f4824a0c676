import { sep } from 'node:path';

/** Whether `path` is `root` or below it (both absolute and normalised; compared as written). */
export function within(path: string, root: string): boolean {
  if (root === sep) return true;
  return path === root || path.startsWith(root.endsWith(sep) ? root : `${root}${sep}`);
}
