import { closeSync, lstatSync, openSync, realpathSync, statSync, unlinkSync } from 'node:fs';
import { dirname } from 'node:path';
import { LoopError } from '../core/errors.js';
import type { SandboxSpec } from './bwrap.js';
import { normalizePath } from './paths.js';

/**
 * From configured paths to a SandboxSpec bwrapArgv can use: every path made real (symlinks resolved,
 * so that nesting is judged on the paths the kernel mounts on), checked to exist, and hidden paths
 * classified as directories or files. This is the one part of the sandbox that reads the file system.
 */
export interface SandboxRequest {
  /** Read-write; skipped when missing (create a directory the engine needs before calling). */
  writable?: readonly string[];
  /** Re-exposed read-only; skipped when missing. */
  readOnly?: readonly string[];
  /** Regular files bound read-write: they must exist (an error otherwise). */
  writableFiles?: readonly string[];
  /** Unix sockets: they must exist (an error otherwise). */
  sockets?: readonly string[];
  /** Writable directories that stay mount points of their own (see SandboxSpec.pinned); skipped when missing. */
  pinned?: readonly string[];
  /** Hidden: directories become an empty tmpfs, anything else the empty file; skipped when missing. */
  hidden?: readonly string[];
  /**
   * Where the empty file shown in place of hidden files lives (created 0444 when needed). Put it
   * where no engine can write it (the data dir): every sandbox binds the same inode read-only.
   */
  emptyFile?: string;
  privateTmp?: boolean;
  /** Must exist. */
  chdir?: string;
  newSession: boolean;
  unsharePid?: boolean;
  unshareNet?: boolean;
}

export interface SkippedPath {
  path: string;
  list: 'writable' | 'readOnly' | 'hidden';
}

export interface ResolvedSandbox {
  spec: SandboxSpec;
  /** Paths left out because they do not exist (to log at debug level; nothing to hide or bind). */
  skipped: SkippedPath[];
}

type Found = { real: string; isDir: boolean; isFile: boolean; isSocket: boolean } | null;

function inspect(path: string, what: string): Found {
  const normal = normalizePath(path, what);
  let real: string;
  try {
    // One realpath(3) call: the JavaScript realpathSync lstats each component (a sandbox inspects
    // ~100 paths before its engine starts).
    real = realpathSync.native(normal);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    // A dangling symlink or a missing component: nothing there to bind or to hide.
    if (code === 'ENOENT' || code === 'ENOTDIR') return null;
    throw new LoopError('internal', `sandbox: cannot resolve ${what} ${normal}: ${code ?? 'error'}`, {
      cause: error,
    });
  }
  // realpath can name what the configured path did not (a symlink into a strange place): check again.
  const checked = normalizePath(real, `${what} (resolved)`);
  const st = statSync(checked);
  return { real: checked, isDir: st.isDirectory(), isFile: st.isFile(), isSocket: st.isSocket() };
}

/** Resolve every path of `request` (see SandboxRequest for what must exist and what may be missing). */
export function resolveSandboxSpec(request: SandboxRequest): ResolvedSandbox {
  const skipped: SkippedPath[] = [];
  const optional = (paths: readonly string[] | undefined, list: SkippedPath['list']) => {
    const found = new Map<string, NonNullable<Found>>();
    for (const p of paths ?? []) {
      const f = inspect(p, `sandbox ${list} path`);
      // Two names for one path (/var/run and /run): one entry.
      if (f) found.set(f.real, f);
      else skipped.push({ path: p, list });
    }
    return [...found.values()];
  };
  const required = (
    paths: readonly string[] | undefined,
    what: string,
    ok: (f: NonNullable<Found>) => boolean,
  ) =>
    (paths ?? []).map((p) => {
      const found = inspect(p, what);
      if (!found || !ok(found)) {
        throw new LoopError(
          'internal',
          `sandbox: ${what} ${p} ${found ? 'is of the wrong type' : 'does not exist'}`,
          {
            hint: 'Create it before the sandbox is built: bwrap can only bind what exists.',
          },
        );
      }
      return found.real;
    });

  const hidden = optional(request.hidden, 'hidden');
  const hiddenFiles = hidden.filter((f) => !f.isDir).map((f) => f.real);
  let chdir: string | undefined;
  if (request.chdir !== undefined) {
    const found = inspect(request.chdir, 'sandbox working directory');
    if (!found?.isDir) {
      throw new LoopError('cwd-missing', `sandbox: the working directory ${request.chdir} does not exist`);
    }
    chdir = found.real;
  }
  const spec: SandboxSpec = {
    writable: optional(request.writable, 'writable').map((f) => f.real),
    readOnly: optional(request.readOnly, 'readOnly').map((f) => f.real),
    writableFiles: required(request.writableFiles, 'writable file', (f) => f.isFile),
    sockets: required(request.sockets, 'socket', (f) => f.isSocket),
    pinned: optional(request.pinned, 'writable')
      .filter((f) => f.isDir)
      .map((f) => f.real),
    hiddenDirs: hidden.filter((f) => f.isDir).map((f) => f.real),
    hiddenFiles,
    emptyFile: hiddenFiles.length > 0 ? ensureEmptyFile(needEmptyFile(request.emptyFile)) : undefined,
    privateTmp: request.privateTmp,
    chdir,
    newSession: request.newSession,
    unsharePid: request.unsharePid,
    unshareNet: request.unshareNet,
  };
  return { spec, skipped };
}

function needEmptyFile(path: string | undefined): string {
  if (path === undefined) {
    throw new LoopError(
      'internal',
      'sandbox: hidden files exist, but no emptyFile was given to show in their place',
    );
  }
  return normalizePath(path, 'sandbox emptyFile');
}

/**
 * Make `path` an empty regular file (created 0444) and return it. One that is not empty is replaced
 * (nothing may be shown in place of a hidden file); a symlink or anything else there is an error.
 */
export function ensureEmptyFile(path: string): string {
  const file = normalizePath(path, 'sandbox emptyFile');
  let existing: ReturnType<typeof lstatSync> | undefined;
  try {
    existing = lstatSync(file);
  } catch {
    existing = undefined;
  }
  if (existing && !existing.isFile()) {
    throw new LoopError(
      'internal',
      `sandbox: ${file} must be a regular file (it is shown in place of hidden files)`,
    );
  }
  if (existing && existing.size === 0) return file;
  if (existing) unlinkSync(file);
  // O_EXCL: fails, rather than writes through, when something else appeared there meanwhile.
  closeSync(openSync(file, 'wx', 0o444));
  return file;
}

/**
 * The directory holding the resolver configuration /etc/resolv.conf points to, when it is not /etc
 * itself: systemd-resolved, NetworkManager and resolvconf keep it under /run (hidden by
 * SYSTEM_HIDDEN_PATHS), where a sandbox without it cannot resolve host names. Re-expose it read-only.
 * The directory, not the file: those managers replace the file by rename, which a bind of the old
 * file would not follow. Null when there is nothing to re-expose.
 */
export function resolverConfigDir(resolvConf = '/etc/resolv.conf'): string | null {
  try {
    const dir = dirname(realpathSync(resolvConf));
    return dir === '/etc' ? null : normalizePath(dir, 'resolver directory');
  } catch {
    return null;
  }
}
