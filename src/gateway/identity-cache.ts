import { closeSync, constants, fstatSync, openSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { whichBinary } from '../engines/which.js';
import { keepPrivateFile, readPrivateFile } from '../os/private-file.js';
import { sha256Hex } from '../os/sha256.js';

/**
 * The operator's git identity, kept across processes (issue 16, bench:turn): `git config --global`
 * cost every `the-loop run` a process spawn before its engine could start, for an answer that
 * changes only when the operator's global git config does.
 *
 * An entry is used only for the same inputs: git's binary, HOME (git is run with PATH and HOME
 * alone), and the file identity (device, inode, size, mtime, ctime) of both global config files git
 * reads, `~/.gitconfig` and `~/.config/git/config` (absent ones too). A config that includes other
 * files (`[include]`, `[includeIf]`: their changes would not be seen) is never cached: git is asked
 * each time; so is one that is not a regular file (a FIFO, a device) or is over 1 MiB. Entries
 * live beside the bwrap probe's (`<stateHome>/the-loop/probe-cache/`, out of every sandbox's
 * reach), 0600, read only when no one else could have written them.
 */
const FORMAT = 'the-loop-git-identity-1';
const ENTRY = 'git-identity.json';

type Identity = { name?: string | undefined; email?: string | undefined };
type Env = Readonly<Record<string, string | undefined>>;

/** The inputs of `git config --global` for this environment, as a digest; null: not cacheable. */
export function identityKey(env: Env): string | null {
  const git = whichBinary('git', env.PATH ?? '/usr/bin:/bin', '/');
  const home = env.HOME ?? '';
  if (!git || !home) return null;
  const files = [join(home, '.gitconfig'), join(home, '.config', 'git', 'config')];
  const parts: string[] = [];
  for (const file of [git, ...files]) {
    const stat = statSync(file, { throwIfNoEntry: false, bigint: true });
    parts.push(stat ? [stat.dev, stat.ino, stat.size, stat.mtimeNs, stat.ctimeNs].join(':') : 'absent');
  }
  for (const file of files) {
    const text = readConfigFile(file);
    if (text === null || /include/i.test(text)) return null;
  }
  return sha256Hex(JSON.stringify([FORMAT, git, home, files, parts]));
}

/** A global config larger than this is not cached (git is asked): no one's identity needs more. */
const MAX_CONFIG_BYTES = 1024 * 1024;

/**
 * The text of a global git config file: '' when absent; null (not cacheable: git is asked) when it
 * is not a regular file — a FIFO would block the daemon, a link to /dev/zero never end — or larger
 * than MAX_CONFIG_BYTES, or cannot be read. Opened without blocking, checked on the open descriptor.
 */
export function readConfigFile(file: string): string | null {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (error) {
    return (error as { code?: unknown }).code === 'ENOENT' ? '' : null;
  }
  try {
    const stat = fstatSync(fd);
    return stat.isFile() && stat.size <= MAX_CONFIG_BYTES ? readFileSync(fd, 'utf8') : null;
  } catch {
    return null;
  } finally {
    closeSync(fd);
  }
}

const isValue = (v: unknown): v is string | undefined =>
  v === undefined || (typeof v === 'string' && v.length <= 1000);

/** The identity kept for these inputs, if one is. */
export function readIdentity(dir: string, key: string): Identity | undefined {
  const text = readPrivateFile(dir, ENTRY, 8192);
  if (text === null) return undefined;
  try {
    const entry = JSON.parse(text) as { format?: unknown; key?: unknown; name?: unknown; email?: unknown };
    if (entry.format !== FORMAT || entry.key !== key) return undefined;
    if (!isValue(entry.name) || !isValue(entry.email)) return undefined;
    return { name: entry.name, email: entry.email };
  } catch {
    return undefined;
  }
}

/** Keep what git answered for these inputs (best effort). */
export function writeIdentity(dir: string, key: string, identity: Identity): void {
  keepPrivateFile(dir, ENTRY, JSON.stringify({ format: FORMAT, key, ...identity }));
}
