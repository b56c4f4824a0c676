import { LoopError } from '../core/errors.js';
import { assertPlainPath, isWithin, pathDepth } from './paths.js';

/**
 * The bubblewrap command line an engine runs under, from plain data. Pure: it neither reads the file
 * system nor checks that paths exist — resolveSandboxSpec (resolve.ts) does that, and gives this the
 * real (symlink-free), existing paths it needs, each classified as a directory or a file.
 *
 * What the sandbox sees: `/` read-only, a fresh /dev and /proc, a private /tmp, and on top of that,
 * deepest path last (see planMounts): hidden directories as empty tmpfs, hidden files as an empty
 * read-only file, read-write binds (the workspace, the engine's own dirs, single files such as a
 * hook's output), read-only re-exposures (a session's state dir inside the hidden data dir) and Unix
 * sockets. The network is shared (the gateway is on 127.0.0.1; the model APIs are remote).
 */
export interface SandboxSpec {
  /**
   * Read-write binds: directories or files that exist. A directory the engine needs but that does not
   * exist yet must be created by the caller first — with `/` read-only, the engine cannot create it.
   */
  writable: readonly string[];
  /** Re-exposed read-only: paths under a hidden directory (a session's state dir). */
  readOnly: readonly string[];
  /** Single existing files bound read-write inside a read-only or hidden directory (a hook's output). */
  writableFiles: readonly string[];
  /** Existing Unix sockets, bound read-only (connect(2) works on a read-only mount; chmod does not). */
  sockets: readonly string[];
  /**
   * Writable directories bound as mount points of their own even inside a writable parent: a mount
   * point cannot be renamed or removed (EBUSY), so the directory cannot be swapped for another (a
   * repository's `.git`, whose config and hooks are read-only inside it).
   */
  pinned?: readonly string[] | undefined;
  /** Directories replaced by an empty tmpfs. */
  hiddenDirs: readonly string[];
  /** Files (or sockets) replaced by `emptyFile`, read-only. */
  hiddenFiles: readonly string[];
  /** An empty regular file outside the engine's reach; required when `hiddenFiles` is not empty. */
  emptyFile?: string | undefined;
  /** A private tmpfs on /tmp (default true). Binds under /tmp reappear inside it. */
  privateTmp?: boolean | undefined;
  /** The working directory inside the sandbox. */
  chdir?: string | undefined;
  /**
   * bwrap's `--new-session` (setsid): guards the terminal against TIOCSTI input injection, but the
   * engine loses its controlling terminal. True only without a terminal (pipes); false for a PTY
   * engine or a TUI in a tmux pane. With it, the engine also leaves the caller's process group.
   */
  newSession: boolean;
  /** A new PID namespace (default true): the engine sees and signals only its own processes. */
  unsharePid?: boolean | undefined;
  /** No network at all (default false: engines reach the gateway on 127.0.0.1). */
  unshareNet?: boolean | undefined;
}

/** How a mounted path looks from inside: not at all (empty), read-only, or read-write. */
export type MountAccess = 'hidden' | 'ro' | 'rw';

export interface MountStep {
  path: string;
  access: MountAccess;
  /** The bwrap arguments of this step. */
  args: string[];
}

type Kind = 'dir' | 'file' | 'any';

interface Wanted {
  path: string;
  access: MountAccess;
  kind: Kind;
  list: string;
  args: string[];
}

/** Set up by bwrap itself (`--dev`, `--proc`) or the base of everything: never a configured path. */
const RESERVED = ['/dev', '/proc'];

/**
 * The mount steps, in the order bwrap must apply them (it applies mount options left to right).
 *
 * The rule: **the deepest path wins.** Steps are sorted by depth (number of path components), then by
 * path for a stable order; a step therefore comes after every step on an ancestor of its path, and a
 * later mount on a path below an earlier one replaces what is there for that path only. So the
 * workspace under the hidden data dir, a writable file inside a read-only dir, a hidden dir inside a
 * writable one (or the reverse) each come out as the more specific entry says. bwrap creates the
 * missing mount point (directory or empty file) inside a tmpfs; elsewhere it exists, since every
 * bind's source is its own destination.
 *
 * A step that changes nothing is dropped: a hidden path under a hidden one (its mount point would
 * only reveal its name), a read-only path under a read-only one (or under `/`), a read-write path
 * under a read-write one. The same path in two lists with different access is an error, not a silent
 * choice; with the same access it is one step.
 */
export function planMounts(spec: SandboxSpec): MountStep[] {
  const wanted = collect(spec);
  const byPath = new Map<string, Wanted>();
  for (const w of wanted) {
    const seen = byPath.get(w.path);
    if (!seen) {
      byPath.set(w.path, w);
      continue;
    }
    if (w.kind === 'file') seen.kind = 'file';
    if (seen.access !== w.access || seen.args[0] !== w.args[0]) {
      throw new LoopError('config-invalid', `sandbox: ${w.path} is both in ${seen.list} and in ${w.list}`, {
        hint: 'A path may be hidden, read-only or writable, not two of them: remove it from one list.',
      });
    }
  }
  const sorted = [...byPath.values()].sort(
    (a, b) => pathDepth(a.path) - pathDepth(b.path) || (a.path < b.path ? -1 : a.path > b.path ? 1 : 0),
  );
  const kept: Wanted[] = [];
  for (const w of sorted) {
    const parent = nearestAncestor(kept, w.path);
    if (parent && parent.kind === 'file') {
      throw new LoopError(
        'config-invalid',
        `sandbox: ${w.path} is inside ${parent.path}, a file (${parent.list})`,
      );
    }
    // `/` itself is bound read-only.
    const around: MountAccess = parent ? parent.access : 'ro';
    if (around === w.access && w.list !== 'pinned') continue;
    kept.push(w);
  }
  return kept.map(({ path, access, args }) => ({ path, access, args }));
}

