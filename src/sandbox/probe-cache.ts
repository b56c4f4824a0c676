import { readFileSync, readlinkSync, statSync } from 'node:fs';
import { keepPrivateFile, readPrivateFile } from '../os/private-file.js';
import { sha256Hex } from '../os/sha256.js';

/**
 * What a bubblewrap probe found, kept across processes (issue 16, bench:turn): `bwrap --version` and
 * the trial run cost every `the-loop run` two process spawns before its engine could start, for an
 * answer that changes only when the binary or the machine does.
 *
 * Only a working bwrap is kept, never a failure (a fixed machine is seen at once), and never where
 * bwrap is: the binary is located again each time (no process run), and the entry holds only that
 * the binary of this identity passed the probe on this machine. Its identity is everything the
 * answer depends on: the binary's and `true`'s file identity (device, inode, size, mtime, ctime,
 * owner, mode), the trial's flags, this user, this boot, this process's user, mount and pid
 * namespaces and seccomp mode (another container), and the sysctls that turn user namespaces on or
 * off. Any of them changed: the entry is not used, and the probe runs again.
 *
 * Entries live in `<stateHome>/the-loop/probe-cache/` (0700; files 0600, written atomically), under
 * the state home the sandbox hides from every engine (guard/sandbox-view.ts). An entry is used only
 * when no one else could have written it (a regular file owned by this user, writable by no one else,
 * in a directory likewise). Were one planted all the same, it could only claim that a bwrap that
 * fails works: the engine's sandbox then fails to start, and the turn fails — closed, as today.
 */
const FORMAT = 'the-loop-bwrap-probe-1';

/** The sysctls that allow or forbid unprivileged user namespaces (absent ones read as ''). */
const USERNS_SYSCTLS = [
  '/proc/sys/kernel/unprivileged_userns_clone',
  '/proc/sys/user/max_user_namespaces',
  '/proc/sys/kernel/apparmor_restrict_unprivileged_userns',
];

const readOr = (read: () => string): string => {
  try {
    return read();
  } catch {
    return '';
  }
};

/** A file's identity: any change to it (replaced, rewritten, chmod, chown) gives another. */
function fileIdentity(path: string): string | null {
  const stat = statSync(path, { throwIfNoEntry: false, bigint: true });
  if (!stat) return null;
  return [stat.dev, stat.ino, stat.size, stat.mtimeNs, stat.ctimeNs, stat.uid, stat.mode].join(':');
}

/**
 * The identity of a probe of `bwrap` (its trial running `truePath` with `trial`) on this machine, as
 * a digest; null when a file cannot be read (nothing is cached then).
 */
export function probeIdentity(bwrap: string, truePath: string, trial: readonly string[]): string | null {
  const binary = fileIdentity(bwrap);
  const trueFile = fileIdentity(truePath);
  if (!binary || !trueFile) return null;
  const machine = [
    readOr(() => readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim()),
    ...['user', 'mnt', 'pid'].map((ns) => readOr(() => readlinkSync(`/proc/self/ns/${ns}`))),
    readOr(() => /^Seccomp:\s*(\d+)/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? ''),
    ...USERNS_SYSCTLS.map((file) => readOr(() => readFileSync(file, 'utf8').trim())),
  ];
  const uid = process.getuid?.() ?? -1;
  return sha256Hex(JSON.stringify([FORMAT, bwrap, binary, truePath, trueFile, trial, uid, machine]));
}

const entryName = (bwrap: string) => `bwrap-${sha256Hex(bwrap).slice(0, 16)}.json`;

/** The version a probe of this identity found bwrap working with, if one did. */
export function readProbe(dir: string, bwrap: string, identity: string): string | undefined {
  try {
    const text = readPrivateFile(dir, entryName(bwrap), 4096);
    if (text === null) return undefined;
    const entry = JSON.parse(text) as { format?: unknown; identity?: unknown; version?: unknown };
    if (entry.format !== FORMAT || entry.identity !== identity) return undefined;
    const version = entry.version;
    return typeof version === 'string' && /^\d+\.\d+(?:\.\d+)?$/.test(version) ? version : undefined;
  } catch {
    return undefined;
  }
}

/** Keep a working probe's answer (best effort: one not written only costs the next run a probe). */
export function writeProbe(dir: string, bwrap: string, identity: string, version: string): void {
  keepPrivateFile(dir, entryName(bwrap), JSON.stringify({ format: FORMAT, identity, version }));
}
