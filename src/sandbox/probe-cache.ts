import { readFileSync, readlinkSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
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
 * namespaces, its seccomp mode, no_new_privs flag, bounding and effective capabilities and LSM
 * label (another container, another confinement), and the sysctls that turn user namespaces on or
 * off. Any of them changed: the entry is not used, and the probe runs again. Any of them that cannot
 * be read (but the sysctls, absent on some kernels): no entry is used or written at all. A failed
 * probe deletes the entry (`the-loop doctor` probes afresh, so it heals a stale one);
 * `THE_LOOP_PROBE_CACHE=0` turns the cache off (the operator's git identity's too).
 *
 * Entries live in `<stateHome>/the-loop/probe-cache/` (0700; files 0600, written atomically), under
 * the state home the sandbox hides from every engine (guard/sandbox-view.ts). An entry is used only
 * when no one else could have written it (a regular file owned by this user, writable by no one else,
 * in a directory likewise). Were one planted all the same, it could only claim that a bwrap that
 * fails works: the engine's sandbox then fails to start, and the turn fails — closed, as today.
 */
const FORMAT = 'the-loop-bwrap-probe-2';

/** Where the probe's answer and the operator's git identity are kept; undefined: not at all. */
export function probeCacheDir(stateHome: string, env: Readonly<Record<string, string | undefined>>) {
  return env.THE_LOOP_PROBE_CACHE === '0' ? undefined : join(stateHome, 'the-loop', 'probe-cache');
}

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

/** The fields of /proc/self/status the answer depends on (another container, another confinement). */
const STATUS_FIELDS = ['Seccomp', 'NoNewPrivs', 'CapBnd', 'CapEff'] as const;

/** What /proc tells of this process, as read (null: could not be read). */
export interface ProcFacts {
  bootId: string | null;
  /** The user, mount and pid namespace links. */
  namespaces: readonly (string | null)[];
  status: string | null;
  /** /proc/self/attr/current: its label, or 'none' when no LSM gives one (EINVAL, ENOENT). */
  lsm: string | null;
}

/**
 * The machine's part of a probe's identity (pure); null when one of its facts is unknown — an
 * unreadable boot id, namespace, status field or label is never read as '' (two unknowns would
 * look alike), and nothing is cached then.
 */
export function machineFacts(facts: ProcFacts, sysctls: readonly string[]): string[] | null {
  if (!facts.bootId || facts.lsm === null || facts.status === null) return null;
  if (facts.namespaces.some((ns) => !ns)) return null;
  const fields: string[] = [];
  for (const field of STATUS_FIELDS) {
    const value = new RegExp(`^${field}:\\s*(\\S+)\\s*$`, 'm').exec(facts.status)?.[1];
    if (!value) return null;
    fields.push(`${field}=${value}`);
  }
  return [facts.bootId, ...(facts.namespaces as string[]), ...fields, `lsm=${facts.lsm}`, ...sysctls];
}

const readOrNull = (read: () => string): string | null => {
  try {
    return read();
  } catch {
    return null;
  }
};

/** The label of this process; 'none' when the kernel says no LSM gives one (a fact, not a failure). */
function lsmLabel(): string | null {
  try {
    return readFileSync('/proc/self/attr/current', 'utf8').replace(/\0/g, '').trim();
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    return code === 'EINVAL' || code === 'ENOENT' ? 'none' : null;
  }
}

/** This process's facts, read from /proc. */
export function readProcFacts(): ProcFacts {
  return {
    bootId: readOrNull(() => readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim()),
    namespaces: ['user', 'mnt', 'pid'].map((ns) => readOrNull(() => readlinkSync(`/proc/self/ns/${ns}`))),
    status: readOrNull(() => readFileSync('/proc/self/status', 'utf8')),
    lsm: lsmLabel(),
  };
}

/**
 * The identity of a probe of `bwrap` (its trial running `truePath` with `trial`) on this machine, as
 * a digest; null when a file or a fact of the machine cannot be read (nothing is cached then).
 */
export function probeIdentity(
  bwrap: string,
  truePath: string,
  trial: readonly string[],
  facts: ProcFacts = readProcFacts(),
): string | null {
  const binary = fileIdentity(bwrap);
  const trueFile = fileIdentity(truePath);
  if (!binary || !trueFile) return null;
  const machine = machineFacts(
    facts,
    USERNS_SYSCTLS.map((file) => readOr(() => readFileSync(file, 'utf8').trim())),
  );
  if (!machine) return null;
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

/** Forget what was kept for this binary (a failed probe; best effort). */
export function forgetProbe(dir: string, bwrap: string): void {
  try {
    rmSync(join(dir, entryName(bwrap)), { force: true });
  } catch {
    // Not ours to remove, or already gone: its identity check still guards it.
  }
}