/** Everything the spec asks for, validated, one entry per list item. */
function collect(spec: SandboxSpec): Wanted[] {
  const wanted: Wanted[] = [];
  const add = (
    paths: readonly string[] | undefined,
    list: string,
    access: MountAccess,
    kind: Kind,
    args: (p: string) => string[],
  ) => {
    if (paths !== undefined && !Array.isArray(paths)) {
      throw new LoopError('internal', `sandbox: ${list} must be a list of paths`);
    }
    for (const p of paths ?? []) {
      const path = checkedPath(p, `sandbox ${list} path`);
      wanted.push({ path, access, kind, list, args: args(path) });
    }
  };
  const hiddenFiles = spec.hiddenFiles ?? [];
  let empty: string | undefined;
  if (hiddenFiles.length > 0) {
    if (spec.emptyFile === undefined) {
      throw new LoopError(
        'internal',
        'sandbox: hidden files need an empty file to show in their place (emptyFile)',
      );
    }
    empty = assertPlainPath(spec.emptyFile, 'sandbox emptyFile');
  }
  if (spec.privateTmp ?? true)
    wanted.push({
      path: '/tmp',
      access: 'hidden',
      kind: 'dir',
      list: 'privateTmp',
      args: ['--tmpfs', '/tmp'],
    });
  add(spec.hiddenDirs, 'hiddenDirs', 'hidden', 'dir', (p) => ['--tmpfs', p]);
  // An empty regular file rather than /dev/null: bwrap binds with MS_NODEV unless --dev-bind, so a
  // bound /dev/null fails to open (EACCES), and tools such as git and npm stop on an unreadable
  // config file where they take an empty one in their stride.
  add(hiddenFiles, 'hiddenFiles', 'hidden', 'file', (p) => ['--ro-bind', empty ?? '', p]);
  add(spec.writable, 'writable', 'rw', 'any', (p) => ['--bind', p, p]);
  add(spec.writableFiles, 'writableFiles', 'rw', 'file', (p) => ['--bind', p, p]);
  add(spec.readOnly, 'readOnly', 'ro', 'any', (p) => ['--ro-bind', p, p]);
  add(spec.sockets, 'sockets', 'ro', 'file', (p) => ['--ro-bind', p, p]);
  add(spec.pinned ?? [], 'pinned', 'rw', 'dir', (p) => ['--bind', p, p]);
  return wanted;
}

function checkedPath(path: string, what: string): string {
  assertPlainPath(path, what);
  if (path === '/')
    throw new LoopError('config-invalid', `${what} "/": the whole file system cannot be one entry`);
  const reserved = RESERVED.find((r) => isWithin(r, path));
  if (reserved) {
    throw new LoopError(
      'config-invalid',
      `${what} ${JSON.stringify(path)}: ${reserved} is set up by the sandbox itself`,
    );
  }
  return path;
}

function nearestAncestor(kept: readonly Wanted[], path: string): Wanted | undefined {
  let best: Wanted | undefined;
  for (const k of kept) {
    if (k.path !== path && isWithin(k.path, path) && (!best || k.path.length > best.path.length)) best = k;
  }
  return best;
}

/**
 * bwrap's arguments up to and including `--`; append the engine's binary (an absolute path visible
 * inside) and its argv. The environment passes through unchanged (bwrap adds nothing).
 */
export function bwrapArgv(spec: SandboxSpec): string[] {
  if (typeof spec.newSession !== 'boolean') {
    throw new LoopError(
      'internal',
      'sandbox: newSession must be decided by the caller (true only without a terminal)',
    );
  }
  const chdir = spec.chdir === undefined ? undefined : assertPlainPath(spec.chdir, 'sandbox chdir');
  const steps = planMounts(spec);
  return [
    // The rest of the file system read-only; bwrap's --ro-bind is recursive and makes every submount
    // read-only too (bwrap(1): "--ro-bind SRC DEST: Bind mount the host path SRC readonly on DEST").
    '--ro-bind',
    '/',
    '/',
    // A fresh devtmpfs-like /dev (null, zero, random, tty, a new devpts instance) and a procfs of the
    // sandbox's PID namespace: neither the host's disks nor other processes' /proc entries.
    '--dev',
    '/dev',
    '--proc',
    '/proc',
    ...steps.flatMap((s) => s.args),
    ...((spec.unsharePid ?? true) ? ['--unshare-pid'] : []),
    ...(spec.unshareNet ? ['--unshare-net'] : []),
    // Private SysV IPC and hostname; a cgroup namespace where the kernel has one. The network is
    // shared on purpose: engines reach the gateway on 127.0.0.1.
    '--unshare-ipc',
    '--unshare-uts',
    '--unshare-cgroup-try',
    // bwrap(1): "Kills with SIGKILL child process (COMMAND) when bwrap or bwrap's parent dies."
    '--die-with-parent',
    // Run as root, bwrap keeps every capability unless told otherwise (it drops them only for the
    // setuid or user-namespace case): with CAP_SYS_ADMIN, `umount -l <hidden dir>` shows what the
    // tmpfs hid. Observed with bwrap 0.8.0 as root. bwrap always sets no_new_privs, so exec cannot
    // give them back.
    '--cap-drop',
    'ALL',
    ...(spec.newSession ? ['--new-session'] : []),
    ...(chdir ? ['--chdir', chdir] : []),
    '--',
  ];
}
