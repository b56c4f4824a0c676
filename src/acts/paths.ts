import { posix } from 'node:path';
import { within } from '../os/path-within.js';
import type { State } from './context.js';
import type { Arg } from './expand.js';
import { fold } from './unicode.js';

/**
 * Where a path points, for deciding whether a delete or a write leaves the workspace. Pure string
 * work on POSIX paths: symlinks are not followed (nothing is read from disk), so a link inside the
 * workspace that points out of it is not seen.
 */
export interface Location {
  /** The absolute path, when it could be worked out. */
  resolved: string | undefined;
  /** Strictly inside the workspace (the workspace root itself is not "inside" for a delete). */
  inside: boolean;
  /** Why it counts as outside: root, home, workspace root, parent escape, unresolved variable, … */
  reason?: string;
}

const TOPLEVEL = /^\$\(\s*git\s+rev-parse\s+--show-toplevel\s*\)/;
const HOME_VAR = /^(\$HOME|\$\{HOME\})(?=\/|$)/;

export { within };

/** A path as written, resolved against `cwd`; undefined when it depends on something unknown. */
export function resolvePath(
  text: string,
  cwd: string | undefined,
  home: string | undefined,
  workspace: string,
): { path?: string; reason?: string } {
  let t = text;
  if (TOPLEVEL.test(t)) t = workspace + t.replace(TOPLEVEL, '');
  else if (HOME_VAR.test(t)) {
    if (home === undefined) return { reason: 'home directory' };
    t = home + t.replace(HOME_VAR, '');
  } else if (t === '~' || t.startsWith('~/')) {
    if (home === undefined) return { reason: 'home directory' };
    t = home + t.slice(1);
  } else if (t.startsWith('~')) return { reason: "another user's home directory" };
  if (t.startsWith('/')) return { path: posix.normalize(t).replace(/(.)\/$/, '$1') };
  if (cwd === undefined) return { reason: 'unknown working directory' };
  return { path: posix.resolve(cwd, t) };
}

/** Where a delete target points (see Location). Globs count by the directory they expand in. */
export function locateTarget(arg: Arg, state: State, workspace: string, home: string | undefined): Location {
  if (state.remote) return { resolved: undefined, inside: false, reason: 'on a remote host' };
  if (arg.text === '') return { resolved: undefined, inside: true };
  const dynamicHead = arg.dynamic && !TOPLEVEL.test(arg.text) && !HOME_VAR.test(arg.text);
  if (dynamicHead) return { resolved: undefined, inside: false, reason: 'unresolved expansion' };
  const { path, reason } = resolvePath(arg.text, state.cwd, home, workspace);
  if (path === undefined) return { resolved: undefined, inside: false, reason };
  if (arg.dynamic) return { resolved: path, inside: false, reason: 'unresolved expansion' };
  if (arg.glob) {
    // The matches of `dir/*.log` are below `dir`: they are inside when `dir` is the workspace or in it.
    const parts = path.split('/');
    const firstGlob = parts.findIndex((p) => /[*?[]/.test(p));
    const dir = parts.slice(0, Math.max(1, firstGlob)).join('/') || '/';
    const inside = within(dir, workspace);
    return inside
      ? { resolved: path, inside }
      : { resolved: path, inside, reason: outsideReason(dir, workspace) };
  }
  if (path !== workspace && within(path, workspace)) return { resolved: path, inside: true };
  return { resolved: path, inside: false, reason: outsideReason(path, workspace) };
}

function outsideReason(path: string, workspace: string): string {
  if (path === '/') return 'filesystem root';
  if (path === workspace) return 'the workspace itself';
  if (within(workspace, path)) return 'a parent of the workspace';
  return 'outside the workspace';
}

/** A path component that is a git directory (`.git`, or `.GIT` on a case-insensitive file system). */
export function inGitDir(path: string): boolean {
  return path.split('/').some((component) => fold(component).toLowerCase() === '.git');
}
